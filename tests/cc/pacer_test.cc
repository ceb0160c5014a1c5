/* SPDX-License-Identifier: BSD-3-Clause */
// The per-QP pacer (cc::QpCongestion as the transport's TxGate) on
// simulated time: a QP that DCQCN has not limited passes untouched; a
// limited one leaves on the rate's schedule to within a nanosecond, keeps
// its average under a coarse poll loop, and after an idle spell bursts no
// more than its bucket.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cc/qp_congestion.h"

namespace uroce::cc {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1'000'000;
constexpr std::uint64_t kLine = 10'000'000'000;
constexpr std::uint32_t kPacket = 1024 + 58;  // a 1024-byte payload and its headers
constexpr double kBucket = 16384;             // the pacer's bucket at rates under 2.6 Gb/s

// The first CNP sets the rate to `mbps`; no increase comes within a test.
DcqcnParams fixed_rate(std::uint32_t mbps) {
  DcqcnParams p;
  p.rate_to_set_on_first_cnp_mbps = mbps;
  p.rpg_time_reset_us = 100'000'000;
  p.rpg_byte_reset = 0;
  return p;
}

struct Pacer {
  explicit Pacer(const DcqcnParams& p) : np(p), gate(p, kLine, true, true, np, counters, [] {}) {}
  NotificationPoint np;
  Counters counters;
  QpCongestion gate;
};

TEST(Pacer, AQpThatWasNeverCutPassesUntouched) {
  Pacer p(fixed_rate(100));
  for (Nanos t = kMs; t < kMs + 1000; ++t) {
    Nanos retry = 0;
    ASSERT_TRUE(p.gate.admit(kPacket, t, &retry));
    EXPECT_EQ(retry, 0);
  }
}

TEST(Pacer, ALimitedQpLeavesOnTheRatesScheduleToTheNanosecond) {
  Pacer p(fixed_rate(100));
  const Nanos t0 = 10 * kMs;
  p.gate.on_cnp(1, t0);
  ASSERT_EQ(p.gate.rate_bps(), 100'000'000u);
  // A sender with packets always ready, that comes back exactly when the
  // pacer says: the k-th packet leaves at k packet times.
  const double gap_ns = kPacket * 8 / 0.1;  // at 100 Mb/s, 0.1 bit/ns
  Nanos now = t0;
  double worst = 0;
  for (int k = 0; k < 10'000; ++k) {
    Nanos retry = 0;
    while (!p.gate.admit(kPacket, now, &retry)) {
      ASSERT_GT(retry, now);
      now = retry;
    }
    worst = std::max(worst, std::abs(static_cast<double>(now - t0) - k * gap_ns));
  }
  EXPECT_LE(worst, 2.0) << "ns from the ideal departure time";
}

TEST(Pacer, APollLoopThatComesRoundLateStillGetsTheRate) {
  for (std::uint32_t mbps : {10u, 100u, 1000u}) {
    Pacer p(fixed_rate(mbps));
    const Nanos t0 = 10 * kMs;
    p.gate.on_cnp(1, t0);
    // The loop visits every 37 us and sends while the pacer lets it.
    std::uint64_t sent = 0;
    const Nanos end = t0 + 1000 * kMs;
    for (Nanos now = t0; now < end; now += 37 * kUs) {
      Nanos retry = 0;
      while (p.gate.admit(kPacket, now, &retry)) sent += kPacket;
    }
    const double rate = static_cast<double>(sent) * 8 / 1.0;  // over 1 s
    EXPECT_NEAR(rate / 1e6, mbps, mbps * 0.01) << mbps << " Mb/s";
  }
}

TEST(Pacer, AfterAnIdleSpellTheBurstIsNoMoreThanTheBucket) {
  Pacer p(fixed_rate(100));
  const Nanos t0 = 10 * kMs;
  p.gate.on_cnp(1, t0);
  Nanos retry = 0;
  ASSERT_TRUE(p.gate.admit(kPacket, t0, &retry));
  // 50 ms with nothing to send would be 625 KB of credit at 100 Mb/s.
  const Nanos later = t0 + 50 * kMs;
  std::uint64_t burst = 0;
  while (p.gate.admit(kPacket, later, &retry)) burst += kPacket;
  EXPECT_GT(burst, 0u);
  EXPECT_LE(static_cast<double>(burst), kBucket + kPacket);
  EXPECT_GT(retry, later);
}

}  // namespace
}  // namespace uroce::cc
