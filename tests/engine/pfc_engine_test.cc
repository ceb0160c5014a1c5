/* SPDX-License-Identifier: BSD-3-Clause */
// PFC through the engine, two engines on ports joined in memory: a slow
// receiver pauses its sender and loses nothing (and without PFC it drops
// and the sender goes back N); a paused priority holds its own QPs only;
// the watchdog ends a storm; malformed MAC control frames are dropped and
// counted; the PFC frames uroce sends decode in tshark.
//
// On virtual time (SimClock): how fast the receiver drains, how long a
// pause lasts and when the watchdog fires are all timed, and on the real
// clock a loaded machine moved the outcome. Here each iteration is 10 us
// whatever the load, and the same run gives the same counters.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "engine/hosts.h"
#include "support/pcap.h"
#include "support/tshark.h"
#include "wire/mac_control.h"

namespace uroce::engine {
namespace {

constexpr std::uint8_t kDscp3 = 26;  // priority 3 under the default map
constexpr Nanos kMs = 1'000'000;

EngineConfig config(const wire::IpAddr& ip, bool pfc) {
  EngineConfig c;
  c.addresses = {ip};
  c.pfc.enabled = pfc;
  c.pfc.xoff.lossless = 1u << 3;
  c.pfc.xoff.xoff_bytes = 48 * 1024;
  c.pfc.xoff.xon_bytes = 24 * 1024;
  return c;
}

// A slow receiver: a buffer smaller than the sender's window (256 packets
// of 1 KiB), emptied at 20 Mb/s, while the sender may send 16 packets
// per 10 us iteration (13 Gb/s).
EngineConfig slow_receiver(bool pfc) {
  EngineConfig c = config(kIpB, pfc);
  c.rx_buffer.bytes = 160 * 1024;
  c.rx_buffer.rate_mbps = 20;
  return c;
}

struct Buffers {
  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
};

Buffers make_buffers(Host& a, Host& b, std::size_t size, std::uint64_t seed) {
  Buffers t;
  std::mt19937_64 rng(seed);
  t.src.resize(size);
  for (auto& x : t.src) x = static_cast<std::uint8_t>(rng());
  t.dst.assign(size, 0);
  t.lkey = a.memory.reg(t.src.data(), t.src.size(), kAll);
  t.rkey = b.memory.reg(t.dst.data(), t.dst.size(), kAll);
  return t;
}

void post_write(Qp& qp, const Buffers& t, std::uint64_t wr_id) {
  transport::SendWr w;
  w.wr_id = wr_id;
  w.opcode = transport::WrOpcode::kRdmaWrite;
  w.send_flags = transport::send_flags::kSignaled;
  w.num_sge = 1;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(t.src.data()),
                  static_cast<std::uint32_t>(t.src.size()), t.lkey};
  w.remote_addr = reinterpret_cast<std::uint64_t>(t.dst.data());
  w.rkey = t.rkey;
  ASSERT_EQ(qp.post_send(w), 0);
}

std::uint64_t pfc_count(const Host& h, const std::string& name) {
  std::uint64_t v = ~0ull;
  h.engine.pfc_counters().for_each([&](const std::string& n, std::uint64_t x) {
    if (n == name) v = x;
  });
  EXPECT_NE(v, ~0ull) << "no counter " << name;
  return v;
}

std::vector<std::uint8_t> pfc_frame(std::uint8_t enable, std::uint16_t time3) {
  std::vector<std::uint8_t> f(wire::kMinFrameSize);
  std::array<std::uint16_t, 8> times{};
  times[3] = time3;
  wire::build_pfc_frame(f, kMacB, enable, times);
  return f;
}

// Writes 1 MiB from a to b and returns once the completion is in (about
// 0.45 s of virtual time at 20 Mb/s).
void write_1mib(SimClock& clock, Host& a, Host& b) {
  const Buffers t = make_buffers(a, b, 1u << 20, 5);
  post_write(*a.qp, t, 1);
  ASSERT_TRUE(clock.run(a, b, [&] { return a.scq.size() >= 1; })) << "the WRITE stalled";
  transport::Wc wc;
  ASSERT_EQ(a.scq.poll(&wc, 1), 1u);
  EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(t.src.data(), t.dst.data(), t.src.size())) << "bytes differ";
}

