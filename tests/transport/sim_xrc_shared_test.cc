/* SPDX-License-Identifier: BSD-3-Clause */
// An XRC target QP shared by two processes of one host (responder_state.h):
// each process has its own SRQs, memory and Qp of the target QP; the
// requests for a process's SRQ reach its Qp (the device daemon's part,
// played by the simulated host), and the two Qps are one QP on the wire:
// one PSN sequence, one MSN, responder resources that answer duplicates
// in whichever process executed the original.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::SimHost;
using test::SimMemory;
using test::SimNet;
using test::xrc_wr;

// One process's view of the shared domain: its own SRQs over its own
// memory. An SRQ number of the other process's is not its to find; the
// daemon never hands it such a request, so a lookup of one is an error.
class ProcessDomain : public XrcDomain {
 public:
  struct Srq {
    RecvQueue rq{256, 1};
    Cq cq{1024};
  };
  explicit ProcessDomain(MemoryAccess& memory) : memory_(memory) {}
  Lookup find_srq(std::uint32_t srqn, XrcSrq* out) override {
    const auto it = srqs.find(srqn);
    if (it == srqs.end()) return Lookup::kNoSuchSrq;
    *out = {&it->second.rq, &it->second.cq, &memory_};
    return Lookup::kFound;
  }
  std::map<std::uint32_t, Srq> srqs;

 private:
  MemoryAccess& memory_;
};

// A lock that fails the test if two Qps ever hold it at once, or one
// enters it twice, and counts how often it was taken.
class CheckedLock : public SharedResponderLock {
 public:
  void lock() override {
    EXPECT_FALSE(held_) << "the shared responder's lock taken twice";
    held_ = true;
    ++taken;
  }
  void unlock() override {
    EXPECT_TRUE(held_);
    held_ = false;
  }
  std::uint64_t taken = 0;

 private:
  bool held_ = false;
};

constexpr std::uint32_t kSrq1 = 0x0A1111;  // the first process's
constexpr std::uint32_t kSrq2 = 0x0B2222;  // the second process's

struct SharedTarget {
  explicit SharedTarget(std::uint64_t seed = 1) : net(seed) {
    dom1.srqs[kSrq1];
    dom2.srqs[kSrq2];
    b.route_xrc_srq(kSrq2, tgt2);
    net.connect(ini, a, tgt1, b, test::rc_params());
  }
  // The block and its lock outlive the QPs (the net's), which take the
  // lock as they go.
  SharedResponder block;
  CheckedLock lock;
  SimMemory mem2;  ///< the second process's memory (the first's is b's)
  SimNet net;
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  ProcessDomain dom1{b.memory()};
  ProcessDomain dom2{mem2};
  Qp& ini = a.create_qp(QpType::kXrcIni);
  Qp& tgt1 = b.create_shared_target(&dom1, &block, &lock);
  Qp& tgt2 = b.create_shared_target(&dom2, &block, &lock, tgt1.qpn());

  std::vector<Wc> poll(Cq& cq) {
    std::vector<Wc> out(1024);
    out.resize(cq.poll(out.data(), 1024));
    return out;
  }
  bool wait_cq(Cq& cq, std::uint32_t n) {
    return net.run_until([&] { return cq.size() >= n; }, net.now() + 5'000'000'000);
  }
  void post_recv(ProcessDomain& dom, std::uint32_t srqn, std::uint64_t id, void* buf,
                 std::uint32_t len, std::uint32_t key) {
    RecvWr r;
    r.wr_id = id;
    r.num_sge = 1;
    r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf), len, key};
    ASSERT_EQ(dom.srqs.at(srqn).rq.post(r), 0);
  }
};

