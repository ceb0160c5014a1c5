/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/poll_thread.h"

#include <chrono>

namespace uroce::engine {

namespace {
// The program counts as driving for this long after it last did.
constexpr Nanos kProgramDrivingNs = 200'000;
// While the program drives, the poll thread still looks in this often.
constexpr int kLookInUs = 20;
// Idle iterations before the poll thread starts to nap between them.
constexpr int kSpinsBeforeNap = 256;
// How long a program thread finds nothing before it starts to yield.
constexpr Nanos kSpinBeforeYieldNs = 50'000;
// How often the housekeeping callback runs.
constexpr Nanos kHousekeepingNs = 100'000'000;
// Since when this program thread has found nothing to do; 0 while it
// finds work (or posts it).
thread_local Nanos t_empty_since = 0;
}  // namespace

PollThread::PollThread(Engine& engine, std::function<void()> housekeeping)
    : engine_(engine), housekeeping_(std::move(housekeeping)), thread_([this] { run(); }) {}

void PollThread::maybe_housekeep(Nanos now) {
  if (!housekeeping_ || now < housekeeping_at_) return;
  housekeeping_at_ = now + kHousekeepingNs;
  housekeeping_();
}

PollThread::~PollThread() { stop(); }

void PollThread::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

std::uint32_t PollThread::poll_once() {
  const Nanos now = now_ns();
  program_drove_at_.store(now, std::memory_order_relaxed);
  std::uint32_t work = 0;
  engine_.try_poll_completions_first(now, &work);
  return work;
}

void PollThread::pace(std::uint32_t work) {
  // A program spinning on an empty CQ of a paced or idle QP would hold a
  // core that the peers sharing the machine need. A round trip's worth of
  // spinning keeps latency; past that, give the core up on every empty
  // look. When no one else is runnable, yield returns at once.
  if (work != 0) {
    t_empty_since = 0;
    return;
  }
  const Nanos now = now_ns();
  if (t_empty_since == 0) {
    t_empty_since = now;
  } else if (now - t_empty_since > (engine_.port().shared() ? 0 : kSpinBeforeYieldNs)) {
    std::this_thread::yield();
  }
}

void PollThread::send_now() {
  const Nanos now = now_ns();
  note_post(now);
  engine_.try_send(now);
}

void PollThread::note_post() {
  // A streaming program posts millions of times a second, and a clock
  // read each time was 2 % of its time. A flag instead, written only when
  // clear; the poll thread stamps the time when it sees it.
  if (!program_posted_.load(std::memory_order_relaxed))
    program_posted_.store(true, std::memory_order_relaxed);
  t_empty_since = 0;
}

void PollThread::note_post(Nanos now) {
  program_drove_at_.store(now, std::memory_order_relaxed);
  // A post is work, not a look at an empty CQ: a ping-pong whose replies
  // the poll thread happened to receive must not be taken for an idle
  // spinner and made to yield on every look (it then ran at 40 us a
  // round trip instead of 2).
  t_empty_since = 0;
}

void PollThread::run() {
  // The thread that polls the port most says so, once (DPDK registers it
  // with EAL); a program's thread is registered by the port when it first
  // drives the engine (DpdkPort::attach_program_thread).
  engine_.port().attach_thread();
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const Nanos now = now_ns();
    maybe_housekeep(now);
    if (program_posted_.load(std::memory_order_relaxed)) {
      program_posted_.store(false, std::memory_order_relaxed);
      program_drove_at_.store(now, std::memory_order_relaxed);
    }
    if (now - program_drove_at_.load(std::memory_order_relaxed) < kProgramDrivingNs) {
      // The program is driving: mostly stay out of its way. But it may be
      // waiting on memory rather than on its CQ between calls (ib_write_lat
      // spins on its buffer for the peer's WRITE), so look in now and then
      // and let what arrived land; try_poll steps aside if it is driving.
      std::uint32_t work = 0;
      engine_.try_poll(now, &work);
      if (work == 0) std::this_thread::sleep_for(std::chrono::microseconds(kLookInUs));
      continue;
    }
    std::uint32_t work = 0;
    if (engine_.try_poll(now, &work) && work > 0) {
      idle = 0;
      continue;
    }
    // Nothing to do: spin a little for latency, then nap so a passive
    // peer costs little CPU; timers are coarser than the nap anyway.
    if (++idle > kSpinsBeforeNap) {
      const bool deep = idle > 4 * kSpinsBeforeNap && waiters_.load(std::memory_order_relaxed) == 0;
      std::this_thread::sleep_for(std::chrono::microseconds(deep ? 200 : 20));
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace uroce::engine
