/* SPDX-License-Identifier: BSD-3-Clause */
// Scenarios over the simulated network that a property run does not pin
// down: a cut link, a receiver that never posts, UD datagrams, UC loss.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::FaultModel;
using test::SimHost;
using test::SimNet;

constexpr unsigned kAll =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

SendWr send_of(std::vector<std::uint8_t>& buf, std::uint32_t lkey, std::uint64_t id,
               WrOpcode op = WrOpcode::kSend) {
  SendWr w;
  w.wr_id = id;
  w.opcode = op;
  w.send_flags = send_flags::kSignaled;
  w.num_sge = 1;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data()),
                  static_cast<std::uint32_t>(buf.size()), lkey};
  return w;
}

RecvWr recv_of(std::vector<std::uint8_t>& buf, std::uint32_t lkey, std::uint64_t id) {
  RecvWr r;
  r.wr_id = id;
  r.num_sge = 1;
  r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data()),
                  static_cast<std::uint32_t>(buf.size()), lkey};
  return r;
}

Wc poll_one(Cq& cq) {
  Wc wc;
  EXPECT_EQ(cq.poll(&wc, 1), 1u);
  return wc;
}

TEST(SimScenario, ACutLinkEndsInRetryExcErrAfterRetryCntTimeouts) {
  SimNet net(3);
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kRc);
  Qp& qb = b.create_qp(QpType::kRc);
  QpAttr p;
  p.max_rd_atomic = p.max_dest_rd_atomic = 1;
  p.timeout = 10;  // 4.194304 ms
  p.retry_cnt = 3;
  p.rnr_retry = 7;
  net.connect(qa, a, qb, b, p);
  FaultModel cut;
  cut.cut_at = 1;
  net.set_faults_all(cut);
  net.run_for(1000);

  std::vector<std::uint8_t> buf(100, 1);
  const Nanos t0 = net.now();
  ASSERT_EQ(qa.post_send(send_of(buf, a.memory().reg(buf.data(), 100, kAll), 1)), 0);
  ASSERT_TRUE(net.run_until([&] { return a.send_cq().size() > 0; }, t0 + 1'000'000'000));
  // Expect: the first send and retry_cnt retries, each waiting one local
  // ACK timeout, then RETRY_EXC_ERR: at t0 + 4 x 4.194304 ms exactly.
  const Nanos rto = Nanos{4096} << 10;
  EXPECT_EQ(net.now(), t0 + 4 * rto);
  const Wc wc = poll_one(a.send_cq());
  EXPECT_EQ(wc.status, WcStatus::kRetryExcErr);
  EXPECT_EQ(qa.state(), QpState::kErr);
  EXPECT_EQ(qa.counters().get(Counter::kLocalAckTimeoutErr), 4u);
  EXPECT_EQ(qa.counters().get(Counter::kRetryExceededErr), 1u);
  EXPECT_EQ(qa.counters().get(Counter::kSentPkts), 4u);
}

TEST(SimScenario, RnrRetrySevenWaitsForeverAndResumesWhenAReceiveIsPosted) {
  SimNet net(4);
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kRc);
  Qp& qb = b.create_qp(QpType::kRc);
  QpAttr p;
  p.max_rd_atomic = p.max_dest_rd_atomic = 1;
  p.timeout = 14;
  p.retry_cnt = 1;
  p.rnr_retry = 7;
  p.min_rnr_timer = 20;  // 10.24 ms
  net.connect(qa, a, qb, b, p);

  std::vector<std::uint8_t> src(3000, 9), dst(3000, 0);
  ASSERT_EQ(qa.post_send(send_of(src, a.memory().reg(src.data(), 3000, kAll), 1)), 0);
  // Expect: two seconds of RNR NAKs, the SEND neither done nor failed.
  net.run_for(2'000'000'000);
  EXPECT_EQ(a.send_cq().size(), 0u);
  EXPECT_EQ(qa.state(), QpState::kRts);
  EXPECT_GT(qa.counters().get(Counter::kRcvdRnrErr), 150u);
  EXPECT_EQ(qb.counters().get(Counter::kSendRnrErr), qa.counters().get(Counter::kRcvdRnrErr));

  ASSERT_EQ(qb.post_recv(recv_of(dst, b.memory().reg(dst.data(), 3000, kAll), 2)), 0);
  ASSERT_TRUE(net.run_until([&] { return a.send_cq().size() > 0; }, net.now() + 100'000'000));
  EXPECT_EQ(poll_one(a.send_cq()).status, WcStatus::kSuccess);
  const Wc r = poll_one(b.recv_cq());
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.byte_len, 3000u);
  EXPECT_EQ(src, dst);
}

