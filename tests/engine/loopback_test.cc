/* SPDX-License-Identifier: BSD-3-Clause */
// Loopback inside a device: two QPs of one engine, addressed to the
// engine's own address, exchange WRITEs, READs and SENDs without a frame
// reaching the port, through the same receive path and checks as frames
// from the wire.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/hosts.h"

namespace uroce::engine {
namespace {

// Two QPs of `h` connected to each other, RC, path MTU 1024, each
// addressed to the host's own IP and MAC.
std::pair<Qp*, Qp*> connect_loopback(Host& h, std::uint32_t qa, std::uint32_t qb) {
  using namespace transport::attr_mask;
  Qp& x = h.make_qp(qa);
  Qp& y = h.make_qp(qb);
  for (auto [q, peer] : {std::pair{&x, qb}, std::pair{&y, qa}}) {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = kAll;
    EXPECT_EQ(q->modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
    at.qp_state = QpState::kRtr;
    at.route.src_mac = at.route.dst_mac = h.port.mac();
    at.route.src_ip = at.route.dst_ip = kIpA;
    at.route.udp_sport = wire::roce_udp_sport(q->qpn(), peer);
    at.path_mtu = wire::Mtu::k1024;
    at.dest_qp_num = peer;
    at.rq_psn = 0x77;
    at.max_dest_rd_atomic = 8;
    at.min_rnr_timer = 1;
    EXPECT_EQ(
        q->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0),
        0);
    at.qp_state = QpState::kRts;
    at.sq_psn = 0x77;
    at.timeout = 10;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 8;
    EXPECT_EQ(q->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0),
              0);
  }
  return {&x, &y};
}

bool run_one(Host& h, const std::function<bool()>& done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    h.engine.poll(now_ns());
  }
  return true;
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

void exchange(Host& h) {
  auto [x, y] = connect_loopback(h, 0x101, 0x202);
  std::vector<std::uint8_t> src = random_bytes(256 * 1024, 1), dst(src.size()), back(src.size());
  std::vector<std::uint8_t> msg = random_bytes(4096, 2), inbox(4096);
  const std::uint32_t ksrc = h.memory.reg(src.data(), src.size(), kAll);
  const std::uint32_t kdst = h.memory.reg(dst.data(), dst.size(), kAll);
  const std::uint32_t kback = h.memory.reg(back.data(), back.size(), kAll);
  const std::uint32_t kmsg = h.memory.reg(msg.data(), msg.size(), kAll);
  const std::uint32_t kinbox = h.memory.reg(inbox.data(), inbox.size(), kAll);
  auto addr = [](const std::vector<std::uint8_t>& v) {
    return reinterpret_cast<std::uint64_t>(v.data());
  };

  transport::RecvWr r;
  r.wr_id = 9;
  r.num_sge = 1;
  r.sg_list[0] = {addr(inbox), 4096, kinbox};
  ASSERT_EQ(y->post_recv(r), 0);
  transport::SendWr w;
  w.send_flags = transport::send_flags::kSignaled;
  w.num_sge = 1;
  w.wr_id = 1;  // x WRITEs src into dst
  w.opcode = transport::WrOpcode::kRdmaWrite;
  w.sg_list[0] = {addr(src), static_cast<std::uint32_t>(src.size()), ksrc};
  w.remote_addr = addr(dst);
  w.rkey = kdst;
  ASSERT_EQ(x->post_send(w), 0);
  w.wr_id = 2;  // y READs dst into back
  w.opcode = transport::WrOpcode::kRdmaRead;
  w.sg_list[0] = {addr(back), static_cast<std::uint32_t>(back.size()), kback};
  w.remote_addr = addr(dst);
  w.rkey = kdst;
  // The READ goes from the other QP: it waits for the WRITE's completion.
  ASSERT_TRUE(run_one(h, [&] { return h.scq.size() >= 1; }));
  ASSERT_EQ(y->post_send(w), 0);
  w.wr_id = 3;  // x SENDs msg to y's receive
  w.opcode = transport::WrOpcode::kSend;
  w.send_flags = transport::send_flags::kSignaled;
  w.sg_list[0] = {addr(msg), 4096, kmsg};
  ASSERT_EQ(x->post_send(w), 0);
  ASSERT_TRUE(run_one(h, [&] { return h.scq.size() >= 3 && h.rcq.size() >= 1; }));
  transport::Wc wc[4];
  ASSERT_EQ(h.scq.poll(wc, 4), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess) << "wr " << wc[i].wr_id;
  ASSERT_EQ(h.rcq.poll(wc, 4), 1u);
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
  EXPECT_EQ(wc[0].byte_len, 4096u);
  EXPECT_EQ(dst, src) << "WRITE";
  EXPECT_EQ(back, src) << "READ";
  EXPECT_EQ(inbox, msg) << "SEND";
}

TEST(Loopback, TwoQpsOfOneDeviceTalkWithoutTheWire) {
  Host h(kMacA, kIpA);
  h.port.keep_sent = true;
  exchange(h);
  EXPECT_TRUE(h.port.sent.empty()) << "a frame reached the wire";
  const auto tx = h.engine.counters().get(EngineCounter::kTxLoopback);
  EXPECT_GT(tx, 2 * 256u) << "every packet and ACK looped back";
  EXPECT_EQ(h.engine.counters().get(EngineCounter::kRxLoopback), tx);
}

TEST(Loopback, OurMacWithAnotherAddressIsAnotherProgramOnThePort) {
  // Programs sharing a port share its MAC: only our own addresses loop.
  Host h(kMacA, kIpA);
  h.port.keep_sent = true;
  wire::RoceRoute r;
  r.src_mac = r.dst_mac = kMacA;
  r.src_ip = kIpA;
  r.dst_ip = kIpB;
  r.dscp = 0;
  h.engine.locked([&] { h.engine.send_cnp(r, 0x42); });
  EXPECT_EQ(h.port.sent.size(), 1u);
  EXPECT_EQ(h.engine.counters().get(EngineCounter::kTxLoopback), 0u);
  r.dst_ip = kIpA;
  h.engine.locked([&] { h.engine.send_cnp(r, 0x42); });
  EXPECT_EQ(h.port.sent.size(), 1u) << "to ourselves: kept off the wire";
  EXPECT_EQ(h.engine.counters().get(EngineCounter::kTxLoopback), 1u);
}

// The port's faults are the wire's: frames a device sends itself never
// reach the port (as rxe loops them back below its netdev, rxe_net.c
// rxe_loopback), so the [fault] table does not touch them. They still pass
// the receive checks of frames from the wire: each one is parsed as
// RoCEv2 before a QP sees it.
TEST(Loopback, LoopedBackFramesPassTheWiresChecksAndNotThePortsFaults) {
  port::FaultConfig fault;
  fault.tx.corrupt = 0.02;  // one bit of one frame in fifty
  Host h(kMacA, kIpA, fault);
  exchange(h);
  ASSERT_NE(h.faults(), nullptr);
  EXPECT_EQ(h.faults()->counters().get(port::ImpairmentCounter::kCorrupted), 0u);
  EXPECT_EQ(h.engine.counters().get(EngineCounter::kRxRoce),
            h.engine.counters().get(EngineCounter::kRxLoopback))
      << "every looped-back frame went through the RoCEv2 parser";
  std::uint64_t dropped = 0;
  for (std::size_t r = 1; r < static_cast<std::size_t>(wire::DropReason::kCount); ++r)
    dropped += h.engine.counters().drops(static_cast<wire::DropReason>(r));
  EXPECT_EQ(dropped, 0u) << "and none was damaged on the way";
}

}  // namespace
}  // namespace uroce::engine
