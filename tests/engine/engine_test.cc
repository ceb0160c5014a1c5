/* SPDX-License-Identifier: BSD-3-Clause */
// The engine over two ports joined in memory: RoCEv2 transfers with
// impairments, bad input from the wire, and which thread holds the engine.
// The host stack's cases (ARP, ND, ping) are in host_stack_test.cc.

#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "engine/debug.h"
#include "engine/hosts.h"
#include "support/wire_samples.h"
#include "wire/arp.h"
#include "wire/icmp.h"

namespace uroce::engine {
namespace {

using transport::Nanos;
using transport::Qp;
using transport::QpAttr;
using transport::QpState;
using transport::QpType;

struct Transfer {
  std::vector<std::uint8_t> src, dst, back;
};

// WRITE a buffer to the peer, READ it back, SEND it: all bytes must match.
void write_read_send(Host& a, Host& b, std::size_t size, std::mt19937_64& rng) {
  Transfer t;
  t.src.resize(size + 1);  // never empty: a zero-length transfer still has an address
  for (auto& x : t.src) x = static_cast<std::uint8_t>(rng());
  t.dst.assign(size + 1, 0);
  t.back.assign(size + 1, 0);
  std::vector<std::uint8_t> rbuf(size + 1, 0);
  const auto lk = a.memory.reg(t.src.data(), t.src.size(), kAll);
  const auto bk = a.memory.reg(t.back.data(), t.back.size(), kAll);
  const auto rk = b.memory.reg(t.dst.data(), t.dst.size(), kAll);
  const auto rrk = b.memory.reg(rbuf.data(), rbuf.size(), kAll);
  transport::RecvWr r;
  r.wr_id = 3;
  r.num_sge = 1;
  r.sg_list[0] = {reinterpret_cast<std::uint64_t>(rbuf.data()),
                  static_cast<std::uint32_t>(rbuf.size()), rrk};
  ASSERT_EQ(b.qp->post_recv(r), 0);
  transport::SendWr w;
  w.num_sge = 1;
  w.send_flags = transport::send_flags::kSignaled;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(t.src.data()), static_cast<std::uint32_t>(size),
                  lk};
  w.wr_id = 1;
  w.opcode = transport::WrOpcode::kRdmaWrite;
  w.remote_addr = reinterpret_cast<std::uint64_t>(t.dst.data());
  w.rkey = rk;
  ASSERT_EQ(a.qp->post_send(w), 0);
  transport::SendWr rd = w;
  rd.wr_id = 2;
  rd.opcode = transport::WrOpcode::kRdmaRead;
  rd.sg_list[0] = {reinterpret_cast<std::uint64_t>(t.back.data()), static_cast<std::uint32_t>(size),
                   bk};
  rd.send_flags |= transport::send_flags::kFence;
  ASSERT_EQ(a.qp->post_send(rd), 0);
  transport::SendWr s = w;
  s.wr_id = 3;
  s.opcode = transport::WrOpcode::kSend;
  ASSERT_EQ(a.qp->post_send(s), 0);
  ASSERT_TRUE(run(a, b, [&] { return a.scq.size() >= 3 && b.rcq.size() >= 1; }))
      << "transfer of " << size << " bytes stalled";
  transport::Wc wc[4];
  ASSERT_EQ(a.scq.poll(wc, 4), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess);
  ASSERT_EQ(b.rcq.poll(wc, 4), 1u);
  EXPECT_EQ(wc[0].byte_len, size);
  EXPECT_EQ(0, std::memcmp(t.src.data(), t.dst.data(), size));
  EXPECT_EQ(0, std::memcmp(t.src.data(), t.back.data(), size));
  EXPECT_EQ(0, std::memcmp(t.src.data(), rbuf.data(), size));
}

TEST(Engine, MovesBytesIntactThroughAnImpairedLink) {
  port::FaultConfig f;
  f.rx = {0.01, 0.005, 0.005, 0.002};
  f.tx = {0.01, 0.005, 0.005, 0.002};
  f.seed = 7;
  Host a(kMacA, kIpA, f), b(kMacB, kIpB, f);
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x4242, 0x7373);
  std::mt19937_64 rng(1);
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{1024}, std::size_t{4097},
                           std::size_t{65536}, std::size_t{4} << 20}) {
    SCOPED_TRACE(size);
    write_read_send(a, b, size, rng);
  }
  // The impairments happened and the transport recovered from them.
  EXPECT_GT(a.faults()->counters().get(port::ImpairmentCounter::kDropped), 0u);
  EXPECT_GT(a.qp->counters().get(transport::Counter::kCompleterRetryErr) +
                b.qp->counters().get(transport::Counter::kCompleterRetryErr),
            0u);
  EXPECT_GT(b.engine.counters().drops(wire::DropReason::kBadIcrc) +
                a.engine.counters().drops(wire::DropReason::kBadIcrc) +
                a.engine.counters().drops(wire::DropReason::kBadIpChecksum) +
                b.engine.counters().drops(wire::DropReason::kBadIpChecksum),
            0u)
      << "corrupted frames are caught and counted";
  // Through loss and timeouts, every turn a QP had came from an event
  // (its doorbell, a packet, a timer), none from the engine's rescan.
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kTxSchedRescued), 0u);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kTxSchedRescued), 0u);
}

