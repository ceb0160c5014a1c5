/* SPDX-License-Identifier: BSD-3-Clause */
// lib/pfc: pause times at the link speeds RoCE runs at, XOFF and XON in
// both directions, refresh, 802.3x PAUSE, the watchdog, and the ingress
// classifier.

#include <gtest/gtest.h>

#include "pfc/classify.h"
#include "pfc/pause_generator.h"
#include "pfc/pause_state.h"
#include "wire/mac_control.h"
#include "wire/roce_frame.h"

namespace uroce::pfc {
namespace {

constexpr Nanos kMs = 1'000'000;

wire::MacControlFrame pfc_frame(std::uint8_t enable, unsigned prio, std::uint16_t quanta) {
  wire::MacControlFrame f;
  f.opcode = wire::mac_control_opcode::kPfc;
  f.class_enable = enable;
  f.class_time[prio] = quanta;
  return f;
}

TEST(Quanta, PauseTimeIs512BitTimesPerQuantum) {
  // PROTOCOL.md 4.1: the longest pause at each speed.
  EXPECT_EQ(quanta_to_ns(0xFFFF, 10000), 3'355'392u);  // 51.2 ns a quantum
  EXPECT_EQ(quanta_to_ns(0xFFFF, 25000), 1'342'157u);  // 20.48 ns, 1342156.8 rounded up
  EXPECT_EQ(quanta_to_ns(0xFFFF, 100000), 335'540u);   // 5.12 ns, 335539.2 rounded up
  EXPECT_EQ(quanta_to_ns(0xFFFF, 400000), 83'885u);    // 1.28 ns, 83884.8 rounded up
  EXPECT_EQ(quanta_to_ns(1, 10000), 52u);
  EXPECT_EQ(quanta_to_ns(1000, 100000), 5120u);
  EXPECT_EQ(quanta_to_ns(0, 10000), 0u);
  // An unknown speed is taken as 10 Gb/s.
  EXPECT_EQ(quanta_to_ns(0xFFFF, 0), quanta_to_ns(0xFFFF, 10000));
}

struct Speeds : ::testing::TestWithParam<std::uint32_t> {};

TEST_P(Speeds, AnXoffPausesForItsTimeAtTheLinkSpeed) {
  Counters c;
  PauseState s(1u << 3, GetParam(), {}, c);
  const Nanos t0 = 1000;
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), t0);
  const Nanos len = quanta_to_ns(0xFFFF, GetParam());
  EXPECT_EQ(s.paused(t0), 1u << 3);
  EXPECT_EQ(s.paused(t0 + len - 1), 1u << 3);
  EXPECT_EQ(s.paused(t0 + len), 0u);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxPause, 3), 1u);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxPauseDuration, 3), len / 1000);
}

INSTANTIATE_TEST_SUITE_P(Pfc, Speeds, ::testing::Values(10000u, 25000u, 100000u, 400000u));

