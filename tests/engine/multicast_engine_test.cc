/* SPDX-License-Identifier: BSD-3-Clause */
// Datagrams to multicast groups on the wire: a UD send to a group leaves
// for the group's mapped MAC without ARP or ND, with DestQP 0xFFFFFF and
// the route's hop limit, and tshark reads it as RoCEv2; a received one
// reaches every QP of its group.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/engine.h"
#include "engine/hosts.h"
#include "support/icrc_check.h"
#include "support/pcap.h"
#include "support/tshark.h"
#include "support/wire_samples.h"
#include "wire/ib_headers.h"
#include "wire/multicast.h"
#include "wire/roce_parser.h"

namespace uroce::engine {
namespace {

using namespace transport::attr_mask;

constexpr std::uint32_t kUdpQkey = 0x01234567;  // RDMA_UDP_QKEY

// A UD QP of `h` in RTS.
Qp& ud_qp(Host& h, std::uint32_t qpn) {
  transport::QpInit init;
  init.type = transport::QpType::kUd;
  init.qpn = qpn;
  init.max_send_wr = init.max_recv_wr = 16;
  init.max_send_sge = init.max_recv_sge = 1;
  init.send_cq = &h.scq;
  init.recv_cq = &h.rcq;
  init.memory = &h.memory;
  h.qps.push_back(std::make_unique<Qp>(init));
  Qp& q = *h.qps.back();
  h.engine.attach(q);
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.qkey = kUdpQkey;
  EXPECT_EQ(q.modify(at, kState | kPkeyIndex | kPort | kQkey, 0), 0);
  at.qp_state = QpState::kRtr;
  EXPECT_EQ(q.modify(at, kState, 0), 0);
  at.qp_state = QpState::kRts;
  EXPECT_EQ(q.modify(at, kState | kSqPsn, 0), 0);
  return q;
}

// Sends "multicast" from `qp` along `route` (to QPN 0x42, which the
// group's datagram must not carry) and returns the frame on the wire.
test::Frame send_to_group(Host& h, Qp& qp, const wire::RoceRoute& route) {
  static const char kText[] = "multicast";
  const auto lkey = h.memory.reg(const_cast<char*>(kText), sizeof(kText), kAll);
  transport::SendWr w;
  w.opcode = transport::WrOpcode::kSend;
  w.send_flags = transport::send_flags::kSignaled;
  w.num_sge = 1;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(kText), 9, lkey};
  const wire::RouteTemplate headers(route);
  w.ud = {&headers, 0x42, kUdpQkey};
  EXPECT_EQ(qp.post_send(w), 0);
  h.port.keep_sent = true;
  for (int i = 0; i < 10 && h.port.sent.empty(); ++i) h.engine.poll(now_ns());
  EXPECT_EQ(h.port.sent.size(), 1u) << "one datagram, no ARP or neighbour solicitation";
  return h.port.sent.empty() ? test::Frame{} : h.port.sent.front();
}

TEST(EngineMulticast, ADatagramToAGroupGoesToItsMacAndTheMulticastQpn) {
  Host a(kMacA, kIpA);
  Qp& qp = ud_qp(a, 0x100);
  const wire::IpAddr group = *wire::IpAddr::parse("239.77.0.5");
  auto route = a.engine.route_to(kIpA, group, std::chrono::milliseconds(0));
  ASSERT_TRUE(route) << "a group needs no neighbour";
  route->hop_limit = 3;
  const test::Frame frame = send_to_group(a, qp, *route);
  ASSERT_FALSE(frame.empty());
  // Expect: 01:00:5e and the group's low 23 bits, DestQP 0xFFFFFF.
  const std::uint8_t mac[] = {0x01, 0x00, 0x5E, 0x4D, 0x00, 0x05};
  EXPECT_TRUE(std::equal(mac, mac + 6, frame.begin()));
  wire::RocePacket pkt;
  ASSERT_EQ(wire::parse_roce_frame(frame, pkt), wire::DropReason::kNone);
  EXPECT_EQ(pkt.bth.dest_qp, wire::kMulticastQpn);
  EXPECT_EQ(pkt.dst_ip, group);
  EXPECT_EQ(pkt.ext.deth.src_qp, 0x100u);
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kTxMcast), 1u);

  // Expect: tshark decodes it, nothing malformed, and an independent
  // ICRC check agrees.
  test::TempDir dir;
  const std::string pcap = dir.path() + "/mcast.pcap";
  test::write_pcap(pcap, {frame});
  const auto d = test::tshark_decode(
      pcap, {"eth.dst", "ip.dst", "ip.ttl", "infiniband.bth.destqp", "infiniband.deth.srcqp",
             "infiniband.deth.q_key", "_ws.malformed"});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at("eth.dst"), "01:00:5e:4d:00:05");
  EXPECT_EQ(d[0].at("ip.dst"), "239.77.0.5");
  EXPECT_EQ(d[0].at("ip.ttl"), "3");
  EXPECT_EQ(test::tshark_number(d[0].at("infiniband.bth.destqp")), 0xFFFFFFu);
  EXPECT_EQ(test::tshark_number(d[0].at("infiniband.deth.srcqp")), 0x100u);
  EXPECT_EQ(test::tshark_number(d[0].at("infiniband.deth.q_key")), kUdpQkey);
  EXPECT_EQ(d[0].at("_ws.malformed"), "");
  const auto icrc = test::independent_icrc_check(pcap);
  EXPECT_EQ(icrc.bad, 0u) << icrc.output;
}