// Expect: a thousand QPs of which one is busy; the idle ones are never
// looked at on the busy one's turns (the round robin holds only QPs that
// may have work), and a post to any of them is sent on the next turn.
TEST(Engine, OnlyQpsWithWorkTakeTurns) {
  Host a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x4242, 0x7373);
  std::vector<std::unique_ptr<Qp>> idle;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    transport::QpInit init;
    init.type = QpType::kRc;
    init.qpn = 0x100000 + i;
    init.send_cq = init.recv_cq = &a.scq;
    init.memory = &a.memory;
    idle.push_back(std::make_unique<Qp>(init));
    a.engine.attach(*idle.back());
  }
  std::mt19937_64 rng(2);
  write_read_send(a, b, 1 << 20, rng);
  const EngineCounters& c = a.engine.counters();
  EXPECT_EQ(c.get(EngineCounter::kTxSchedRescued), 0u);
  // A turn for each idle QP once (it was queued when attached), and for
  // the busy one a turn per event that may have given it work (a packet
  // in, a timer, a post) and per turn it sent on: a scan of every QP on
  // every poll would be a thousand turns a poll.
  EXPECT_LE(c.get(EngineCounter::kTxSchedTurns),
            1000 + 2 * (c.get(EngineCounter::kRxFrames) + c.get(EngineCounter::kTxFrames)) + 100);
  for (auto& q : idle) a.engine.detach(q->qpn());
}

// Expect: a receive WR posted to a QP in the error state completes at once
// with IBV_WC_WR_FLUSH_ERR, on the doorbell the post rings.
TEST(Engine, AReceivePostedInTheErrorStateIsFlushed) {
  Host a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x4242, 0x7373);
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(b.qp->modify(err, transport::attr_mask::kState, now_ns()), 0);
  ASSERT_TRUE(run(a, b, [&] { return !b.qp->has_work(now_ns()); }));
  std::vector<std::uint8_t> buf(64);
  const auto key = b.memory.reg(buf.data(), buf.size(), kAll);
  transport::RecvWr r;
  r.wr_id = 77;
  r.num_sge = 1;
  r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data()), 64, key};
  ASSERT_EQ(b.qp->post_recv(r), 0);
  ASSERT_TRUE(run(
      a, b, [&] { return b.rcq.size() >= 1; }, 10))
      << "the receive WR stays queued";
  transport::Wc wc;
  ASSERT_EQ(b.rcq.poll(&wc, 1), 1u);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.status, transport::WcStatus::kWrFlushErr);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kTxSchedRescued), 0u);
}