TEST(PauseState, XonResumesAtOnce) {
  Counters c;
  PauseState s(1u << 3, 10000, {}, c);
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), 0);
  EXPECT_EQ(s.paused(500'000), 1u << 3);
  s.on_frame(pfc_frame(1u << 3, 3, 0), 600'000);
  EXPECT_EQ(s.paused(600'001), 0u);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxResume, 3), 1u);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxPauseDuration, 3), 600u);
}

TEST(PauseState, ANewXoffRestartsTheTimer) {
  Counters c;
  PauseState s(1u << 3, 10000, {}, c);
  const Nanos len = quanta_to_ns(1000, 10000);  // 51.2 us
  s.on_frame(pfc_frame(1u << 3, 3, 1000), 0);
  s.on_frame(pfc_frame(1u << 3, 3, 1000), 40'000);  // refresh before the end
  EXPECT_EQ(s.paused(len + 1), 1u << 3);
  EXPECT_EQ(s.paused(40'000 + len), 0u);
  // A shorter time also restarts (shortens) it.
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), 200'000);
  s.on_frame(pfc_frame(1u << 3, 3, 10), 210'000);
  EXPECT_EQ(s.paused(210'000 + quanta_to_ns(10, 10000)), 0u);
}

TEST(PauseState, ClearEnableBitsAndLossyPrioritiesAreLeftAlone) {
  Counters c;
  PauseState s(1u << 3 | 1u << 4, 10000, {}, c);
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), 0);
  // Priority 3's time is ignored when its enable bit is clear.
  wire::MacControlFrame f = pfc_frame(1u << 4, 3, 0);
  f.class_time[4] = 100;
  s.on_frame(f, 10);
  EXPECT_EQ(s.paused(20), 1u << 3 | 1u << 4);
  // Priority 0 is lossy here: a PFC for it changes nothing.
  s.on_frame(pfc_frame(1u << 0, 0, 0xFFFF), 30);
  EXPECT_EQ(s.paused(40) & 1u, 0u);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxPause, 0), 0u);
}

TEST(PauseState, PausePausesEveryPriority) {
  Counters c;
  PauseState s(1u << 3, 25000, {}, c);
  wire::MacControlFrame f;
  f.opcode = wire::mac_control_opcode::kPause;
  f.pause_time = 0x1000;
  s.on_frame(f, 0);
  EXPECT_EQ(s.paused(1), 0xFFu);
  EXPECT_EQ(s.paused(quanta_to_ns(0x1000, 25000)), 0u);
  EXPECT_EQ(c.get(pfc::PortCounter::kRxGlobalPause), 1u);
  // PAUSE with time 0 resumes everything.
  s.on_frame(f, 1 * kMs);
  f.pause_time = 0;
  s.on_frame(f, 1 * kMs + 10);
  EXPECT_EQ(s.paused(1 * kMs + 11), 0u);
}

TEST(PauseState, TheWatchdogEndsAStormThenHonoursPausesAgain) {
  Counters c;
  PauseState s(1u << 3, 10000, {200 * kMs, 100 * kMs}, c);
  // A peer refreshing its XOFF every millisecond: paused without a break.
  Nanos t = 0;
  for (; t < 200 * kMs; t += kMs) {
    s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), t);
    ASSERT_EQ(s.paused(t), 1u << 3) << t;
  }
  EXPECT_EQ(s.paused(t), 0u) << "detected at 200 ms";
  EXPECT_EQ(c.get(pfc::PortCounter::kPfcStormDetected), 1u);
  EXPECT_EQ(s.take_new_storms(), 1u << 3);
  EXPECT_EQ(s.take_new_storms(), 0u) << "reported once";
  // During restoration the storm's XOFFs are ignored.
  for (t += kMs; t < 300 * kMs; t += kMs) {
    s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), t);
    ASSERT_EQ(s.paused(t), 0u) << t;
  }
  EXPECT_GT(c.get(pfc::PortCounter::kRxPauseIgnored), 90u);
  // After it, pauses count again, and a second storm is caught again.
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), 301 * kMs);
  EXPECT_EQ(s.paused(301 * kMs), 1u << 3);
  EXPECT_EQ(c.get(pfc::PrioCounter::kRxPauseDuration, 3), 200'000u);
}

TEST(PauseState, PausesWithBreaksAreNoStorm) {
  Counters c;
  PauseState s(1u << 3, 10000, {200 * kMs, 200 * kMs}, c);
  for (Nanos t = 0; t < 1000 * kMs; t += kMs) {
    // XOFF then XON every millisecond: busy, not stuck.
    s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), t);
    s.paused(t + 1);
    s.on_frame(pfc_frame(1u << 3, 3, 0), t + kMs / 2);
    s.paused(t + kMs / 2);
  }
  EXPECT_EQ(c.get(pfc::PortCounter::kPfcStormDetected), 0u);
}

TEST(PauseState, AnOlderClockReadingIsNoStorm) {
  Counters c;
  PauseState s(1u << 3, 10000, {200 * kMs, 200 * kMs}, c);
  s.on_frame(pfc_frame(1u << 3, 3, 0xFFFF), 10 * kMs);
  // Another thread read the clock before this frame arrived.
  EXPECT_EQ(s.paused(9 * kMs), 1u << 3);
  EXPECT_EQ(c.get(pfc::PortCounter::kPfcStormDetected), 0u);
}

TEST(PauseGenerator, MergeKeepsTheLatestStateOfEachPriority) {
  PfcRequest pending;
  pending.class_enable = 1u << 3 | 1u << 4;
  pending.class_time[3] = 0xFFFF;
  pending.class_time[4] = 0xFFFF;
  PfcRequest later;
  later.class_enable = 1u << 3;
  later.class_time[3] = 0;  // XON for 3 after the XOFF not sent yet
  merge(pending, later);
  EXPECT_EQ(pending.class_enable, 1u << 3 | 1u << 4);
  EXPECT_EQ(pending.class_time[3], 0u);
  EXPECT_EQ(pending.class_time[4], 0xFFFFu);
}

