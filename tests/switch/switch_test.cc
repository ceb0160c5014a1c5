/* SPDX-License-Identifier: BSD-3-Clause */
// lib/switch on ports joined in memory, on simulated time: learning and
// flooding, the line rate, RED marking, PFC both ways, the schedulers,
// and each impairment with a fixed seed.

#include "switch/switch.h"

#include <gtest/gtest.h>

#include <memory>

#include "support/pipe_port.h"
#include "wire/mac_control.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

namespace uroce::sw {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1'000'000;

wire::MacAddr host_mac(unsigned i) { return {{0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(i)}}; }
wire::MacAddr switch_mac(unsigned i) {
  return {{0x02, 0x5, 0x70, 0, 0, static_cast<std::uint8_t>(i)}};
}

// N hosts, each a PipePort joined to one port of the switch.
struct Fabric {
  std::vector<std::unique_ptr<test::PipePort>> hosts, ports;
  std::unique_ptr<Switch> sw;
  Nanos now = 1 * kMs;

  Fabric(unsigned n, SwitchConfig cfg) {
    std::vector<port::Port*> raw;
    for (unsigned i = 0; i < n; ++i) {
      hosts.push_back(std::make_unique<test::PipePort>(host_mac(i)));
      ports.push_back(std::make_unique<test::PipePort>(switch_mac(i)));
      test::PipePort::join(*hosts[i], *ports[i]);
      raw.push_back(ports[i].get());
    }
    sw = std::make_unique<Switch>(raw, std::move(cfg));
  }
  // Runs the switch for `d` of simulated time in steps of `step`.
  void run(Nanos d, Nanos step = 1 * kUs) {
    for (Nanos end = now + d; now < end; now += step) sw->poll(now);
  }
  // Frames host i received, taken out of its port.
  std::vector<std::vector<std::uint8_t>> take(unsigned i) {
    std::vector<std::vector<std::uint8_t>> out;
    port::RxFrame f[64];
    for (std::uint16_t n; (n = hosts[i]->rx_burst(f, 64)) > 0;) {
      for (std::uint16_t k = 0; k < n; ++k) out.emplace_back(f[k].data.begin(), f[k].data.end());
      hosts[i]->rx_release(f, n);
    }
    return out;
  }
  void send(unsigned from, std::vector<std::uint8_t> frame) {
    ports[from]->inject(std::move(frame));
  }
};

// A RoCEv2 SEND from host `from` to host `to`, of `payload` bytes.
std::vector<std::uint8_t> roce(unsigned from, unsigned to, std::size_t payload,
                               std::uint8_t dscp = 26, wire::Ecn ecn = wire::Ecn::kEct0) {
  wire::RoceRoute r;
  r.src_mac = host_mac(from);
  r.dst_mac = host_mac(to);
  r.src_ip = wire::IpAddr::from_v4(0x0A000001 + from);
  r.dst_ip = wire::IpAddr::from_v4(0x0A000001 + to);
  r.dscp = dscp;
  r.ecn = ecn;
  wire::Bth bth;
  bth.opcode = static_cast<std::uint8_t>(wire::Opcode::kRcSendOnly);
  std::vector<std::uint8_t> data(payload, 0x5A), out(payload + 128);
  out.resize(wire::build_roce_frame(out, r, bth, {}, data, 1));
  return out;
}

wire::Ecn ecn_of(const std::vector<std::uint8_t>& f) {
  return static_cast<wire::Ecn>(f[15] & 3);  // IPv4 TOS, untagged
}

TEST(Red, MarkingProbabilityFollowsKminKmaxPmax) {
  EcnConfig c{true, 10000, 50000, 0.2};
  EXPECT_DOUBLE_EQ(mark_probability(0, c), 0);
  EXPECT_DOUBLE_EQ(mark_probability(10000, c), 0);
  EXPECT_DOUBLE_EQ(mark_probability(20000, c), 0.2 * 10000 / 40000);
  EXPECT_DOUBLE_EQ(mark_probability(30000, c), 0.1);
  EXPECT_DOUBLE_EQ(mark_probability(49999, c), 0.2 * 39999 / 40000);
  EXPECT_DOUBLE_EQ(mark_probability(50000, c), 1);
  EXPECT_DOUBLE_EQ(mark_probability(1 << 20, c), 1);
}

TEST(Frame, MarkingCeKeepsTheIpv4ChecksumAndTheIcrc) {
  auto f = roce(0, 1, 100);
  const FrameInfo info = inspect(f, PriorityMap{});
  EXPECT_EQ(info.priority, 3);
  EXPECT_EQ(info.ecn(), wire::Ecn::kEct0);
  ASSERT_TRUE(mark_ce(f, info));
  EXPECT_EQ(ecn_of(f), wire::Ecn::kCe);
  wire::RocePacket pkt;
  EXPECT_EQ(wire::parse_roce_frame(f, pkt), wire::DropReason::kNone) << "checksum and ICRC hold";
  EXPECT_EQ(pkt.ecn, wire::Ecn::kCe);
  auto plain = roce(0, 1, 100, 26, wire::Ecn::kNotEct);
  EXPECT_FALSE(mark_ce(plain, inspect(plain, PriorityMap{})));
}

TEST(Switch, FloodsUnknownLearnsThenForwardsToOnePort) {
  Fabric f(3, SwitchConfig{});
  f.send(0, roce(0, 1, 64));
  f.run(10 * kUs);
  EXPECT_EQ(f.take(1).size(), 1u);
  EXPECT_EQ(f.take(2).size(), 1u) << "flooded: host 1 is not learned yet";
  f.send(1, roce(1, 0, 64));  // host 1 answers: the switch knew host 0
  f.run(10 * kUs);
  EXPECT_EQ(f.take(0).size(), 1u);
  EXPECT_EQ(f.take(2).size(), 0u);
  f.send(0, roce(0, 1, 64));  // now host 1 is known too
  f.run(10 * kUs);
  EXPECT_EQ(f.take(1).size(), 1u);
  EXPECT_EQ(f.take(2).size(), 0u);
  EXPECT_EQ(f.sw->counters(0).rx_packets.get(), 2u);
}

TEST(Switch, ForgetsAddressesAfterTheAgingTime) {
  SwitchConfig cfg;
  cfg.aging_ns = 5 * kMs;
  Fabric f(3, cfg);
  f.send(1, roce(1, 0, 64));
  f.run(10 * kUs);
  f.take(0);
  f.take(2);
  f.run(6 * kMs, 100 * kUs);
  f.send(0, roce(0, 1, 64));
  f.run(10 * kUs);
  EXPECT_EQ(f.take(2).size(), 1u) << "aged out: flooded again";
}

TEST(Switch, AnEgressPortKeepsItsLineRate) {
  SwitchConfig cfg;
  cfg.ports.resize(2);
  cfg.ports[1].rate_bps = 100'000'000;  // 100 Mb/s
  Fabric f(2, cfg);
  const auto frame = roce(0, 1, 1000);
  const std::size_t wire_bits = (frame.size() + kWireOverhead) * 8;
  for (int i = 0; i < 100; ++i) f.send(0, frame);
  f.run(5 * kMs);
  // 5 ms at 100 Mb/s carries 500000 bits: that many frames and no more
  // (give or take the first and the last).
  const auto got = f.take(1).size();
  const double expect = 0.005 * 100e6 / static_cast<double>(wire_bits);
  EXPECT_NEAR(static_cast<double>(got), expect, 2.0);
  f.run(20 * kMs);
  EXPECT_EQ(got + f.take(1).size(), 100u) << "nothing lost, all sent in the end";
}

// Three senders into one 100 Mb/s port, queue 3 marking ECN.
SwitchConfig bottleneck(bool ecn) {
  SwitchConfig cfg;
  cfg.ports.resize(4);
  cfg.ports[3].rate_bps = 100'000'000;
  cfg.queues[3].ecn = {ecn, 8 * 1024, 32 * 1024, 0.1};
  cfg.queues[3].limit_bytes = 64 * 1024;
  return cfg;
}

TEST(Switch, MarksEcnCapablePacketsAsTheQueueGrows) {
  Fabric f(4, bottleneck(true));
  for (int i = 0; i < 3; ++i) {
    f.send(3, roce(3, i, 64));  // learn the hosts
  }
  f.run(100 * kUs);
  for (int i = 0; i < 3; ++i) f.take(i);
  std::size_t sent = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i) {
      f.send(i, roce(i, 3, 1000));
      ++sent;
    }
  }
  f.run(50 * kMs, 10 * kUs);
  const auto got = f.take(3);
  std::size_t ce = 0;
  for (const auto& x : got) ce += ecn_of(x) == wire::Ecn::kCe;
  EXPECT_EQ(got.size(), sent) << "60 KB fit in the queue: nothing dropped";
  EXPECT_GT(ce, 10u) << "the queue passed kmax";
  EXPECT_LT(ce, sent) << "the first packets found the queue empty";
  EXPECT_EQ(f.sw->counters(3).ecn_marked.get(), ce);
  EXPECT_EQ(f.sw->counters(3).queues[3].ecn_marked.get(), ce);
  EXPECT_GT(f.sw->counters(3).queues[3].max_depth.get(), 32u * 1024);
}

