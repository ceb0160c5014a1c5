/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The line rate of an egress port: a token bucket in bytes that charges
// each frame its wire size (preamble, SFD and inter-frame gap, 20 bytes,
// plus the 4-byte FCS the port adds), so that a 10gbit port carries what
// a 10 Gb/s Ethernet link does.

#include <algorithm>
#include <cstdint>

#include "pfc/quanta.h"

namespace uroce::sw {

using pfc::Nanos;

inline constexpr std::uint32_t kWireOverhead = 24;

class Shaper {
 public:
  /// `rate_bps` 0: unlimited.
  explicit Shaper(std::uint64_t rate_bps = 0, std::uint64_t burst_bytes = 32 * 1024)
      : rate_bps_(rate_bps), burst_(static_cast<double>(burst_bytes)) {}

  bool limited() const { return rate_bps_ != 0; }
  std::uint64_t rate_bps() const { return rate_bps_; }

  /// Whether a frame may start now (the bucket is not in debt).
  bool ready(Nanos now) {
    if (!limited()) return true;
    refill(now);
    return tokens_ >= 0;
  }
  /// Charges a frame of `len` bytes; the bucket may go into debt, which
  /// delays the next frame by exactly the time this one takes.
  void charge(std::uint32_t len) {
    if (limited()) tokens_ -= static_cast<double>(len + kWireOverhead);
  }
  /// When the bucket is out of debt (for a sleeping caller).
  Nanos ready_at(Nanos now) {
    if (!limited() || tokens_ >= 0) return now;
    return now + static_cast<Nanos>(-tokens_ * 8e9 / static_cast<double>(rate_bps_)) + 1;
  }

 private:
  void refill(Nanos now) {
    if (last_ != 0 && now > last_)
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_) *
                                               static_cast<double>(rate_bps_) / 8e9);
    last_ = now;
  }

  std::uint64_t rate_bps_;
  double burst_;
  double tokens_ = 0;
  Nanos last_ = 0;
};

}  // namespace uroce::sw