TEST(Engine, BadFramesAreDroppedAndCountedAndTouchNothingOutsideRegisteredMemory) {
  Host a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x1001, 0x2002);
  // A registered region with guard bytes on both sides.
  std::vector<std::uint8_t> arena(3 * 4096, 0xEE);
  std::uint8_t* region = arena.data() + 4096;
  std::memset(region, 0, 4096);
  const auto rk = b.memory.reg(region, 4096, kAll);

  std::mt19937_64 rng(99);
  const wire::RoceRoute to_b = [&] {
    wire::RoceRoute r;
    r.src_mac = kMacA;
    r.dst_mac = kMacB;
    r.src_ip = kIpA;
    r.dst_ip = kIpB;
    return r;
  }();
  std::uint64_t injected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> f;
    if (i % 2 == 0) {
      // Random bytes of random length.
      f.resize(rng() % 300);
      for (auto& x : f) x = static_cast<std::uint8_t>(rng());
    } else {
      // Valid RoCEv2 to our QP, with ICRC, but hostile fields: writes and
      // reads at random addresses and lengths around the region, random
      // keys (the real one half the time), random opcodes and PSNs.
      const auto ops = test::all_opcodes();
      test::SamplePacket s = test::sample_packet(ops[rng() % ops.size()], rng);
      s.bth.dest_qp = 0x2002;
      s.ext.reth.va = reinterpret_cast<std::uint64_t>(region) + (rng() % 12288) - 6144;
      s.ext.reth.rkey = (rng() & 1) ? rk : static_cast<std::uint32_t>(rng());
      s.ext.reth.dma_length = static_cast<std::uint32_t>(rng() % 9000);
      s.ext.atomic_eth.va = s.ext.reth.va & ~std::uint64_t{7};
      s.ext.atomic_eth.rkey = s.ext.reth.rkey;
      f = test::build_frame(to_b, s);
    }
    b.port.inject(std::move(f));
    ++injected;
    if (i % 64 == 0) b.engine.poll(now_ns());
  }
  ASSERT_TRUE(
      run(a, b, [&] { return b.engine.counters().get(EngineCounter::kRxFrames) >= injected; }));
  // Expect: every frame was looked at, the bad ones counted under reasons,
  // the engine still answers, and the guard bytes never changed.
  EXPECT_GE(b.engine.counters().get(EngineCounter::kRxFrames), injected);
  std::uint64_t drops = 0;
  for (std::size_t r = 1; r < static_cast<std::size_t>(wire::DropReason::kCount); ++r)
    drops += b.engine.counters().drops(static_cast<wire::DropReason>(r));
  // Random bytes mostly fail before RoCEv2 (not IP: "other"); the hostile
  // RoCEv2 frames fail the parser or reach the QP, which refuses them
  // (another transport's opcode, say: the QP counts those).
  EXPECT_GE(drops + b.engine.counters().get(EngineCounter::kRxOther) +
                b.qp->counters().get(transport::Counter::kDroppedInvalid),
            injected / 2);
  EXPECT_GE(b.engine.counters().get(EngineCounter::kRxRoce), injected / 2 - drops);
  EXPECT_GT(drops, 0u);
  for (std::size_t i = 0; i < 4096; ++i) {
    ASSERT_EQ(arena[i], 0xEE) << "guard before the region changed at " << i;
    ASSERT_EQ(arena[8192 + i], 0xEE) << "guard after the region changed at " << i;
  }
  std::vector<std::uint8_t> req(60);
  wire::build_arp_request(req, kMacA, kIpA.v4(), kIpB.v4());
  const auto replies = b.engine.counters().get(EngineCounter::kTxArpReply);
  b.port.inject(req);
  b.engine.poll(now_ns());
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kTxArpReply), replies + 1) << "still alive";
}

TEST(Engine, CountsPacketsForUnknownQpsAndOtherHosts) {
  Host b(kMacB, kIpB);
  std::mt19937_64 rng(3);
  wire::RoceRoute r;
  r.src_ip = kIpA;
  r.dst_ip = kIpB;
  test::SamplePacket s = test::sample_packet(0x04, rng);
  s.bth.dest_qp = 0x999;
  b.port.inject(test::build_frame(r, s));
  r.dst_ip = *wire::IpAddr::parse("10.9.0.50");
  b.port.inject(test::build_frame(r, s));
  b.engine.poll(now_ns());
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxUnknownQpn), 1u);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kRxNotOurIp), 1u);
}