TEST(SimXrcShared, TheSecondProcessAdoptsTheStateTheFirstSet) {
  SharedTarget t;
  // Connected through the first Qp alone; the second adopts RTR/RTS and
  // the attributes with its first look at the block.
  EXPECT_EQ(t.tgt1.state(), QpState::kRts);
  EXPECT_EQ(t.tgt2.state(), QpState::kReset);
  EXPECT_EQ(t.block.state, QpState::kRts);
  std::vector<std::uint8_t> src(64, 9), dst(64, 0);
  const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
  const auto dk = t.mem2.reg(dst.data(), dst.size(), access::kLocalWrite);
  t.post_recv(t.dom2, kSrq2, 7, dst.data(), 64, dk);
  ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, 1, kSrq2, src.data(), 64, lk)), 0);
  ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 1));
  EXPECT_EQ(t.poll(t.a.send_cq())[0].status, WcStatus::kSuccess);
  EXPECT_EQ(t.tgt2.state(), QpState::kRts);
  EXPECT_EQ(t.tgt2.attr().dest_qp_num, t.ini.qpn());
  EXPECT_EQ(t.tgt2.counters().get(Counter::kRcvdPkts), 1u);
  EXPECT_EQ(t.tgt1.counters().get(Counter::kRcvdPkts), 0u);
  const auto r = t.poll(t.dom2.srqs.at(kSrq2).cq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 7u);
  EXPECT_EQ(r[0].qp_num, t.tgt1.qpn());
  EXPECT_EQ(dst, src);
}

TEST(SimXrcShared, OneSequenceAcrossBothProcessesUnderLoss) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SharedTarget t(seed);
    test::FaultModel f;
    f.drop = 0.05;
    f.duplicate = 0.01;
    t.net.set_faults_all(f);
    constexpr int kMessages = 60;
    constexpr std::uint32_t kLen = 2500;
    std::vector<std::uint8_t> src(kMessages * kLen);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 13 + 1);
    std::vector<std::uint8_t> dst1(kMessages * kLen, 0), dst2(kMessages * kLen, 0);
    const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
    const auto k1 = t.b.memory().reg(dst1.data(), dst1.size(), access::kLocalWrite);
    const auto k2 = t.mem2.reg(dst2.data(), dst2.size(), access::kLocalWrite);
    for (int m = 0; m < kMessages; ++m) {
      auto* at1 = dst1.data() + m * kLen;
      auto* at2 = dst2.data() + m * kLen;
      if (m % 2)
        t.post_recv(t.dom2, kSrq2, static_cast<std::uint64_t>(m), at2, kLen, k2);
      else
        t.post_recv(t.dom1, kSrq1, static_cast<std::uint64_t>(m), at1, kLen, k1);
    }
    for (int m = 0; m < kMessages; ++m) {
      ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, static_cast<std::uint64_t>(m),
                                       (m % 2) ? kSrq2 : kSrq1, src.data() + m * kLen, kLen, lk)),
                0);
      if (m % 16 == 15) t.net.run_for(200'000);
    }
    ASSERT_TRUE(t.wait_cq(t.a.send_cq(), kMessages)) << "seed " << seed;
    for (const Wc& wc : t.poll(t.a.send_cq()))
      ASSERT_EQ(wc.status, WcStatus::kSuccess) << "seed " << seed;
    // Each process's receives completed once each, in the order posted,
    // with the bytes of the messages that named its SRQ.
    for (ProcessDomain* dom : {&t.dom1, &t.dom2}) {
      const std::uint32_t srqn = dom == &t.dom1 ? kSrq1 : kSrq2;
      const auto r = t.poll(dom->srqs.at(srqn).cq);
      ASSERT_EQ(r.size(), static_cast<std::size_t>(kMessages / 2)) << "seed " << seed;
      for (std::size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].status, WcStatus::kSuccess);
        EXPECT_EQ(r[i].wr_id, 2 * i + (srqn == kSrq2 ? 1 : 0));
        EXPECT_EQ(r[i].byte_len, kLen);
      }
    }
    for (int m = 0; m < kMessages; ++m) {
      const auto& dst = (m % 2) ? dst2 : dst1;
      EXPECT_EQ(0, std::memcmp(dst.data() + m * kLen, src.data() + m * kLen, kLen))
          << "seed " << seed << " message " << m;
    }
    EXPECT_GT(t.net.stats().dropped, 0u) << "seed " << seed;
    EXPECT_GT(t.tgt1.counters().get(Counter::kRcvdPkts), 0u);
    EXPECT_GT(t.tgt2.counters().get(Counter::kRcvdPkts), 0u);
    EXPECT_GT(t.lock.taken, 0u);
  }
}

