/* SPDX-License-Identifier: BSD-3-Clause */
// lib/port's impairment model: seeded decisions at their rates, one bit
// flipped where the receiver must notice, delay within its jitter.

#include "port/impairment.h"

#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <vector>

#include "support/wire_samples.h"
#include "wire/arp.h"
#include "wire/opcode.h"
#include "wire/roce_parser.h"

namespace uroce::port {
namespace {

struct Counts {
  int drop = 0, duplicate = 0, reorder = 0, corrupt = 0;
  bool operator==(const Counts&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Counts& c) {
    return os << c.drop << " dropped, " << c.duplicate << " duplicated, " << c.reorder
              << " reordered, " << c.corrupt << " corrupted";
  }
};

Counts decide(Impairment& m, int frames) {
  Counts c;
  for (int i = 0; i < frames; ++i) {
    const ImpairmentDecision d = m.decide();
    c.drop += d.drop;
    c.duplicate += d.duplicate;
    c.reorder += d.reorder;
    c.corrupt += d.corrupt;
  }
  return c;
}

// Drop, duplicate, reorder, corrupt.
ImpairmentConfig rates(double drop, double duplicate, double reorder, double corrupt) {
  return {drop, duplicate, reorder, corrupt};
}

TEST(Impairment, OneSeedGivesOneSequenceOfDecisions) {
  const ImpairmentConfig cfg = rates(0.1, 0.05, 0.05, 0.02);
  Impairment a(cfg, 42), b(cfg, 42), other(cfg, 43);
  const Counts ca = decide(a, 10000);
  // Expect: the same counts on every machine and standard library (the
  // draws come from mt19937_64's bits, not from a distribution).
  EXPECT_EQ(ca, (Counts{1042, 440, 424, 171}));
  EXPECT_EQ(decide(b, 10000), ca);
  EXPECT_NE(decide(other, 10000), ca);
}

TEST(Impairment, DecisionsComeAtTheirRates) {
  Impairment m(rates(0.2, 0.1, 0.05, 0.01), 7);
  const int n = 100000;
  const Counts c = decide(m, n);
  // A dropped frame is only dropped: the others' rates apply to the rest.
  EXPECT_NEAR(c.drop, 0.2 * n, 0.01 * n);
  EXPECT_NEAR(c.duplicate, 0.1 * 0.8 * n, 0.01 * n);
  EXPECT_NEAR(c.reorder, 0.05 * 0.8 * n, 0.005 * n);
  EXPECT_NEAR(c.corrupt, 0.01 * 0.8 * n, 0.002 * n);
  Impairment none(ImpairmentConfig{}, 7);
  EXPECT_FALSE(none.active());
  EXPECT_EQ(decide(none, 1000), Counts{});
}

TEST(Impairment, ADroppedFrameIsOnlyDropped) {
  Impairment m(rates(0.5, 1, 1, 1), 3);
  for (int i = 0; i < 1000; ++i) {
    const ImpairmentDecision d = m.decide();
    if (d.drop) {
      EXPECT_FALSE(d.duplicate || d.reorder || d.corrupt);
    } else {
      EXPECT_TRUE(d.duplicate && d.reorder && d.corrupt);
    }
  }
}

// The one byte two frames of the same length differ in, and that it is a
// single bit; -1 when they do not differ in exactly one bit.
long flipped_byte(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  long at = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const unsigned x = a[i] ^ b[i];
    if (at != -1 || (x & (x - 1)) != 0) return -1;
    at = static_cast<long>(i);
  }
  return at;
}

TEST(Impairment, CorruptionFlipsOneBitTheIcrcCovers) {
  Impairment m(rates(0, 0, 0, 1), 11);
  std::mt19937_64 rng(5);
  const std::uint8_t send = static_cast<std::uint8_t>(wire::Opcode::kRcSendOnly);
  const std::uint8_t write = static_cast<std::uint8_t>(wire::Opcode::kRcRdmaWriteFirst);
  for (bool ipv6 : {false, true}) {
    for (bool vlan : {false, true}) {
      SCOPED_TRACE(testing::Message() << (ipv6 ? "IPv6" : "IPv4") << (vlan ? ", tagged" : ""));
      const wire::RoceRoute route = test::sample_route(ipv6, vlan);
      for (int i = 0; i < 500; ++i) {
        const auto frame = test::build_frame(route, test::sample_packet(i % 2 ? send : write, rng));
        const Corruptible c = corruptible(frame);
        // Expect: the flip lands past the UDP header, never on the BTH's
        // FECN/BECN byte, and the parser refuses the frame.
        EXPECT_EQ(c.from, route.l3_offset() + (ipv6 ? 40u : 20u) + 8u);
        EXPECT_EQ(c.masked, c.from + 4);
        auto bad = frame;
        ASSERT_TRUE(m.corrupt(bad));
        const long at = flipped_byte(frame, bad);
        ASSERT_NE(at, -1) << "exactly one bit";
        EXPECT_GE(static_cast<std::size_t>(at), c.from);
        EXPECT_NE(static_cast<std::size_t>(at), c.masked);
        wire::RocePacket pkt;
        ASSERT_EQ(wire::parse_roce_frame(frame, pkt), wire::DropReason::kNone);
        EXPECT_NE(wire::parse_roce_frame(bad, pkt), wire::DropReason::kNone) << "byte " << at;
      }
    }
  }
}

TEST(Impairment, OtherFramesAreCorruptedPastTheirEthernetHeader) {
  Impairment m(rates(0, 0, 0, 1), 12);
  std::vector<std::uint8_t> arp(60);
  wire::build_arp_request(arp, {{2, 0, 0, 0, 0, 1}}, 0x0A000001, 0x0A000002);
  EXPECT_EQ(corruptible(arp).from, 14u);
  EXPECT_EQ(corruptible(arp).masked, SIZE_MAX);
  for (int i = 0; i < 200; ++i) {
    auto bad = arp;
    ASSERT_TRUE(m.corrupt(bad));
    EXPECT_GE(flipped_byte(arp, bad), 14);
  }
  std::vector<std::uint8_t> runt(14);
  EXPECT_FALSE(m.corrupt(runt)) << "nothing past the header to flip";
  EXPECT_EQ(runt, std::vector<std::uint8_t>(14));
}

TEST(Impairment, DelayIsFixedPlusJitterWithinItsBound) {
  ImpairmentConfig cfg;
  cfg.delay_ns = 1000;
  Impairment fixed(cfg, 1);
  EXPECT_TRUE(fixed.active());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(fixed.delay(), 1000u);
  cfg.jitter_ns = 500;
  Impairment jittered(cfg, 1);
  Nanos lo = ~Nanos{0}, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const Nanos d = jittered.delay();
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_EQ(lo, 1000u);
  EXPECT_EQ(hi, 1500u);
}

TEST(Impairment, CountersAreNamed) {
  ImpairmentCounters c;
  c.inc(ImpairmentCounter::kDropped, 3);
  c.inc(ImpairmentCounter::kDelayed);
  std::vector<std::pair<std::string, std::uint64_t>> seen;
  c.for_each([&](std::string_view n, std::uint64_t v) { seen.emplace_back(n, v); });
  EXPECT_EQ(
      seen,
      (std::vector<std::pair<std::string, std::uint64_t>>{
          {"dropped", 3}, {"duplicated", 0}, {"reordered", 0}, {"corrupted", 0}, {"delayed", 1}}));
}

}  // namespace
}  // namespace uroce::port
