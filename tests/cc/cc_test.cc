/* SPDX-License-Identifier: BSD-3-Clause */
// lib/cc against values worked out by hand from DCQCN's formulas.

#include <gtest/gtest.h>

#include <cmath>

#include "cc/notification_point.h"
#include "cc/reaction_point.h"

namespace uroce::cc {
namespace {

constexpr Nanos kUs = 1000;
constexpr std::uint64_t kLine = 10'000'000'000;  // 10 Gb/s

DcqcnParams paper() {
  DcqcnParams p;
  p.initial_alpha_value = 1024;  // alpha = 1
  p.rpg_threshold = 5;           // F
  p.rpg_time_reset_us = 55;      // T
  p.rpg_byte_reset = 0;          // timer only, unless a test says
  p.dce_tcp_rtt_us = 55;         // K
  p.rpg_ai_rate_mbps = 40;
  p.rpg_hai_rate_mbps = 400;
  return p;
}

TEST(ReactionPoint, TheFirstCnpHalvesTheRateAndTargetsTheOldOne) {
  ReactionPoint rp(paper(), kLine);
  EXPECT_FALSE(rp.limited());
  EXPECT_TRUE(rp.on_cnp(1000 * kUs));
  EXPECT_TRUE(rp.limited());
  EXPECT_EQ(rp.rate_bps(), kLine / 2);
  EXPECT_EQ(rp.target_bps(), kLine);
  // alpha = (1 - g) * 1 + g = 1
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  EXPECT_EQ(rp.cnp_handled(), 1u);
}

TEST(ReactionPoint, AlphaDecaysAsOneMinusGToTheNWithoutCnps) {
  const DcqcnParams p = paper();
  ReactionPoint rp(p, kLine);
  const Nanos t0 = 1000 * kUs;
  rp.on_cnp(t0);
  for (int n = 1; n <= 20; ++n) {
    rp.advance(t0 + n * 55 * kUs);
    EXPECT_NEAR(rp.alpha(), std::pow(1 - alpha_gain(p), n), 1e-12) << n;
  }
  EXPECT_DOUBLE_EQ(alpha_gain(p), 5.0 / 1024);
}

TEST(ReactionPoint, FastRecoveryClosesAllButTwoToTheMinusFOfTheGap) {
  ReactionPoint rp(paper(), kLine);
  const Nanos t0 = 1000 * kUs;
  rp.on_cnp(t0);
  const double rt = static_cast<double>(rp.target_bps());
  const double gap = rt - static_cast<double>(rp.rate_bps());
  for (int e = 1; e <= 5; ++e) {
    rp.advance(t0 + e * 55 * kUs);
    EXPECT_EQ(rp.target_bps(), kLine) << "fast recovery leaves the target";
    EXPECT_NEAR(rt - static_cast<double>(rp.rate_bps()), gap * std::pow(2, -e), 2.0) << e;
  }
}

TEST(ReactionPoint, AdditiveThenHyperIncrease) {
  DcqcnParams p = paper();
  p.rpg_byte_reset = 1'000'000;  // B: 1 MB
  ReactionPoint rp(p, kLine);
  const Nanos t0 = 1000 * kUs;
  // A cut, one increase, and a cut again: the target is then the rate
  // before that second cut, 0.75 of the line, and increases do not clamp.
  rp.on_cnp(t0);
  rp.advance(t0 + 55 * kUs);
  const Nanos c = t0 + 60 * kUs;  // the last cut: t = b = 0
  rp.on_cnp(c);
  EXPECT_NEAR(static_cast<double>(rp.target_bps()), 0.75 * kLine, 2.0);
  for (int e = 1; e <= 5; ++e) rp.advance(c + e * 55 * kUs);  // t = 5: fast recovery done
  double rt = static_cast<double>(rp.target_bps());
  double rc = static_cast<double>(rp.rate_bps());
  // The sixth timer event with b = 0 < F: additive increase.
  rp.advance(c + 6 * 55 * kUs);
  EXPECT_NEAR(static_cast<double>(rp.target_bps()), rt + 40e6, 2.0);
  EXPECT_NEAR(static_cast<double>(rp.rate_bps()), (rt + 40e6 + rc) / 2, 2.0);
  // Five byte-counter events (b = 5 = F), the last with t = 6: hyper
  // increase by min(t, b) - F + 1 = 1 times R_HAI.
  for (int k = 0; k < 4; ++k) rp.on_sent(1'000'000, c + 6 * 55 * kUs + 1);
  rt = static_cast<double>(rp.target_bps());
  rc = static_cast<double>(rp.rate_bps());
  rp.on_sent(1'000'000, c + 6 * 55 * kUs + 2);
  EXPECT_NEAR(static_cast<double>(rp.target_bps()), rt + 400e6, 2.0);
  EXPECT_NEAR(static_cast<double>(rp.rate_bps()), (rt + 400e6 + rc) / 2, 2.0);
}

TEST(ReactionPoint, RatesStayBetweenMinAndMax) {
  DcqcnParams p = paper();
  p.rpg_min_rate_mbps = 100;
  p.rpg_max_rate_mbps = 5000;
  ReactionPoint rp(p, kLine);
  EXPECT_EQ(rp.rate_bps(), 5'000'000'000u) << "rpg_max_rate below the line";
  Nanos t = 1000 * kUs;
  for (int i = 0; i < 100; ++i, t += 10 * kUs) rp.on_cnp(t);
  EXPECT_EQ(rp.rate_bps(), 100'000'000u);
  for (int i = 0; i < 100000 && rp.limited(); ++i, t += 55 * kUs) rp.advance(t);
  EXPECT_FALSE(rp.limited()) << "back at the maximum, no longer limited";
  EXPECT_EQ(rp.rate_bps(), 5'000'000'000u);
}

TEST(ReactionPoint, OneCutPerRateReduceMonitorPeriod) {
  ReactionPoint rp(paper(), kLine);  // period: 4 us
  const Nanos t0 = 1000 * kUs;
  EXPECT_TRUE(rp.on_cnp(t0));
  EXPECT_FALSE(rp.on_cnp(t0 + 1 * kUs));
  EXPECT_FALSE(rp.on_cnp(t0 + 3 * kUs));
  EXPECT_EQ(rp.rate_bps(), kLine / 2);
  EXPECT_TRUE(rp.on_cnp(t0 + 4 * kUs));
  EXPECT_EQ(rp.rate_bps(), kLine / 4);
  EXPECT_EQ(rp.cnp_handled(), 2u);
  EXPECT_EQ(rp.cnp_ignored(), 2u);
}

TEST(ReactionPoint, ConnectXDefaultsCutByHalfAndRecoverInSteps) {
  const DcqcnParams p;  // the firmware's defaults
  ReactionPoint rp(p, kLine);
  const Nanos t0 = 1000 * kUs;
  rp.on_cnp(t0);
  // alpha 1023/1024: the cut keeps 1 - 1023/2048 of the rate.
  EXPECT_NEAR(static_cast<double>(rp.rate_bps()), kLine * (1 - 1023.0 / 2048), 2.0);
  // One timer event (300 us), a second cut, then F = 1: every timer event
  // is an additive step of 5 Mb/s.
  rp.advance(t0 + 300 * kUs);
  rp.on_cnp(t0 + 310 * kUs);
  const double rt = static_cast<double>(rp.target_bps());
  rp.advance(t0 + 610 * kUs);
  EXPECT_NEAR(static_cast<double>(rp.target_bps()), rt + 5e6, 2.0);
  rp.advance(t0 + 910 * kUs);
  EXPECT_NEAR(static_cast<double>(rp.target_bps()), rt + 10e6, 2.0);
}

TEST(NotificationPoint, OneCnpPerQpPerInterval) {
  DcqcnParams p;
  p.min_time_between_cnps_us = 50;
  NotificationPoint np(p);
  const Nanos t0 = 1000 * kUs;
  int cnps_a = 0, cnps_b = 0;
  // A burst of CE marks on two QPs, one every microsecond for 200 us.
  for (Nanos t = t0; t < t0 + 200 * kUs; t += kUs) {
    cnps_a += np.on_ce(0x111, t);
    cnps_b += np.on_ce(0x222, t + 500);
  }
  EXPECT_EQ(cnps_a, 4);  // at 0, 50, 100, 150 us
  EXPECT_EQ(cnps_b, 4);
  EXPECT_EQ(np.ecn_marked(), 400u);
  EXPECT_EQ(np.cnp_sent(), 8u);
}

}  // namespace
}  // namespace uroce::cc