TEST(Pfc, ASlowReceiverPausesItsSenderAndDropsNothing) {
  Host a(kMacA, config(kIpA, true)), b(kMacB, slow_receiver(true));
  test::PipePort::join(a.port, b.port);
  b.port.keep_sent = true;
  // At 20 Mb/s the buffer holds tens of milliseconds: a 268 ms ACK timeout.
  connect(a, b, 0x1111, 0x2222, kDscp3, 16);
  SimClock clock;
  write_1mib(clock, a, b);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxBufferDropped), 0u);
  EXPECT_EQ(a.qp->counters().get(transport::Counter::kCompleterRetryErr), 0u)
      << "no go-back-N: nothing was lost";
  EXPECT_EQ(b.qp->counters().get(transport::Counter::kOutOfSeqRequest), 0u);
  EXPECT_GT(pfc_count(b, "tx_prio3_pause"), 0u);
  EXPECT_GT(pfc_count(b, "tx_prio3_resume"), 0u);
  EXPECT_GT(pfc_count(a, "rx_prio3_pause"), 0u);
  EXPECT_GT(pfc_count(a, "rx_prio3_resume"), 0u);
  EXPECT_GT(pfc_count(a, "rx_prio3_pause_duration"), 0u);
  EXPECT_EQ(pfc_count(a, "rx_prio0_pause"), 0u);
  EXPECT_EQ(pfc_count(a, "pfc_storm_detected"), 0u);
  std::printf("slow receiver, PFC on: %llu XOFF, %llu XON, sender paused %llu us of %.0f ms\n",
              static_cast<unsigned long long>(pfc_count(b, "tx_prio3_pause")),
              static_cast<unsigned long long>(pfc_count(b, "tx_prio3_resume")),
              static_cast<unsigned long long>(pfc_count(a, "rx_prio3_pause_duration")),
              static_cast<double>(clock.now() - SimClock().now()) / 1e6);

  // What b sent decodes in tshark as PFC for priority 3: XOFF with the
  // configured quanta, XON with zero.
  std::vector<test::Frame> pfc;
  for (const auto& f : b.port.sent) {
    if (f.size() >= 14 && wire::load_be16(f.data() + 12) == wire::ether_type::kMacControl)
      pfc.push_back(f);
  }
  ASSERT_FALSE(pfc.empty());
  test::TempDir dir;
  const std::string path = dir.path() + "/pfc.pcap";
  test::write_pcap(path, pfc);
  const auto decoded = test::tshark_decode(
      path, {"eth.dst", "macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3",
             "macc.cbfc.pause_time.c0", "_ws.expert.message", "_ws.malformed"});
  ASSERT_EQ(decoded.size(), pfc.size());
  std::size_t xoff = 0, xon = 0;
  for (const auto& d : decoded) {
    EXPECT_EQ(d.at("eth.dst"), "01:80:c2:00:00:01");
    EXPECT_EQ(test::tshark_number(d.at("macc.opcode")), 0x0101u);
    EXPECT_EQ(test::tshark_number(d.at("macc.cbfc.enbv")), 0x08u);
    EXPECT_EQ(d.at("_ws.malformed"), "");
    EXPECT_EQ(d.at("_ws.expert.message"), "");
    const auto t = test::tshark_number(d.at("macc.cbfc.pause_time.c3"));
    if (t == 0xFFFF) ++xoff;
    if (t == 0) ++xon;
  }
  EXPECT_GT(xoff, 0u);
  EXPECT_GT(xon, 0u);
  EXPECT_EQ(xoff + xon, decoded.size());
}