TEST(SimXrcShared, ARequestAheadWaitsForTheOtherProcessInsteadOfANak) {
  // Frames reordered on the wire (not lost): a Qp that receives one ahead
  // of the expected PSN keeps it until the PSNs before it ran, in either
  // process, and nobody NAKs.
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SharedTarget t(seed);
    test::FaultModel f;
    f.reorder = 0.2;
    t.net.set_faults(t.a, t.b, f);
    constexpr int kMessages = 40;
    constexpr std::uint32_t kLen = 200;  // one packet each
    std::vector<std::uint8_t> src(kMessages * kLen);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
    std::vector<std::uint8_t> dst1(src.size(), 0), dst2(src.size(), 0);
    const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
    const auto k1 = t.b.memory().reg(dst1.data(), dst1.size(), access::kLocalWrite);
    const auto k2 = t.mem2.reg(dst2.data(), dst2.size(), access::kLocalWrite);
    for (int m = 0; m < kMessages; ++m) {
      if (m % 2)
        t.post_recv(t.dom2, kSrq2, static_cast<std::uint64_t>(m), dst2.data() + m * kLen, kLen, k2);
      else
        t.post_recv(t.dom1, kSrq1, static_cast<std::uint64_t>(m), dst1.data() + m * kLen, kLen, k1);
    }
    for (int m = 0; m < kMessages; ++m)
      ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, static_cast<std::uint64_t>(m),
                                       (m % 2) ? kSrq2 : kSrq1, src.data() + m * kLen, kLen, lk)),
                0);
    ASSERT_TRUE(t.wait_cq(t.a.send_cq(), kMessages)) << "seed " << seed;
    for (const Wc& wc : t.poll(t.a.send_cq()))
      ASSERT_EQ(wc.status, WcStatus::kSuccess) << "seed " << seed;
    for (int m = 0; m < kMessages; ++m) {
      const auto& dst = (m % 2) ? dst2 : dst1;
      EXPECT_EQ(0, std::memcmp(dst.data() + m * kLen, src.data() + m * kLen, kLen))
          << "seed " << seed << " message " << m;
    }
    const auto waits = t.tgt1.counters().get(Counter::kXrcSharedWaits) +
                       t.tgt2.counters().get(Counter::kXrcSharedWaits);
    EXPECT_GT(waits, 0u) << "seed " << seed;
    EXPECT_EQ(t.tgt1.counters().get(Counter::kPacketSeqErr), 0u) << "seed " << seed;
    EXPECT_EQ(t.tgt2.counters().get(Counter::kPacketSeqErr), 0u) << "seed " << seed;
    EXPECT_EQ(t.ini.counters().get(Counter::kCompleterRetryErr), 0u) << "seed " << seed;
  }
}

