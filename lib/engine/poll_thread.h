/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The device's poll thread, and progress driven by the program. A NIC
// makes progress without the program, so uroce runs a poll thread; but a
// spinning thread per process starves programs on small machines, so a
// program waiting for completions drives the engine itself (drive()), and
// while it does the poll thread steps back.

#include <atomic>
#include <functional>
#include <thread>

#include "engine/engine.h"

namespace uroce::engine {

class PollThread {
 public:
  /// `housekeeping`, if set, runs on the poll thread about every 100 ms
  /// (the device watches its link with it).
  explicit PollThread(Engine& engine, std::function<void()> housekeeping = {});
  ~PollThread();
  PollThread(const PollThread&) = delete;
  PollThread& operator=(const PollThread&) = delete;

  /// Called by a program thread that wants progress now (from poll_cq, a
  /// completion wait): runs one iteration if the engine is free and tells
  /// the poll thread the program is driving.
  void drive() { pace(poll_once()); }
  /// drive() without giving the core up: for a program thread that
  /// drives the engines of several lcores, then paces once (pace) with
  /// all their work. Returns the frames received and sent.
  std::uint32_t poll_once();
  /// After a program's drive: a round trip's worth of empty looks spins,
  /// past that each empty look yields the core (`work` 0: nothing moved).
  void pace(std::uint32_t work);
  /// Called by a program thread that just posted work (the doorbell):
  /// sends it now if the engine is free (Engine::try_send) and tells the
  /// poll thread the program is driving. A program posting a stream of
  /// WRs then pays for the transmit path alone on each post; what came
  /// in is taken when it polls its CQ, as a NIC's completions are.
  void send_now();
  /// Called by a program thread that posted work it leaves for the next
  /// pass (a deep send queue): tells the poll thread the program is
  /// driving, so that it looks in every few tens of microseconds rather
  /// than taking its long nap, as send_now() does. It reads no clock: the
  /// poll thread stamps the post when it next looks.
  void note_post();

  /// Stops the thread (the process is ending); drive() still works.
  /// The thread that calls it only, once.
  void stop();

  /// A program thread is about to sleep until the engine has something
  /// for it (a completion event): the poll thread then naps only briefly,
  /// since the program's latency is now the poll thread's. Pair with
  /// end_wait().
  void begin_wait() { waiters_.fetch_add(1, std::memory_order_relaxed); }
  void end_wait() { waiters_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  void note_post(Nanos now);
  void run();
  void maybe_housekeep(Nanos now);

  Engine& engine_;
  const std::function<void()> housekeeping_;
  Nanos housekeeping_at_ = 0;
  std::atomic<Nanos> program_drove_at_{0};
  /// A post since the poll thread last looked (note_post()).
  std::atomic<bool> program_posted_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> waiters_{0};
  std::thread thread_;
};

}  // namespace uroce::engine