TEST(EngineMulticast, AnIpv6GroupGoesTo3333AndItsLow32Bits) {
  EngineConfig cfg;
  const wire::IpAddr src = *wire::IpAddr::parse("fd09::1");
  cfg.addresses = {src};
  Host a(kMacA, cfg);
  Qp& qp = ud_qp(a, 0x101);
  const wire::IpAddr group = *wire::IpAddr::parse("ff0e::1:2:3");
  auto route = a.engine.route_to(src, group, std::chrono::milliseconds(0));
  ASSERT_TRUE(route);
  route->hop_limit = 9;
  const test::Frame frame = send_to_group(a, qp, *route);
  ASSERT_FALSE(frame.empty());
  test::TempDir dir;
  const std::string pcap = dir.path() + "/mcast6.pcap";
  test::write_pcap(pcap, {frame});
  const auto d = test::tshark_decode(
      pcap, {"eth.dst", "ipv6.dst", "ipv6.hlim", "infiniband.bth.destqp", "_ws.malformed"});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at("eth.dst"), "33:33:00:02:00:03");
  EXPECT_EQ(d[0].at("ipv6.dst"), "ff0e::1:2:3");
  EXPECT_EQ(d[0].at("ipv6.hlim"), "9");
  EXPECT_EQ(test::tshark_number(d[0].at("infiniband.bth.destqp")), 0xFFFFFFu);
  EXPECT_EQ(d[0].at("_ws.malformed"), "");
}

TEST(EngineMulticast, ReceivedDatagramsReachEveryQpOfTheirGroupAndOthersAreCounted) {
  Host b(kMacB, kIpB);
  Qp& x = ud_qp(b, 0x200);
  Qp& y = ud_qp(b, 0x201);
  const wire::IpAddr group = *wire::IpAddr::parse("239.1.2.3");
  b.engine.attach_mcast(group, x);
  b.engine.attach_mcast(group, y);
  std::vector<std::uint8_t> rx(2 * 512);
  const auto rk = b.memory.reg(rx.data(), rx.size(), kAll);
  for (int i = 0; i < 2; ++i) {
    transport::RecvWr r;
    r.wr_id = static_cast<std::uint64_t>(i);
    r.num_sge = 1;
    r.sg_list[0] = {reinterpret_cast<std::uint64_t>(rx.data() + i * 512), 512, rk};
    ASSERT_EQ((i == 0 ? x : y).post_recv(r), 0);
  }
  std::mt19937_64 rng(5);
  wire::RoceRoute r;
  r.src_ip = kIpA;
  r.dst_ip = group;
  r.dst_mac = wire::multicast_mac(group);
  test::SamplePacket s = test::sample_packet(0x64, rng);  // UD SEND only
  s.bth.dest_qp = wire::kMulticastQpn;
  s.bth.pkey = wire::kDefaultPkey;
  s.ext.deth.qkey = kUdpQkey;
  b.port.inject(test::build_frame(r, s));
  r.dst_ip = *wire::IpAddr::parse("239.1.2.4");  // nobody's group
  b.port.inject(test::build_frame(r, s));
  b.engine.poll(now_ns());
  transport::Wc wc[4];
  ASSERT_EQ(b.rcq.poll(wc, 4), 2u);
  EXPECT_NE(wc[0].qp_num, wc[1].qp_num);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess);
    EXPECT_EQ(wc[i].byte_len, 40 + s.payload.size());
  }
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxMcast), 2u);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxMcastDelivered), 2u);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxMcastNoGroup), 1u);

  // Detached, a QP hears the group no more; the group goes with its last.
  EXPECT_TRUE(b.engine.detach_mcast(group, x.qpn()));
  EXPECT_FALSE(b.engine.detach_mcast(group, x.qpn()));
  b.engine.detach(y.qpn());
  r.dst_ip = group;
  b.port.inject(test::build_frame(r, s));
  b.engine.poll(now_ns());
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxMcastNoGroup), 2u);
}

}  // namespace
}  // namespace uroce::engine