TEST(SimXrcShared, ARequestWhoseForerunnerIsLostIsNakedAfterTheWait) {
  SharedTarget t;
  std::vector<std::uint8_t> src(2 * 64, 5), dst(64, 0);
  const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
  const auto dk = t.mem2.reg(dst.data(), dst.size(), access::kLocalWrite);
  std::vector<std::uint8_t> dst1(64, 0);
  const auto k1 = t.b.memory().reg(dst1.data(), dst1.size(), access::kLocalWrite);
  t.post_recv(t.dom1, kSrq1, 1, dst1.data(), 64, k1);
  t.post_recv(t.dom2, kSrq2, 2, dst.data(), 64, dk);
  // The first request (to the first process) is lost: the second waits
  // kSharedWaitNs for it, then NAKs, and the initiator goes back to it
  // well before its own timeout.
  test::FaultModel f;
  f.drop = 1;  // everything is lost...
  t.net.set_faults(t.a, t.b, f);
  ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, 1, kSrq1, src.data(), 64, lk)), 0);
  ASSERT_TRUE(t.net.run_until([&] { return t.net.stats().dropped == 1; }, t.net.now() + 1'000'000));
  t.net.set_faults(t.a, t.b, test::FaultModel{});  // ...until the first is gone
  ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, 2, kSrq2, src.data() + 64, 64, lk)), 0);
  ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 2));
  for (const Wc& wc : t.poll(t.a.send_cq())) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(t.tgt2.counters().get(Counter::kXrcSharedWaits), 1u);
  EXPECT_EQ(t.tgt2.counters().get(Counter::kPacketSeqErr), 1u);
  EXPECT_EQ(t.ini.counters().get(Counter::kLocalAckTimeoutErr), 0u)
      << "the NAK, not the timeout, brought the lost request back";
  EXPECT_EQ(t.poll(t.dom1.srqs.at(kSrq1).cq).size(), 1u);
  EXPECT_EQ(t.poll(t.dom2.srqs.at(kSrq2).cq).size(), 1u);
}

TEST(SimXrcShared, ReadsAndAtomicsAnswerFromTheProcessThatHasTheMemory) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SharedTarget t(seed);
    test::FaultModel f;
    f.drop = 0.05;
    t.net.set_faults_all(f);
    constexpr std::uint32_t kLen = 5000;
    std::vector<std::uint8_t> src(kLen), target2(kLen, 0), back1(kLen, 0), back2(kLen, 0);
    std::iota(src.begin(), src.end(), 11);
    std::vector<std::uint8_t> target1(src.rbegin(), src.rend());
    alignas(8) std::uint64_t counter1 = 100, counter2 = 200, orig1 = 0, orig2 = 0;
    const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
    const auto b1 = t.a.memory().reg(back1.data(), kLen, access::kLocalWrite);
    const auto b2 = t.a.memory().reg(back2.data(), kLen, access::kLocalWrite);
    const auto o1 = t.a.memory().reg(&orig1, 8, access::kLocalWrite);
    const auto o2 = t.a.memory().reg(&orig2, 8, access::kLocalWrite);
    // The first process's READ target and counter; the second's WRITE
    // target and counter, each in that process's memory.
    const auto r1 = t.b.memory().reg(target1.data(), kLen, access::kRemoteRead);
    const auto c1 = t.b.memory().reg(&counter1, 8, access::kRemoteAtomic);
    const auto r2 = t.mem2.reg(target2.data(), kLen, access::kRemoteWrite | access::kRemoteRead);
    const auto c2 = t.mem2.reg(&counter2, 8, access::kRemoteAtomic);
    SendWr w = xrc_wr(WrOpcode::kRdmaWrite, 1, kSrq2, src.data(), kLen, lk);
    w.remote_addr = reinterpret_cast<std::uint64_t>(target2.data());
    w.rkey = r2;
    SendWr rd1 = xrc_wr(WrOpcode::kRdmaRead, 2, kSrq1, back1.data(), kLen, b1);
    rd1.remote_addr = reinterpret_cast<std::uint64_t>(target1.data());
    rd1.rkey = r1;
    SendWr rd2 = xrc_wr(WrOpcode::kRdmaRead, 3, kSrq2, back2.data(), kLen, b2);
    rd2.remote_addr = reinterpret_cast<std::uint64_t>(target2.data());
    rd2.rkey = r2;
    SendWr fa1 = xrc_wr(WrOpcode::kAtomicFetchAndAdd, 4, kSrq1, &orig1, 8, o1);
    fa1.remote_addr = reinterpret_cast<std::uint64_t>(&counter1);
    fa1.rkey = c1;
    fa1.compare_add = 5;
    SendWr cs2 = xrc_wr(WrOpcode::kAtomicCmpAndSwp, 5, kSrq2, &orig2, 8, o2);
    cs2.remote_addr = reinterpret_cast<std::uint64_t>(&counter2);
    cs2.rkey = c2;
    cs2.compare_add = 200;
    cs2.swap = 7;
    for (const SendWr* wr : {&w, &rd1, &rd2, &fa1, &cs2}) ASSERT_EQ(t.ini.post_send(*wr), 0);
    ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 5)) << "seed " << seed;
    for (const Wc& wc : t.poll(t.a.send_cq()))
      EXPECT_EQ(wc.status, WcStatus::kSuccess) << "seed " << seed << " wr " << wc.wr_id;
    EXPECT_EQ(target2, src) << "seed " << seed;
    EXPECT_EQ(back1, target1) << "seed " << seed;
    EXPECT_EQ(back2, src) << "seed " << seed;
    // Executed once each, retries and duplicates included.
    EXPECT_EQ(orig1, 100u);
    EXPECT_EQ(counter1, 105u);
    EXPECT_EQ(orig2, 200u);
    EXPECT_EQ(counter2, 7u);
  }
}

