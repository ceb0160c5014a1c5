/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// PFC counters, named as mlx5's ethtool counters so that the scripts
// operators already have read them: rx_prio3_pause, tx_prio3_pause,
// rx_prio3_pause_duration (microseconds), plus the watchdog's count.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "wire/mac_control.h"

namespace uroce::pfc {

/// A counter written by the engine thread and read from anywhere.
class Counter {
 public:
  void add(std::uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void set(std::uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  std::uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

struct Counters {
  using PerPriority = std::array<Counter, wire::kNumPriorities>;

  PerPriority rx_pause;           ///< PFC frames received that paused priority N
  PerPriority rx_pause_duration;  ///< microseconds priority N spent paused
  PerPriority rx_resume;          ///< PFC frames received that resumed priority N (XON)
  PerPriority tx_pause;           ///< XOFF frames sent for priority N, refreshes included
  PerPriority tx_resume;          ///< XON frames sent for priority N
  Counter rx_global_pause;        ///< 802.3x PAUSE frames received
  Counter rx_pause_ignored;       ///< pauses ignored on a priority in storm restoration
  Counter pfc_storm_detected;     ///< watchdog trips

  /// Calls fn(name, value) for every counter.
  template <typename F>
  void for_each(F&& fn) const {
    for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
      const std::string prio = "prio" + std::to_string(p);
      fn("rx_" + prio + "_pause", rx_pause[p].get());
      fn("rx_" + prio + "_pause_duration", rx_pause_duration[p].get());
      fn("rx_" + prio + "_resume", rx_resume[p].get());
      fn("tx_" + prio + "_pause", tx_pause[p].get());
      fn("tx_" + prio + "_resume", tx_resume[p].get());
    }
    fn(std::string("rx_global_pause"), rx_global_pause.get());
    fn(std::string("rx_pause_ignored"), rx_pause_ignored.get());
    fn(std::string("pfc_storm_detected"), pfc_storm_detected.get());
  }
};

}  // namespace uroce::pfc