// eRPC's in_dispatch(): the engine knows which thread holds it, so that
// what belongs to that thread can assert it.
// Expect: a doorbell's pass (try_send) sends what was just posted and
// nothing else: what arrived waits, unread, for the next whole iteration.
TEST(Engine, ASendPassSendsThePostAndLeavesWhatArrived) {
  Host a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  connect(a, b, 0x4242, 0x7373);
  std::vector<std::uint8_t> src(512, 0x5A), dst(512, 0);
  transport::SendWr w;
  w.wr_id = 9;
  w.num_sge = 1;
  w.send_flags = transport::send_flags::kSignaled;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()), 512,
                  a.memory.reg(src.data(), src.size(), kAll)};
  w.opcode = transport::WrOpcode::kRdmaWrite;
  w.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  w.rkey = b.memory.reg(dst.data(), dst.size(), kAll);
  const EngineCounters& c = a.engine.counters();
  const std::uint64_t tx0 = c.get(EngineCounter::kTxFrames);
  const std::uint64_t rx0 = c.get(EngineCounter::kRxFrames);
  ASSERT_EQ(a.qp->post_send(w), 0);
  ASSERT_TRUE(a.engine.try_send(now_ns()));
  EXPECT_EQ(c.get(EngineCounter::kTxFrames), tx0 + 1) << "the WRITE left on the doorbell";
  b.engine.poll(now_ns());  // b places it and acknowledges
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
  ASSERT_TRUE(a.engine.try_send(now_ns()));
  EXPECT_EQ(c.get(EngineCounter::kRxFrames), rx0) << "a send pass read the port";
  EXPECT_EQ(a.scq.size(), 0u);
  a.engine.poll(now_ns());
  EXPECT_EQ(c.get(EngineCounter::kRxFrames), rx0 + 1);
  transport::Wc wc[2];
  ASSERT_EQ(a.scq.poll(wc, 2), 1u);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
}

// A SEND of 64 bytes from a to b, posted and sent on its doorbell, into a
// receive b posted.
void send_one(Host& a, Host& b, std::vector<std::uint8_t>& src, std::vector<std::uint8_t>& dst,
              std::uint64_t wr_id) {
  transport::RecvWr r;
  r.wr_id = wr_id;
  r.num_sge = 1;
  r.sg_list[0] = {reinterpret_cast<std::uint64_t>(dst.data()), 64,
                  b.memory.reg(dst.data(), dst.size(), kAll)};
  ASSERT_EQ(b.qp->post_recv(r), 0);
  transport::SendWr w;
  w.wr_id = wr_id;
  w.num_sge = 1;
  w.send_flags = transport::send_flags::kSignaled;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()), 64,
                  a.memory.reg(src.data(), src.size(), kAll)};
  w.opcode = transport::WrOpcode::kSend;
  ASSERT_EQ(a.qp->post_send(w), 0);
  ASSERT_TRUE(a.engine.try_send(now_ns()));
}

// Two connected hosts; b's program polls for completions while a sends.
class CompletionsFirst : public ::testing::Test {
 protected:
  CompletionsFirst() {
    test::PipePort::join(a.port, b.port);
    connect(a, b, 0x4242, 0x7373);
    tx0 = b_tx();
  }
  std::uint64_t b_tx() const { return b.engine.counters().get(EngineCounter::kTxFrames); }
  // a SENDs into dst; b's program polls for completions. Returns the
  // poll's work (frames received and sent).
  std::uint32_t receive(std::vector<std::uint8_t>& dst, std::uint64_t wr_id) {
    send_one(a, b, src, dst, wr_id);
    std::uint32_t work = 0;
    EXPECT_TRUE(b.engine.try_poll_completions_first(now_ns(), &work));
    return work;
  }
  // a's SENDs all completed, acknowledged.
  void expect_acked(std::size_t sends) {
    ASSERT_TRUE(run(a, b, [&] { return a.scq.size() == sends; }));
    transport::Wc wc[4];
    ASSERT_EQ(a.scq.poll(wc, 4), sends);
    for (std::size_t i = 0; i < sends; ++i) EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess);
  }

  Host a{kMacA, kIpA}, b{kMacB, kIpB};
  std::vector<std::uint8_t> src = std::vector<std::uint8_t>(64, 0x5A);
  std::vector<std::uint8_t> dst1 = std::vector<std::uint8_t>(64, 0);
  std::vector<std::uint8_t> dst2 = std::vector<std::uint8_t>(64, 0);
  std::uint64_t tx0 = 0;
};