TEST(PauseGenerator, XoffAtTheThresholdRefreshWhileHighXonBelowXon) {
  Counters c;
  XoffConfig cfg;
  cfg.lossless = 1u << 3;
  cfg.xoff_bytes = 1000;
  cfg.xon_bytes = 500;
  cfg.quanta = 0xFFFF;
  cfg.speed_mbps = 10000;
  PauseGenerator g(cfg, c);
  std::array<std::uint64_t, 8> backlog{};
  backlog[3] = 999;
  EXPECT_FALSE(g.update(backlog, 0));
  backlog[3] = 1000;
  auto r = g.update(backlog, 10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->class_enable, 1u << 3);
  EXPECT_EQ(r->class_time[3], 0xFFFF);
  EXPECT_TRUE(g.xoff(3));
  // Not again until half the pause time has passed...
  const Nanos half = quanta_to_ns(0xFFFF, 10000) / 2;
  EXPECT_FALSE(g.update(backlog, 10 + half - 1));
  // ...then refreshed, also between xon and xoff.
  backlog[3] = 700;
  r = g.update(backlog, 10 + half);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->class_time[3], 0xFFFF);
  EXPECT_EQ(c.get(pfc::PrioCounter::kTxPause, 3), 2u);
  backlog[3] = 500;
  r = g.update(backlog, 10 + half + 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->class_enable, 1u << 3);
  EXPECT_EQ(r->class_time[3], 0u) << "XON";
  EXPECT_FALSE(g.xoff(3));
  EXPECT_EQ(c.get(pfc::PrioCounter::kTxResume, 3), 1u);
  EXPECT_FALSE(g.update(backlog, 10 + half + 2));
}

TEST(PauseGenerator, OnlyLosslessPrioritiesAndOneFrameForSeveral) {
  Counters c;
  XoffConfig cfg;
  cfg.lossless = 1u << 3 | 1u << 4;
  cfg.xoff_bytes = 100;
  cfg.xon_bytes = 10;
  PauseGenerator g(cfg, c);
  std::array<std::uint64_t, 8> backlog{};
  backlog.fill(5000);
  const auto r = g.update(backlog, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->class_enable, 1u << 3 | 1u << 4);
  EXPECT_EQ(r->class_time[0], 0u);
  // The request becomes a frame tshark and our parser agree on.
  std::uint8_t buf[64];
  ASSERT_EQ(wire::build_pfc_frame(buf, {}, r->class_enable, r->class_time), 60u);
  wire::MacControlFrame f;
  ASSERT_EQ(wire::parse_mac_control_frame(buf, f), wire::MacControlError::kNone);
  EXPECT_EQ(f.class_time[4], 0xFFFF);
}

TEST(Classify, PcpWhenTaggedElseDscpPrecedence) {
  wire::RoceRoute r;
  r.src_ip = *wire::IpAddr::parse("10.0.0.1");
  r.dst_ip = *wire::IpAddr::parse("10.0.0.2");
  r.dscp = 26;
  std::uint8_t buf[256];
  const std::uint8_t payload[8] = {};
  wire::Bth bth;
  bth.opcode = static_cast<std::uint8_t>(wire::Opcode::kRcSendOnly);
  std::size_t n = wire::build_roce_frame(buf, r, bth, {}, payload, 1);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(frame_priority(wire::classify({buf, n})), 3u);
  r.dscp = 48;
  n = wire::build_roce_frame(buf, r, bth, {}, payload, 1);
  EXPECT_EQ(frame_priority(wire::classify({buf, n})), 6u);
  r.src_ip = *wire::IpAddr::parse("fd00::1");
  r.dst_ip = *wire::IpAddr::parse("fd00::2");
  r.dscp = 26;
  n = wire::build_roce_frame(buf, r, bth, {}, payload, 1);
  EXPECT_EQ(frame_priority(wire::classify({buf, n})), 3u);
  r.vlan = true;
  r.pcp = 5;
  n = wire::build_roce_frame(buf, r, bth, {}, payload, 1);
  EXPECT_EQ(frame_priority(wire::classify({buf, n})), 5u);
  EXPECT_EQ(frame_priority(wire::classify({buf, 10})), 0u);
}

}  // namespace
}  // namespace uroce::pfc