TEST(Pfc, WithoutPfcTheSlowReceiverDropsAndTheSenderGoesBackN) {
  Host a(kMacA, config(kIpA, false)), b(kMacB, slow_receiver(false));
  test::PipePort::join(a.port, b.port);
  // At 20 Mb/s the buffer holds tens of milliseconds: a 268 ms ACK timeout.
  connect(a, b, 0x1111, 0x2222, kDscp3, 16);
  SimClock clock;
  write_1mib(clock, a, b);
  EXPECT_GT(b.engine.counters().get(EngineCounter::kRxBufferDropped), 0u);
  EXPECT_GT(a.qp->counters().get(transport::Counter::kCompleterRetryErr), 0u);
  EXPECT_EQ(pfc_count(b, "tx_prio3_pause"), 0u);
  std::printf(
      "slow receiver, PFC off: %llu frames dropped, %llu go-back-N in %.0f ms\n",
      static_cast<unsigned long long>(b.engine.counters().get(EngineCounter::kRxBufferDropped)),
      static_cast<unsigned long long>(a.qp->counters().get(transport::Counter::kCompleterRetryErr)),
      static_cast<double>(clock.now() - SimClock().now()) / 1e6);
}

TEST(Pfc, APausedPriorityHoldsItsOwnQpsOnly) {
  EngineConfig ca = config(kIpA, true);
  ca.pfc.watchdog.detection_ns = 0;  // the pause below is meant to last
  // 100 Mb/s: each XOFF holds 335 ms.
  Host a(kMacA, ca, 100), b(kMacB, config(kIpB, true));
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x1000, 0x2000, 0);  // priority 0: lossy
  Qp& lossy = *a.qp;
  connect(a, b, 0x1003, 0x2003, kDscp3);
  Qp& lossless = *a.qp;
  const Buffers t0 = make_buffers(a, b, 256 * 1024, 1);
  const Buffers t3 = make_buffers(a, b, 256 * 1024, 3);
  // The partner pauses priority 3, again every millisecond.
  SimClock clock;
  Nanos last = 0;
  auto xoff = [&] {
    if (clock.now() - last < kMs) return;
    last = clock.now();
    a.port.inject(pfc_frame(1u << 3, 0xFFFF));
  };
  xoff();
  clock.tick(a, b);  // a takes the XOFF in
  post_write(lossless, t3, 3);
  post_write(lossy, t0, 0);
  transport::Wc wc;
  ASSERT_TRUE(clock.run(a, b, [&] {
    xoff();
    return a.scq.size() >= 1;
  }));
  ASSERT_EQ(a.scq.poll(&wc, 1), 1u);
  EXPECT_EQ(wc.wr_id, 0u) << "the lossy QP finished while priority 3 was paused";
  EXPECT_EQ(lossless.counters().get(transport::Counter::kSentPkts), 0u);
  // XON: priority 3 goes again.
  a.port.inject(pfc_frame(1u << 3, 0));
  ASSERT_TRUE(clock.run(a, b, [&] { return a.scq.size() >= 1; }));
  ASSERT_EQ(a.scq.poll(&wc, 1), 1u);
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(t3.src.data(), t3.dst.data(), t3.src.size()));
  EXPECT_GT(pfc_count(a, "rx_prio3_resume"), 0u);
}

TEST(Pfc, TheWatchdogEndsAStormAndTrafficResumes) {
  EngineConfig ca = config(kIpA, true);
  ca.pfc.watchdog = {50 * kMs, 50 * kMs};
  // At 100 Mb/s an XOFF pauses for 335 ms.
  Host a(kMacA, ca, 100), b(kMacB, config(kIpB, true));
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x1111, 0x2222, kDscp3, 14);  // 67 ms ACK timeout: outlasts detection
  // A stuck partner: XOFF all the time, forever.
  const Buffers t = make_buffers(a, b, 1u << 20, 9);
  a.port.inject(pfc_frame(1u << 3, 0xFFFF));
  post_write(*a.qp, t, 1);
  SimClock clock;
  ASSERT_TRUE(clock.run(a, b, [&] {
    a.port.inject(pfc_frame(1u << 3, 0xFFFF));
    return a.scq.size() >= 1;
  }));
  transport::Wc wc;
  ASSERT_EQ(a.scq.poll(&wc, 1), 1u);
  EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
  EXPECT_EQ(0, std::memcmp(t.src.data(), t.dst.data(), t.src.size()));
  EXPECT_GE(pfc_count(a, "pfc_storm_detected"), 1u);
  EXPECT_GT(pfc_count(a, "rx_pause_ignored"), 0u);
  EXPECT_GE(pfc_count(a, "rx_prio3_pause_duration"), 50'000u) << "microseconds";
}