TEST(Switch, DropsPacketsThatAreNotEcnCapablePastTheLimit) {
  Fabric f(4, bottleneck(true));
  f.send(3, roce(3, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  for (int i = 0; i < 100; ++i) f.send(0, roce(0, 3, 1000, 26, wire::Ecn::kNotEct));
  f.run(50 * kMs, 10 * kUs);
  const auto got = f.take(3);
  for (const auto& x : got) EXPECT_EQ(ecn_of(x), wire::Ecn::kNotEct);
  EXPECT_LT(got.size(), 100u);
  EXPECT_EQ(got.size() + f.sw->counters(3).drops.get(Drop::kQueueLimit), 100u);
  EXPECT_EQ(f.sw->counters(3).ecn_marked.get(), 0u);
}

bool is_pfc(const std::vector<std::uint8_t>& f, wire::MacControlFrame* out) {
  return f.size() >= 14 && wire::load_be16(f.data() + 12) == wire::ether_type::kMacControl &&
         wire::parse_mac_control_frame(f, *out) == wire::MacControlError::kNone;
}

TEST(Switch, PfcPausesTheSenderInsteadOfDropping) {
  SwitchConfig cfg = bottleneck(false);
  cfg.pfc.enabled = true;
  cfg.pfc.xoff_bytes = 16 * 1024;
  cfg.pfc.xon_bytes = 8 * 1024;
  cfg.pfc.headroom_bytes = 256 * 1024;
  Fabric f(4, cfg);
  f.send(3, roce(3, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  // A burst far above the queue limit, all of it lossless priority 3.
  for (int i = 0; i < 150; ++i) f.send(0, roce(0, 3, 1000));
  f.run(100 * kMs, 10 * kUs);
  EXPECT_EQ(f.take(3).size(), 150u) << "lossless: nothing dropped";
  std::size_t xoff = 0, xon = 0;
  for (const auto& x : f.take(0)) {
    wire::MacControlFrame m;
    if (!is_pfc(x, &m)) continue;
    EXPECT_EQ(m.opcode, wire::mac_control_opcode::kPfc);
    EXPECT_EQ(m.class_enable, 1u << 3);
    if (m.class_time[3] == 0xFFFF) ++xoff;
    if (m.class_time[3] == 0) ++xon;
  }
  EXPECT_GE(xoff, 1u);
  EXPECT_GE(xon, 1u);
  const PortCounters& in = f.sw->counters(0);
  EXPECT_EQ(in.pfc.get(pfc::PrioCounter::kTxPause, 3), xoff);
  EXPECT_EQ(in.pfc.get(pfc::PrioCounter::kTxResume, 3), xon);
  for (unsigned p = 0; p < 4; ++p)
    f.sw->counters(p).drops.for_each(
        [&](std::string_view name, std::uint64_t v) { EXPECT_EQ(v, 0u) << p << " " << name; });
}

TEST(Switch, APfcFrameReceivedPausesThatQueueOnly) {
  SwitchConfig cfg;
  cfg.pfc.enabled = true;
  cfg.pfc.watchdog.detection_ns = 0;
  Fabric f(2, cfg);
  f.send(1, roce(1, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  // Host 1 pauses priority 3 of the switch's port toward it.
  std::vector<std::uint8_t> xoff(wire::kMinFrameSize);
  std::array<std::uint16_t, 8> times{};
  times[3] = 0xFFFF;  // 3.36 ms at 10 Gb/s
  wire::build_pfc_frame(xoff, host_mac(1), 1u << 3, times);
  f.send(1, xoff);
  f.run(10 * kUs);
  for (int i = 0; i < 5; ++i) {
    f.send(0, roce(0, 1, 500, 26));  // priority 3: held
    f.send(0, roce(0, 1, 500, 0));   // priority 0: goes
  }
  f.run(1 * kMs);
  auto got = f.take(1);
  ASSERT_EQ(got.size(), 5u);
  for (const auto& x : got) EXPECT_EQ(inspect(x, PriorityMap{}).priority, 0);
  EXPECT_EQ(f.sw->counters(1).queues[3].depth.get(), 5u * roce(0, 1, 500).size());
  f.run(3 * kMs);  // the pause runs out
  EXPECT_EQ(f.take(1).size(), 5u);
  EXPECT_EQ(f.sw->counters(1).pfc.get(pfc::PrioCounter::kRxPause, 3), 1u);
  EXPECT_GE(f.sw->counters(1).pfc.get(pfc::PrioCounter::kRxPauseDuration, 3), 3355u);
}

TEST(Switch, StrictPriorityServesTheHighestQueueFirst) {
  SwitchConfig cfg;
  cfg.scheduling = Scheduling::kStrict;
  cfg.ports.resize(2);
  cfg.ports[1].rate_bps = 100'000'000;
  Fabric f(2, cfg);
  f.send(1, roce(1, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  for (int i = 0; i < 10; ++i) f.send(0, roce(0, 1, 1000, 0));   // priority 0
  for (int i = 0; i < 10; ++i) f.send(0, roce(0, 1, 1000, 48));  // priority 6
  f.run(10 * kMs, 10 * kUs);
  const auto got = f.take(1);
  ASSERT_EQ(got.size(), 20u);
  // Both bursts arrive in one poll: the ten of priority 6 leave first,
  // although they came in last.
  for (std::size_t i = 0; i < 20; ++i)
    EXPECT_EQ(inspect(got[i], PriorityMap{}).priority, i < 10 ? 6 : 0) << i;
}

TEST(Switch, DwrrSharesTheLinkByWeight) {
  SwitchConfig cfg;
  cfg.ports.resize(2);
  cfg.ports[1].rate_bps = 100'000'000;
  cfg.scheduling = Scheduling::kDwrr;
  cfg.queues[0].weight = 1;
  cfg.queues[3].weight = 3;
  Fabric f(2, cfg);
  f.send(1, roce(1, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  for (int i = 0; i < 200; ++i) {
    f.send(0, roce(0, 1, 1000, 0));
    f.send(0, roce(0, 1, 1000, 26));
  }
  f.run(10 * kMs, 10 * kUs);  // about 120 frames' time: both queues stay busy
  std::size_t p0 = 0, p3 = 0;
  for (const auto& x : f.take(1)) (inspect(x, PriorityMap{}).priority == 3 ? p3 : p0)++;
  ASSERT_GT(p0 + p3, 80u);
  EXPECT_NEAR(static_cast<double>(p3) / static_cast<double>(p0), 3.0, 0.3);
}

SwitchConfig impaired(ImpairmentConfig rx, std::uint64_t seed = 7) {
  SwitchConfig cfg;
  cfg.ports.resize(2);
  cfg.ports[0].rx = rx;
  cfg.seed = seed;
  return cfg;
}

// Sends n frames from host 0 to host 1, numbered 0..n-1 (n <= 256) in the
// ICRC's last byte unless `intact`.
std::size_t pass(Fabric& f, int n, std::vector<std::vector<std::uint8_t>>* out = nullptr,
                 bool intact = false) {
  f.send(1, roce(1, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  for (int i = 0; i < n; ++i) {
    auto x = roce(0, 1, 100);
    if (!intact) x.back() = static_cast<std::uint8_t>(i);
    f.send(0, x);
  }
  f.run(20 * kMs, 10 * kUs);
  auto got = f.take(1);
  if (out) *out = got;
  return got.size();
}

TEST(Impairment, LossIsSeededAndNearItsRate) {
  ImpairmentConfig c;
  c.drop = 0.3;
  Fabric a(2, impaired(c)), b(2, impaired(c)), other(2, impaired(c, 8));
  const std::size_t na = pass(a, 1000), nb = pass(b, 1000), no = pass(other, 1000);
  EXPECT_EQ(na, nb) << "same seed, same losses";
  EXPECT_NE(na, no);
  EXPECT_NEAR(static_cast<double>(na), 700.0, 60.0);
  EXPECT_EQ(a.sw->counters(0).rx_impairment.get(port::ImpairmentCounter::kDropped), 1000 - na);
}

TEST(Impairment, DuplicationReorderingAndCorruption) {
  ImpairmentConfig d;
  d.duplicate = 0.1;
  Fabric fd(2, impaired(d));
  const std::size_t nd = pass(fd, 500);
  EXPECT_EQ(nd, 500 + fd.sw->counters(0).rx_impairment.get(port::ImpairmentCounter::kDuplicated));
  EXPECT_GT(nd, 500u);

  ImpairmentConfig r;
  r.reorder = 0.1;
  Fabric fr(2, impaired(r));
  std::vector<std::vector<std::uint8_t>> got;
  ASSERT_EQ(pass(fr, 250, &got), 250u);
  std::size_t inversions = 0;
  for (std::size_t i = 1; i < got.size(); ++i) inversions += got[i].back() < got[i - 1].back();
  EXPECT_GT(inversions, 5u);
  EXPECT_EQ(inversions, fr.sw->counters(0).rx_impairment.get(port::ImpairmentCounter::kReordered));

  ImpairmentConfig c;
  c.corrupt = 0.2;
  Fabric fc(2, impaired(c));
  ASSERT_EQ(pass(fc, 500, &got, true), 500u);
  std::size_t bad = 0;
  for (const auto& x : got) {
    wire::RocePacket pkt;
    bad += wire::parse_roce_frame(x, pkt) != wire::DropReason::kNone;
  }
  EXPECT_EQ(bad, fc.sw->counters(0).rx_impairment.get(port::ImpairmentCounter::kCorrupted))
      << "every flip is caught";
  EXPECT_NEAR(static_cast<double>(bad), 100.0, 30.0);
}

TEST(Impairment, DelayHoldsEveryFrameForItsTimeAndKeepsTheOrder) {
  SwitchConfig cfg;
  cfg.ports.resize(2);
  cfg.ports[1].tx.delay_ns = 2 * kMs;
  cfg.ports[1].tx.jitter_ns = 500 * kUs;
  Fabric f(2, cfg);
  f.send(1, roce(1, 0, 64));
  f.run(100 * kUs);
  f.take(0);
  for (int i = 0; i < 50; ++i) {
    auto x = roce(0, 1, 100);
    x.back() = static_cast<std::uint8_t>(i);
    f.send(0, x);
  }
  f.run(1900 * kUs, 10 * kUs);
  EXPECT_EQ(f.take(1).size(), 0u) << "nothing before 2 ms";
  f.run(700 * kUs, 10 * kUs);
  const auto got = f.take(1);
  ASSERT_EQ(got.size(), 50u) << "everything by 2.5 ms";
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].back(), i);
}

TEST(Switch, ALinkTakenDownDropsAndForgets) {
  Fabric f(3, SwitchConfig{});
  f.send(1, roce(1, 0, 64));
  f.run(10 * kUs);
  f.take(0);
  f.take(2);
  f.sw->set_link(1, false);
  f.send(0, roce(0, 1, 64));
  f.send(1, roce(1, 0, 64));
  f.run(10 * kUs);
  EXPECT_EQ(f.take(1).size(), 0u);
  EXPECT_EQ(f.take(0).size(), 0u);
  EXPECT_EQ(f.take(2).size(), 1u) << "host 1 forgotten: flooded to the ports still up";
  EXPECT_EQ(f.sw->counters(1).drops.get(Drop::kPortDown), 1u);
  f.sw->set_link(1, true);
  f.send(0, roce(0, 1, 64));
  f.run(10 * kUs);
  EXPECT_EQ(f.take(1).size(), 1u);
}

}  // namespace
}  // namespace uroce::sw
