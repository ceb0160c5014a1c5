/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The device's poll thread, and progress driven by the program. A NIC
// makes progress without the program, so uroce runs a poll thread; but a
// spinning thread per process starves programs on small machines, so a
// program waiting for completions drives the engine itself (drive()), and
// while it does the poll thread steps back.

#include <atomic>
#include <thread>

#include "engine/engine.h"

namespace uroce::engine {

class PollThread {
 public:
  explicit PollThread(Engine& engine);
  ~PollThread();
  PollThread(const PollThread&) = delete;
  PollThread& operator=(const PollThread&) = delete;

  /// Called by a program thread that wants progress now (from poll_cq,
  /// post_send, a completion wait): runs one iteration if the engine is
  /// free and tells the poll thread the program is driving.
  void drive();

 private:
  void run();

  Engine& engine_;
  std::atomic<Nanos> program_drove_at_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace uroce::engine