TEST(SimXrcShared, AnErrorInOneProcessEndsTheQpInBoth) {
  SharedTarget t;
  std::vector<std::uint8_t> src(64, 3), dst(64, 0);
  const auto lk = t.a.memory().reg(src.data(), src.size(), 0);
  const auto dk = t.mem2.reg(dst.data(), dst.size(), access::kLocalWrite);
  t.post_recv(t.dom2, kSrq2, 1, dst.data(), 64, dk);
  ASSERT_EQ(t.ini.post_send(xrc_wr(WrOpcode::kSend, 1, kSrq2, src.data(), 64, lk)), 0);
  ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 1));
  ASSERT_EQ(t.poll(t.a.send_cq())[0].status, WcStatus::kSuccess);
  ASSERT_EQ(t.tgt2.state(), QpState::kRts);
  // A WRITE through the second process's SRQ with a key its memory does
  // not know: its Qp NAKs it and ends the QP, and the first process's Qp
  // finds it ended.
  SendWr w = xrc_wr(WrOpcode::kRdmaWrite, 2, kSrq2, src.data(), 64, lk);
  w.remote_addr = 0x1000;
  w.rkey = 0xDEAD;
  ASSERT_EQ(t.ini.post_send(w), 0);
  ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 1));
  EXPECT_EQ(t.poll(t.a.send_cq())[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(t.tgt2.state(), QpState::kErr);
  EXPECT_EQ(t.block.state, QpState::kErr);
  t.net.run_for(1'000'000);
  EXPECT_EQ(t.tgt1.state(), QpState::kErr);

  // The first process takes the QP back through RESET to RTS, to a new
  // initiator, in one go: the second finds it reset and serves again,
  // whatever states it did not see.
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  ASSERT_EQ(t.tgt1.modify(reset, attr_mask::kState, t.net.now()), 0);
  Qp& ini2 = t.a.create_qp(QpType::kXrcIni);
  t.net.connect(ini2, t.a, t.tgt1, t.b, test::rc_params());
  t.post_recv(t.dom2, kSrq2, 3, dst.data(), 64, dk);
  ASSERT_EQ(ini2.post_send(xrc_wr(WrOpcode::kSend, 3, kSrq2, src.data(), 64, lk)), 0);
  ASSERT_TRUE(t.wait_cq(t.a.send_cq(), 1));
  EXPECT_EQ(t.poll(t.a.send_cq())[0].status, WcStatus::kSuccess);
  EXPECT_EQ(t.tgt2.state(), QpState::kRts);
  EXPECT_EQ(t.tgt2.attr().dest_qp_num, ini2.qpn());
}

}  // namespace
}  // namespace uroce::transport
