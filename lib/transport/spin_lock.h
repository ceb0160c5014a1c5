/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The lock of a queue that several lcores' engines may touch at once: a
// CQ or an SRQ of a device on several lcores (engine/handoff.h), whose QPs
// may each be another lcore's. Held for one slot's copy, so waiting spins
// rather than sleeps; a queue only one engine touches never takes it. A
// holder the scheduler took off its core (lcores outnumbering cores) is
// given the core after a while of spinning.

#include <atomic>
#include <thread>

namespace uroce::transport {

class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= kSpinsBeforeYield) {
          std::this_thread::yield();
        } else {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#elif defined(__aarch64__)
          asm volatile("yield");
#endif
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpinsBeforeYield = 256;
  std::atomic<bool> locked_{false};
};

}  // namespace uroce::transport
