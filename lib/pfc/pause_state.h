/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The receiving side of PFC and PAUSE: which of our priorities the link
// partner has paused, and until when (IEEE 802.1Qbb 36.1.3.1,
// 802.3 Annex 31B). An XOFF pauses a priority for its time in quanta and
// every new one restarts the timer; a zero time (XON) resumes it at once;
// a clear enable bit leaves the priority alone. 802.3x PAUSE pauses all
// eight. Only the priorities configured lossless honour PFC.
//
// The watchdog (as SONiC's PFC watchdog): a priority paused without a
// break for longer than the detection time is in a PFC storm, most likely
// a stuck peer. It is released and pauses on it are ignored for the
// restoration time; then they are honoured again.

#include <array>
#include <cstdint>

#include "pfc/counters.h"
#include "pfc/quanta.h"
#include "wire/mac_control.h"

namespace uroce::pfc {

struct WatchdogConfig {
  Nanos detection_ns = 200'000'000;    ///< 0 turns the watchdog off
  Nanos restoration_ns = 200'000'000;  ///< pauses ignored this long after a storm
};

class PauseState {
 public:
  /// `lossless`: bit n set means priority n honours PFC.
  PauseState(std::uint8_t lossless, std::uint32_t speed_mbps, WatchdogConfig watchdog,
             Counters& counters);

  /// Applies a received, well-formed PFC or PAUSE frame.
  void on_frame(const wire::MacControlFrame& frame, Nanos now);

  /// The priorities paused at `now` (bit n: priority n), after expiring
  /// pauses whose time is up and running the watchdog. Cheap when nothing
  /// is paused.
  std::uint8_t paused(Nanos now);

  /// Priorities whose storm the watchdog detected since the last call.
  std::uint8_t take_new_storms() {
    const std::uint8_t s = new_storms_;
    new_storms_ = 0;
    return s;
  }

 private:
  void pause(unsigned p, std::uint16_t quanta, Nanos now);
  void end(unsigned p, Nanos at);
  void publish_duration(unsigned p, Nanos now);

  const std::uint8_t lossless_;
  const std::uint32_t speed_mbps_;
  const WatchdogConfig watchdog_;
  Counters& counters_;
  std::uint8_t active_ = 0;  ///< priorities with a pause running
  std::uint8_t new_storms_ = 0;
  std::array<Nanos, wire::kNumPriorities> until_{};        ///< pause ends
  std::array<Nanos, wire::kNumPriorities> since_{};        ///< the unbroken pause began
  std::array<Nanos, wire::kNumPriorities> storm_until_{};  ///< pauses ignored until
  std::array<Nanos, wire::kNumPriorities> paused_ns_{};    ///< ended pauses, summed
};

}  // namespace uroce::pfc