// CNPs among the frames a port sent, by the QP they go to.
std::vector<std::uint32_t> cnps_sent(const test::PipePort& port) {
  std::vector<std::uint32_t> qps;
  for (const auto& f : port.sent) {
    // Ethernet + IPv4 + UDP to 4791, then the BTH: opcode 0x81, DestQP.
    if (f.size() < 54 || wire::load_be16(f.data() + 12) != wire::ether_type::kIpv4 || f[23] != 17 ||
        wire::load_be16(f.data() + 36) != wire::kRoceV2Port || f[42] != 0x81)
      continue;
    qps.push_back(wire::load_be32(f.data() + 46) & 0xFFFFFF);
  }
  return qps;
}

TEST(Pfc, CnpsOfAPausedPriorityWaitForTheResume) {
  EngineConfig ca = config(kIpA, true);
  ca.pfc.watchdog.detection_ns = 0;
  Host a(kMacA, ca, 100);  // an XOFF holds 335 ms at 100 Mb/s
  a.port.keep_sent = true;
  a.port.inject(pfc_frame(1u << 3, 0xFFFF));
  SimClock clock;
  clock.poll(a);
  wire::RoceRoute r;
  r.src_mac = kMacA;
  r.dst_mac = kMacB;
  r.src_ip = kIpA;
  r.dst_ip = kIpB;
  r.dscp = kDscp3;
  a.engine.locked([&] { a.engine.send_cnp(r, 0x2222); });
  a.engine.locked([&] { a.engine.send_cnp(r, 0x2222); });  // the same peer QP: one waits
  a.engine.locked([&] { a.engine.send_cnp(r, 0x3333); });
  clock.poll(a);
  EXPECT_TRUE(cnps_sent(a.port).empty()) << "priority 3 is paused";
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kTxCnpHeld), 3u);
  r.dscp = 0;  // priority 0 is not paused
  a.engine.locked([&] { a.engine.send_cnp(r, 0x4444); });
  EXPECT_EQ(cnps_sent(a.port), std::vector<std::uint32_t>{0x4444});
  a.port.inject(pfc_frame(1u << 3, 0));  // XON
  clock.poll(a);
  clock.poll(a);
  EXPECT_EQ(cnps_sent(a.port), (std::vector<std::uint32_t>{0x4444, 0x2222, 0x3333}));
}

TEST(Pfc, MalformedMacControlFramesAreDroppedAndCounted) {
  Host a(kMacA, config(kIpA, true)), b(kMacB, config(kIpB, true));
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x1111, 0x2222, kDscp3);
  auto bad_dst = pfc_frame(1u << 3, 0xFFFF);
  bad_dst[5] = 0x02;  // 01:80:C2:00:00:02 is not the MAC control address
  auto bad_op = pfc_frame(1u << 3, 0xFFFF);
  bad_op[15] = 0x02;  // opcode 0x0102
  auto bad_enable = pfc_frame(1u << 3, 0xFFFF);
  bad_enable[16] = 0x01;  // the class-enable vector's high octet
  auto short_frame = pfc_frame(1u << 3, 0xFFFF);
  short_frame.resize(20);
  for (auto* f : {&bad_dst, &bad_op, &bad_enable, &short_frame}) a.port.inject(*f);
  SimClock clock;
  write_1mib(clock, a, b);
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kRxMacControlDropped), 4u);
  EXPECT_EQ(pfc_count(a, "rx_prio3_pause"), 0u) << "none of them paused anything";
}

}  // namespace
}  // namespace uroce::engine
