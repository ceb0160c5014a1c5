/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// DCQCN's parameters under the names ConnectX firmware gives them
// (mlxconfig, debugfs cc_params), with its defaults. Units are in the
// comments; where the firmware's unit is not documented, the choice made
// here is said.

#include <cstdint>

namespace uroce::cc {

using Nanos = std::uint64_t;

struct DcqcnParams {
  // ---- reaction point (the sender) ----
  std::uint32_t rpg_time_reset_us = 300;  ///< rate-increase timer T
  std::uint32_t rpg_byte_reset = 32767;   ///< byte counter B, in bytes
  std::uint32_t rpg_threshold = 1;        ///< F: increase events before AI/HAI
  std::uint32_t rpg_ai_rate_mbps = 5;     ///< additive increase R_AI
  std::uint32_t rpg_hai_rate_mbps = 50;   ///< hyper increase R_HAI
  /// The cut is Rc * (1 - alpha / 2^rpg_gd) with alpha in 1/1024 units;
  /// 11 with alpha 1023 halves the rate. Kept as such: alpha here is
  /// 0..1, and the cut Rc * (1 - alpha * 512 / 2^rpg_gd).
  std::uint32_t rpg_gd = 11;
  std::uint32_t rpg_min_dec_fac = 50;               ///< a cut keeps at least this % of the rate
  std::uint32_t rpg_min_rate_mbps = 1;              ///< the rate never goes below
  std::uint32_t rpg_max_rate_mbps = 0;              ///< 0: the line rate
  std::uint32_t rate_to_set_on_first_cnp_mbps = 0;  ///< 0: the usual cut
  bool clamp_tgt_rate = false;                      ///< every cut sets Rt = Rc
  bool clamp_tgt_rate_after_time_inc = true;  ///< ... or when the last increase was the timer's
  /// g as (1024 - dce_tcp_g) / 1024: 1019 gives g = 5/1024.
  std::uint32_t dce_tcp_g = 1019;
  /// The alpha update period K, in microseconds (the firmware's unit is
  /// undocumented; 55 us is the paper's K).
  std::uint32_t dce_tcp_rtt_us = 55;
  std::uint32_t initial_alpha_value = 1023;         ///< alpha at the first CNP, 1/1024 units
  std::uint32_t rate_reduce_monitor_period_us = 4;  ///< at most one cut per period

  // ---- notification point (the receiver) ----
  std::uint32_t min_time_between_cnps_us = 4;  ///< per QP
  std::uint8_t cnp_dscp = 48;
  std::uint8_t cnp_802p_prio = 6;

  double g() const { return static_cast<double>(1024 - dce_tcp_g) / 1024.0; }
};

}  // namespace uroce::cc
