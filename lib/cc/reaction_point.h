/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The DCQCN reaction point of one QP (Zhu et al., SIGCOMM 2015, section
// 3.3, with ConnectX's knobs): a current rate Rc, a target rate Rt and
// alpha, the estimate of how congested the path is.
//
//   CNP:       Rt = Rc (first CNP, or as the clamp settings say);
//              Rc = max(min, Rc * (1 - alpha/2)); alpha = (1-g) alpha + g;
//              at most one cut per rate_reduce_monitor_period (later CNPs
//              of the period are merged into it).
//   no CNP for K: alpha = (1-g) alpha.
//   increase events, every T (timer) and every B bytes sent (byte
//   counter), counted t and b since the last cut:
//     max(t, b) < F       fast recovery  Rc = (Rt + Rc) / 2
//     one of them >= F    additive       Rt += R_AI,  Rc = (Rt + Rc) / 2
//     both >= F           hyper          Rt += i R_HAI (i = min(t,b) - F + 1), Rc = (Rt + Rc) / 2
//   Rates stay within [rpg_min_rate, rpg_max_rate or the line rate]; at
//   the line rate the QP is no longer limited and its timers stop.

#include <cstdint>

#include "cc/params.h"

namespace uroce::cc {

class ReactionPoint {
 public:
  ReactionPoint(const DcqcnParams& p, std::uint64_t line_rate_bps);

  /// A CNP for this QP arrived. Returns true if it cut the rate, false if
  /// it was merged into the cut of the current monitor period.
  bool on_cnp(Nanos now);
  /// `bytes` left at `now` (drives the byte counter).
  void on_sent(std::uint32_t bytes, Nanos now);
  /// Runs the timers due by `now` (alpha decay, rate increase).
  void advance(Nanos now);

  /// Whether the QP is held below the line rate.
  bool limited() const { return active_; }
  std::uint64_t rate_bps() const { return rc_; }
  std::uint64_t target_bps() const { return rt_; }
  double alpha() const { return alpha_; }
  /// The next time advance() has work, 0 when none.
  Nanos next_event() const;

  std::uint64_t cnp_handled() const { return handled_; }
  std::uint64_t cnp_ignored() const { return ignored_; }

 private:
  void cut(Nanos now);
  void increase(bool by_timer);
  std::uint64_t clamp(double r) const;

  const DcqcnParams p_;
  const std::uint64_t max_bps_;
  const std::uint64_t min_bps_;
  const double g_;
  bool active_ = false;
  std::uint64_t rc_;
  std::uint64_t rt_;
  double alpha_;
  std::uint32_t t_ = 0;  ///< timer events since the last cut
  std::uint32_t b_ = 0;  ///< byte-counter events since the last cut
  std::uint64_t bytes_ = 0;
  bool last_increase_by_timer_ = false;
  bool cnp_in_alpha_period_ = false;
  Nanos next_timer_ = 0;
  Nanos next_alpha_ = 0;
  Nanos last_cut_ = 0;
  bool cut_before_ = false;
  std::uint64_t handled_ = 0;
  std::uint64_t ignored_ = 0;
};

}  // namespace uroce::cc
