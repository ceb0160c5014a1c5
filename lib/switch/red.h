/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// ECN marking at a switch queue, as DCQCN's congestion point (Zhu et al.,
// SIGCOMM 2015, section 3.1): RED on the instantaneous queue depth, the
// probability growing linearly from 0 at kmin to pmax at kmax, and every
// packet marked above kmax.

#include <cstdint>

namespace uroce::sw {

struct EcnConfig {
  bool enabled = false;
  std::uint64_t kmin_bytes = 5 * 1024;
  std::uint64_t kmax_bytes = 200 * 1024;
  double pmax = 0.01;
};

/// The probability that a packet finding `depth` bytes queued is marked.
constexpr double mark_probability(std::uint64_t depth, const EcnConfig& c) {
  if (depth <= c.kmin_bytes) return 0;
  if (depth >= c.kmax_bytes) return 1;
  return c.pmax * static_cast<double>(depth - c.kmin_bytes) /
         static_cast<double>(c.kmax_bytes - c.kmin_bytes);
}

}  // namespace uroce::sw
