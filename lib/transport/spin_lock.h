/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The lock of a queue that several lcores' engines may touch at once: a
// CQ or an SRQ of a device on several lcores (engine/handoff.h), whose QPs
// may each be another lcore's. Held for one slot's copy, so waiting spins
// rather than sleeps; a queue only one engine touches never takes it.

#include <atomic>

namespace uroce::transport {

class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace uroce::transport
