/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The sending side of PFC: per lossless priority, XOFF when the receive
// backlog of that priority reaches xoff_bytes, the same XOFF again before
// it runs out (at half its time) while the backlog stays above xon, and XON
// once the backlog is down to xon_bytes. The bytes between xoff_bytes and
// the buffer's end are the headroom: what the partner still sends before
// our XOFF reaches it.

#include <array>
#include <cstdint>
#include <optional>

#include "pfc/counters.h"
#include "pfc/quanta.h"
#include "wire/mac_control.h"

namespace uroce::pfc {

struct XoffConfig {
  std::uint8_t lossless = 1u << 3;  ///< bit n: priority n is lossless
  std::uint64_t xoff_bytes = 512 * 1024;
  std::uint64_t xon_bytes = 256 * 1024;
  std::uint16_t quanta = 0xFFFF;  ///< the pause time an XOFF asks for
  std::uint32_t speed_mbps = kDefaultSpeedMbps;
};

/// The contents of one PFC frame to send.
struct PfcRequest {
  std::uint8_t class_enable = 0;
  std::array<std::uint16_t, wire::kNumPriorities> class_time{};
};

/// Folds `later` into `pending`, a request not sent yet: later states of
/// a priority replace earlier ones, other priorities stay as they were.
/// A port then holds at most one PFC frame waiting, never XON behind XOFF.
inline void merge(PfcRequest& pending, const PfcRequest& later) {
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    if (!(later.class_enable & (1u << p))) continue;
    pending.class_enable |= static_cast<std::uint8_t>(1u << p);
    pending.class_time[p] = later.class_time[p];
  }
}

class PauseGenerator {
 public:
  PauseGenerator(const XoffConfig& cfg, Counters& counters);

  /// Given each priority's receive backlog in bytes, the frame to send
  /// now, if any.
  std::optional<PfcRequest> update(const std::array<std::uint64_t, wire::kNumPriorities>& backlog,
                                   Nanos now);

  /// Whether priority `p` is held off by our XOFF.
  bool xoff(unsigned p) const { return xoff_ & (1u << p); }

 private:
  const XoffConfig cfg_;
  const Nanos refresh_ns_;
  Counters& counters_;
  std::uint8_t xoff_ = 0;
  std::array<Nanos, wire::kNumPriorities> refresh_at_{};
};

}  // namespace uroce::pfc
