/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// DCQCN's parameters are the configuration's [dcqcn] table
// (uroce::DcqcnSettings): ConnectX firmware's names, defaults and units.

#include <cstdint>

#include "uroce/config.h"

namespace uroce::cc {

using Nanos = std::uint64_t;
using DcqcnParams = DcqcnSettings;

/// g, alpha's gain: (1024 - dce_tcp_g) / 1024, so 1019 gives 5/1024.
inline double alpha_gain(const DcqcnParams& p) {
  return static_cast<double>(1024 - p.dce_tcp_g) / 1024.0;
}

}  // namespace uroce::cc