// Expect: a program's poll that received something returns with the
// completion before the ACK leaves; its next call sends the ACK, even when
// that call receives again (a stream of arrivals cannot hold ACKs back).
TEST_F(CompletionsFirst, APollReturnsBeforeTheAckAndTheNextSendsIt) {
  EXPECT_EQ(receive(dst1, 1), 1u);
  EXPECT_EQ(b.rcq.size(), 1u) << "the SEND completed";
  EXPECT_EQ(b_tx(), tx0) << "the ACK left before the completion";
  // A second SEND arrives before b's next call, which receives it and
  // sends the first one's ACK all the same.
  receive(dst2, 2);
  EXPECT_EQ(b.rcq.size(), 2u);
  EXPECT_GT(b_tx(), tx0) << "two turns in a row deferred the ACK";
  expect_acked(2);
  EXPECT_EQ(std::memcmp(src.data(), dst2.data(), 64), 0);
}

// Expect: a QP destroyed right after the completion of what it received
// (ibv_rc_pingpong's last message) still acknowledges it: the detach
// sends what the program's poll left.
TEST_F(CompletionsFirst, ADetachSendsTheAcksAPollLeft) {
  receive(dst1, 1);
  ASSERT_EQ(b.rcq.size(), 1u);
  ASSERT_EQ(b_tx(), tx0);
  b.engine.detach(b.qp->qpn());
  EXPECT_EQ(b_tx(), tx0 + 1) << "the ACK died with the QP";
  expect_acked(1);
}

// Expect: any control call that takes the engine (locked(): a modify, a
// deregistration) first sends what a program's poll left; a stats read
// does not.
TEST_F(CompletionsFirst, AControlCallSendsTheAcksAPollLeft) {
  receive(dst1, 1);
  ASSERT_EQ(b.rcq.size(), 1u);
  ASSERT_EQ(b_tx(), tx0);
  b.engine.for_each_qp([](const Qp&) {});
  EXPECT_EQ(b_tx(), tx0) << "reading the QPs' stats sent";
  b.engine.locked([] {});
  EXPECT_EQ(b_tx(), tx0 + 1);
  b.engine.locked([] {});
  EXPECT_EQ(b_tx(), tx0 + 1) << "sent twice";
  expect_acked(1);
}

// Expect: once the process is ending (finish_turn, before the poll thread
// stops), a poll sends the ACKs it caused before it returns: no poll
// thread is left to send them.
TEST_F(CompletionsFirst, APollAfterTheLastTurnLeavesNothing) {
  receive(dst1, 1);
  ASSERT_EQ(b_tx(), tx0);
  b.engine.finish_turn();
  EXPECT_EQ(b_tx(), tx0 + 1) << "what the poll left";
  EXPECT_GT(receive(dst2, 2), 1u) << "received and sent";
  EXPECT_EQ(b_tx(), tx0 + 2) << "the poll left the second ACK";
  expect_acked(2);
}

TEST(Engine, KnowsWhichThreadHoldsIt) {
  Host a(kMacA, kIpA);
  EXPECT_FALSE(a.engine.in_engine_thread());
  a.engine.locked([&] { EXPECT_TRUE(a.engine.in_engine_thread()); });
  EXPECT_FALSE(a.engine.in_engine_thread()) << "let go";
  std::atomic<int> step{0};
  std::thread other([&] {
    a.engine.locked([&] {
      EXPECT_TRUE(a.engine.in_engine_thread());
      step = 1;
      while (step != 2) std::this_thread::yield();
    });
  });
  while (step != 1) std::this_thread::yield();
  // Expect: held by the other thread, not this one, and not free to poll.
  EXPECT_FALSE(a.engine.in_engine_thread());
  EXPECT_FALSE(a.engine.try_poll(now_ns()));
  EXPECT_FALSE(a.engine.try_send(now_ns()));
  step = 2;
  other.join();
  EXPECT_TRUE(a.engine.try_poll(now_ns()));
}

// Only where the assertions are compiled in (Debug and the sanitizer
// builds): elsewhere there is nothing to check, and a test that would
// only skip is not registered.
#if UROCE_DEBUG_ASSERTS_ON
TEST(EngineDeathTest, AnEngineThreadCallWithoutTheEngineAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Host a(kMacA, kIpA);
  wire::RoceRoute r;
  r.src_mac = kMacA;
  r.dst_mac = kMacB;
  r.src_ip = kIpA;
  r.dst_ip = kIpB;
  EXPECT_DEATH(a.engine.send_cnp(r, 0x42), "in_engine_thread");
  a.engine.locked([&] { a.engine.send_cnp(r, 0x42); });  // holding the engine: fine
}
#endif

}  // namespace
}  // namespace uroce::engine