TEST(SimScenario, RnrRetryExhaustedEndsInRnrRetryExcErr) {
  SimNet net(5);
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kRc);
  Qp& qb = b.create_qp(QpType::kRc);
  QpAttr p;
  p.max_rd_atomic = p.max_dest_rd_atomic = 1;
  p.timeout = 14;
  p.retry_cnt = 7;
  p.rnr_retry = 2;
  p.min_rnr_timer = 1;
  net.connect(qa, a, qb, b, p);
  std::vector<std::uint8_t> src(10, 9);
  ASSERT_EQ(qa.post_send(send_of(src, a.memory().reg(src.data(), 10, kAll), 1)), 0);
  ASSERT_TRUE(net.run_until([&] { return a.send_cq().size() > 0; }, 1'000'000'000));
  EXPECT_EQ(poll_one(a.send_cq()).status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(qa.counters().get(Counter::kRcvdRnrErr), 3u);  // first try + 2 retries
}

TEST(SimScenario, UdDeliversDatagramsWithAGrhAndDropsWrongQkeys) {
  SimNet net(6);
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kUd);
  Qp& qb = b.create_qp(QpType::kUd);
  net.activate_ud(qa, 0x11111111);
  net.activate_ud(qb, 0x22222222);

  std::vector<std::uint8_t> msg(200);
  for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<std::uint8_t>(i * 3);
  const auto lk = a.memory().reg(msg.data(), msg.size(), kAll);
  std::vector<std::uint8_t> rbuf(40 + 1024, 0);
  const auto rk = b.memory().reg(rbuf.data(), rbuf.size(), kAll);
  ASSERT_EQ(qb.post_recv(recv_of(rbuf, rk, 7)), 0);

  const wire::RouteTemplate route(a.route_to(b));
  SendWr w = send_of(msg, lk, 1, WrOpcode::kSendWithImm);
  w.imm_data = 0x01020304;
  w.ud = {&route, qb.qpn(), 0x33333333};  // wrong Q_Key: dropped
  ASSERT_EQ(qa.post_send(w), 0);
  w.wr_id = 2;
  w.ud.remote_qkey = 0x22222222;
  ASSERT_EQ(qa.post_send(w), 0);
  std::vector<std::uint8_t> big(1500);
  SendWr too_big = send_of(big, a.memory().reg(big.data(), big.size(), kAll), 3);
  too_big.ud = {&route, qb.qpn(), 0x22222222};
  ASSERT_EQ(qa.post_send(too_big), 0);  // longer than the 1024 MTU

  ASSERT_TRUE(net.run_until([&] { return a.send_cq().size() >= 3 && b.recv_cq().size() >= 1; },
                            100'000'000));
  for (std::uint64_t id = 1; id <= 3; ++id) {
    const Wc s = poll_one(a.send_cq());
    EXPECT_EQ(s.wr_id, id);
    EXPECT_EQ(s.status, WcStatus::kSuccess);  // UD never learns of drops
  }
  const Wc r = poll_one(b.recv_cq());
  EXPECT_EQ(b.recv_cq().size(), 0u) << "the wrong-Q_Key datagram must not arrive";
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(r.byte_len, 40u + 200);
  EXPECT_EQ(r.src_qp, qa.qpn());
  EXPECT_TRUE(r.wc_flags & wc_flags::kGrh);
  EXPECT_TRUE(r.wc_flags & wc_flags::kWithImm);
  EXPECT_EQ(r.imm_data, 0x01020304u);
  // The GRH holds the IPv4 header in its last 20 bytes (RoCEv2 over IPv4).
  EXPECT_EQ(rbuf[20], 0x45);
  EXPECT_EQ(wire::load_be32(rbuf.data() + 20 + 12), a.ip().v4());
  EXPECT_EQ(wire::load_be32(rbuf.data() + 20 + 16), b.ip().v4());
  EXPECT_EQ(0, std::memcmp(rbuf.data() + 40, msg.data(), 200));
  EXPECT_EQ(qb.counters().get(Counter::kDroppedInvalid), 1u);
  EXPECT_EQ(qa.counters().get(Counter::kSentPkts), 2u) << "the oversized one is not sent";
}

// mlx5 reports a RoCE UD receive's L3 header type in wc.sl, and UCX's UD
// transport finds the DGID within the GRH by it: 2 for IPv4, 1 for IPv6.
TEST(SimScenario, UdReceiveReportsItsIpVersionInSlAsMlx5Does) {
  for (const bool ipv6 : {false, true}) {
    test::SimRoutes routes;
    routes.ipv6 = ipv6;
    SimNet net(8, 10'000'000'000, routes);
    SimHost& a = net.add_host();
    SimHost& b = net.add_host();
    Qp& qa = a.create_qp(QpType::kUd);
    Qp& qb = b.create_qp(QpType::kUd);
    net.activate_ud(qa, 0x11111111);
    net.activate_ud(qb, 0x22222222);
    std::vector<std::uint8_t> msg(16, 1);
    std::vector<std::uint8_t> rbuf(40 + 64, 0);
    ASSERT_EQ(qb.post_recv(recv_of(rbuf, b.memory().reg(rbuf.data(), rbuf.size(), kAll), 7)), 0);
    const wire::RouteTemplate route(a.route_to(b));
    SendWr w = send_of(msg, a.memory().reg(msg.data(), msg.size(), kAll), 1);
    w.ud = {&route, qb.qpn(), 0x22222222};
    ASSERT_EQ(qa.post_send(w), 0);
    ASSERT_TRUE(net.run_until([&] { return b.recv_cq().size() >= 1; }, 100'000'000));
    const Wc r = poll_one(b.recv_cq());
    EXPECT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.sl, ipv6 ? 1 : 2) << (ipv6 ? "IPv6" : "IPv4");
    EXPECT_EQ(rbuf[ipv6 ? 0 : 20] >> 4, ipv6 ? 6 : 4) << "the GRH holds the header sl names";
  }
}

TEST(SimScenario, UcDeliversWhatArrivesIntactAndInOrderWithoutAcks) {
  SimNet net(7);
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kUc, 512);
  Qp& qb = b.create_qp(QpType::kUc, 512);
  QpAttr p;
  p.path_mtu = wire::Mtu::k512;
  net.connect(qa, a, qb, b, p);
  FaultModel lossy;
  lossy.drop = 0.05;
  net.set_faults_all(lossy);

  constexpr int kMessages = 200;
  std::vector<std::vector<std::uint8_t>> src(kMessages), dst(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    src[i].assign(100 + 37 * i % 2000, static_cast<std::uint8_t>(i));
    dst[i].assign(4096, 0);
    ASSERT_EQ(qb.post_recv(recv_of(dst[i], b.memory().reg(dst[i].data(), 4096, kAll), i)), 0);
    ASSERT_EQ(qa.post_send(send_of(src[i], a.memory().reg(src[i].data(), src[i].size(), kAll), i)),
              0);
  }
  net.run_for(100'000'000);
  EXPECT_EQ(a.send_cq().size(), static_cast<std::uint32_t>(kMessages)) << "UC completes on send";
  // Receive WQEs are consumed in order; a message that lost a packet is
  // dropped and its WQE serves the next one.
  Wc wc;
  int delivered = 0;
  std::uint64_t last = 0;
  while (b.recv_cq().poll(&wc, 1) == 1) {
    ASSERT_EQ(wc.status, WcStatus::kSuccess);
    const auto& m = dst[wc.wr_id];
    // Find which message it holds by its fill byte and length.
    const int which = m[0];
    EXPECT_GE(static_cast<std::uint64_t>(which), last) << "in order";
    last = which;
    ASSERT_EQ(wc.byte_len, src[which].size());
    EXPECT_EQ(0, std::memcmp(m.data(), src[which].data(), wc.byte_len));
    ++delivered;
  }
  EXPECT_GT(delivered, kMessages / 2);
  EXPECT_LT(delivered, kMessages) << "5 % loss must have cost some messages";
  EXPECT_EQ(qb.counters().get(Counter::kSentPkts), 0u) << "UC never acknowledges";
}

}  // namespace
}  // namespace uroce::transport
