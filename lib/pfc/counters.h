/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// PFC counters, named as mlx5's ethtool counters so that the scripts
// operators already have read them: rx_prio3_pause, tx_prio3_pause,
// rx_prio3_pause_duration (microseconds), plus the watchdog's count.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "counters/counter_set.h"
#include "wire/mac_control.h"

namespace uroce::pfc {

/// Counted per priority; the name takes the priority after its direction
/// (rx_pause -> rx_prio3_pause).
enum class PrioCounter : std::uint8_t {
  kRxPause,          ///< PFC frames received that paused priority N
  kRxPauseDuration,  ///< microseconds priority N spent paused
  kRxResume,         ///< PFC frames received that resumed priority N (XON)
  kTxPause,          ///< XOFF frames sent for priority N, refreshes included
  kTxResume,         ///< XON frames sent for priority N
  kCount,
};

constexpr std::string_view name(PrioCounter c) {
  switch (c) {
    case PrioCounter::kRxPause:
      return "rx_pause";
    case PrioCounter::kRxPauseDuration:
      return "rx_pause_duration";
    case PrioCounter::kRxResume:
      return "rx_resume";
    case PrioCounter::kTxPause:
      return "tx_pause";
    case PrioCounter::kTxResume:
      return "tx_resume";
    case PrioCounter::kCount:
      break;
  }
  return {};
}

/// Counted for the port.
enum class PortCounter : std::uint8_t {
  kRxGlobalPause,     ///< 802.3x PAUSE frames received
  kRxPauseIgnored,    ///< pauses ignored on a priority in storm restoration
  kPfcStormDetected,  ///< watchdog trips
  kCount,
};

constexpr std::string_view name(PortCounter c) {
  switch (c) {
    case PortCounter::kRxGlobalPause:
      return "rx_global_pause";
    case PortCounter::kRxPauseIgnored:
      return "rx_pause_ignored";
    case PortCounter::kPfcStormDetected:
      return "pfc_storm_detected";
    case PortCounter::kCount:
      break;
  }
  return {};
}

class Counters {
 public:
  void inc(PrioCounter c, unsigned prio, std::uint64_t n = 1) { prio_[prio].inc(c, n); }
  void set(PrioCounter c, unsigned prio, std::uint64_t v) { prio_[prio].set(c, v); }
  std::uint64_t get(PrioCounter c, unsigned prio) const { return prio_[prio].get(c); }
  void inc(PortCounter c, std::uint64_t n = 1) { port_.inc(c, n); }
  std::uint64_t get(PortCounter c) const { return port_.get(c); }

  /// Calls fn(name, value) for every counter: priority by priority, then
  /// the port's.
  template <typename F>
  void for_each(F&& fn) const {
    for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
      prio_[p].for_each([&](std::string_view n, std::uint64_t v) {
        // mlx5's spelling: the direction, the priority, the rest.
        const std::size_t dir = n.find('_');
        fn(std::string(n.substr(0, dir)) + "_prio" + std::to_string(p) +
               std::string(n.substr(dir)),
           v);
      });
    }
    port_.for_each([&](std::string_view n, std::uint64_t v) { fn(std::string(n), v); });
  }

 private:
  std::array<counters::CounterSet<PrioCounter>, wire::kNumPriorities> prio_;
  counters::CounterSet<PortCounter> port_;
};

}  // namespace uroce::pfc
