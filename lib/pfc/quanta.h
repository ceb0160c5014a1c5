/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Pause time arithmetic (IEEE 802.3 Annex 31B.2): a pause quantum is 512
// bit times at the link's speed, so the same quanta mean 3.36 ms at
// 10 Gb/s and 84 us at 400 Gb/s.

#include <cstdint>

namespace uroce::pfc {

using Nanos = std::uint64_t;

/// Link speed assumed when the port does not report one.
inline constexpr std::uint32_t kDefaultSpeedMbps = 10000;

/// How long `quanta` pause quanta last at `speed_mbps`, rounded up to
/// whole nanoseconds (a pause lasts at least what it asked for).
constexpr Nanos quanta_to_ns(std::uint16_t quanta, std::uint32_t speed_mbps) {
  const std::uint64_t mbps = speed_mbps ? speed_mbps : kDefaultSpeedMbps;
  // 512 bits at speed_mbps * 1e6 bit/s = 512000 / speed_mbps ns.
  return (std::uint64_t{quanta} * 512000 + mbps - 1) / mbps;
}

}  // namespace uroce::pfc
