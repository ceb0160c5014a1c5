/* SPDX-License-Identifier: BSD-3-Clause */
#include "cc/reaction_point.h"

#include <algorithm>

namespace uroce::cc {

namespace {
constexpr Nanos kUs = 1000;
}  // namespace

ReactionPoint::ReactionPoint(const DcqcnParams& p, std::uint64_t line_rate_bps)
    : p_(p),
      max_bps_(p.rpg_max_rate_mbps != 0
                   ? std::min<std::uint64_t>(line_rate_bps,
                                             std::uint64_t{p.rpg_max_rate_mbps} * 1'000'000)
                   : line_rate_bps),
      min_bps_(std::min<std::uint64_t>(std::uint64_t{p.rpg_min_rate_mbps} * 1'000'000, max_bps_)),
      g_(alpha_gain(p)),
      rc_(max_bps_),
      rt_(max_bps_),
      alpha_(static_cast<double>(p.initial_alpha_value) / 1024.0) {}

std::uint64_t ReactionPoint::clamp(double r) const {
  return static_cast<std::uint64_t>(
      std::clamp(r, static_cast<double>(min_bps_), static_cast<double>(max_bps_)));
}

bool ReactionPoint::on_cnp(Nanos now) {
  if (cut_before_ && now < last_cut_ + std::uint64_t{p_.rate_reduce_monitor_period_us} * kUs) {
    ++ignored_;
    cnp_in_alpha_period_ = true;
    return false;
  }
  ++handled_;
  cut(now);
  return true;
}

void ReactionPoint::cut(Nanos now) {
  const bool first = !active_;
  // A QP that was not limited starts from alpha's initial value.
  if (first) alpha_ = static_cast<double>(p_.initial_alpha_value) / 1024.0;
  if (first || p_.clamp_tgt_rate || (p_.clamp_tgt_rate_after_time_inc && last_increase_by_timer_) ||
      t_ + b_ > 0)
    rt_ = rc_;
  if (first && p_.rate_to_set_on_first_cnp_mbps != 0) {
    rc_ = clamp(static_cast<double>(p_.rate_to_set_on_first_cnp_mbps) * 1e6);
  } else {
    // alpha in 1/1024 units over 2^rpg_gd: rpg_gd 11 is alpha / 2.
    const double factor = 1.0 - alpha_ * 1024.0 / static_cast<double>(1u << p_.rpg_gd);
    const double floor = static_cast<double>(p_.rpg_min_dec_fac) / 100.0;
    rc_ = clamp(static_cast<double>(rc_) * std::max(factor, floor));
  }
  // This CNP's alpha update is done; the next period starts now.
  alpha_ = (1 - g_) * alpha_ + g_;
  cnp_in_alpha_period_ = false;
  next_alpha_ = now + std::uint64_t{p_.dce_tcp_rtt_us} * kUs;
  active_ = true;
  t_ = b_ = 0;
  bytes_ = 0;
  last_increase_by_timer_ = false;
  next_timer_ = now + std::uint64_t{p_.rpg_time_reset_us} * kUs;
  last_cut_ = now;
  cut_before_ = true;
}

void ReactionPoint::on_sent(std::uint32_t bytes, Nanos now) {
  if (!active_) return;
  bytes_ += bytes;
  while (active_ && p_.rpg_byte_reset != 0 && bytes_ >= p_.rpg_byte_reset) {
    bytes_ -= p_.rpg_byte_reset;
    ++b_;
    increase(false);
  }
  advance(now);
}

void ReactionPoint::advance(Nanos now) {
  if (!active_) return;
  const Nanos k = std::uint64_t{p_.dce_tcp_rtt_us} * kUs;
  while (k != 0 && now >= next_alpha_) {
    // A period with CNPs merged into a cut raises alpha; one without
    // decays it.
    alpha_ = cnp_in_alpha_period_ ? (1 - g_) * alpha_ + g_ : (1 - g_) * alpha_;
    cnp_in_alpha_period_ = false;
    next_alpha_ += k;
  }
  const Nanos t = std::uint64_t{p_.rpg_time_reset_us} * kUs;
  while (active_ && t != 0 && now >= next_timer_) {
    ++t_;
    increase(true);
    next_timer_ += t;
  }
}

void ReactionPoint::increase(bool by_timer) {
  last_increase_by_timer_ = by_timer;
  const std::uint32_t f = p_.rpg_threshold;
  const double ai = static_cast<double>(p_.rpg_ai_rate_mbps) * 1e6;
  const double hai = static_cast<double>(p_.rpg_hai_rate_mbps) * 1e6;
  if (std::max(t_, b_) < f) {
    // Fast recovery: back toward the rate before the cut.
  } else if (std::min(t_, b_) >= f) {
    rt_ = clamp(static_cast<double>(rt_) + static_cast<double>(std::min(t_, b_) - f + 1) * hai);
  } else {
    rt_ = clamp(static_cast<double>(rt_) + ai);
  }
  // Rounded up, so that the rate meets the target rather than creeping
  // toward it forever.
  rc_ = clamp(static_cast<double>((rt_ + rc_ + 1) / 2));
  if (rc_ >= max_bps_ && rt_ >= max_bps_) active_ = false;  // back at line rate
}

Nanos ReactionPoint::next_event() const {
  if (!active_) return 0;
  return std::min(next_timer_, next_alpha_);
}

}  // namespace uroce::cc
