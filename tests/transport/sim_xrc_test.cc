/* SPDX-License-Identifier: BSD-3-Clause */
// XRC over the simulated link: an initiator QP sends to the XRC SRQs of a
// target QP's domain, each message to the SRQ its XRCETH names, with the
// SRQ's memory and CQ; a request naming no SRQ of the domain is NAKed.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::SimHost;
using test::SimNet;
using test::xrc_wr;

using test::rc_params;

// A domain of the test's: its SRQs by number, and numbers that belong to
// another domain.
class Domain : public XrcDomain {
 public:
  struct Srq {
    RecvQueue rq{64, 1};
    Cq cq{256};
  };
  Lookup find_srq(std::uint32_t srqn, XrcSrq* out) override {
    if (foreign.count(srqn)) return Lookup::kOtherDomain;
    const auto it = srqs.find(srqn);
    if (it == srqs.end()) return Lookup::kNoSuchSrq;
    *out = {&it->second.rq, &it->second.cq, memory};
    return Lookup::kFound;
  }
  std::map<std::uint32_t, Srq> srqs;
  std::map<std::uint32_t, bool> foreign;
  MemoryAccess* memory = nullptr;
};

constexpr std::uint32_t kSrqA = 0x51A0A1;
constexpr std::uint32_t kSrqB = 0x0B0B02;

struct XrcPair {
  explicit XrcPair(std::uint64_t seed = 1) : net(seed) {
    domain.memory = &b.memory();
    domain.srqs[kSrqA];
    domain.srqs[kSrqB];
    net.connect(ini, a, tgt, b, rc_params());
  }
  SimNet net;
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Domain domain;
  Qp& ini = a.create_qp(QpType::kXrcIni);
  Qp& tgt = b.create_qp(QpType::kXrcTgt, 256, &domain);

  std::vector<Wc> poll(Cq& cq) {
    std::vector<Wc> out(256);
    out.resize(cq.poll(out.data(), 256));
    return out;
  }
  bool wait_cq(Cq& cq, std::uint32_t n) {
    return net.run_until([&] { return cq.size() >= n; }, net.now() + 5'000'000'000);
  }
  void post_srq_recv(std::uint32_t srqn, std::uint64_t id, void* buf, std::uint32_t len,
                     std::uint32_t key) {
    RecvWr r;
    r.wr_id = id;
    r.num_sge = 1;
    r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf), len, key};
    ASSERT_EQ(domain.srqs.at(srqn).rq.post(r), 0);
  }
};

TEST(SimXrc, EachSendLandsInTheSrqItsXrcethNames) {
  XrcPair p;
  std::vector<std::uint8_t> src(3000), to_a(4096, 0), to_b(4096, 0);
  std::iota(src.begin(), src.end(), 7);
  const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
  const auto ka = p.b.memory().reg(to_a.data(), to_a.size(), access::kLocalWrite);
  const auto kb = p.b.memory().reg(to_b.data(), to_b.size(), access::kLocalWrite);
  p.post_srq_recv(kSrqA, 100, to_a.data(), 4096, ka);
  p.post_srq_recv(kSrqB, 200, to_b.data(), 4096, kb);
  // Three packets to B's SRQ, then one to A's: the target QP moves from
  // SRQ to SRQ per message.
  ASSERT_EQ(p.ini.post_send(xrc_wr(WrOpcode::kSend, 1, kSrqB, src.data(), 3000, lk)), 0);
  ASSERT_EQ(p.ini.post_send(xrc_wr(WrOpcode::kSendWithImm, 2, kSrqA, src.data(), 100, lk)), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 2));
  const auto s = p.poll(p.a.send_cq());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].status, WcStatus::kSuccess);
  EXPECT_EQ(s[1].status, WcStatus::kSuccess);

  const auto rb = p.poll(p.domain.srqs.at(kSrqB).cq);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].wr_id, 200u);
  EXPECT_EQ(rb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rb[0].byte_len, 3000u);
  EXPECT_EQ(rb[0].qp_num, p.tgt.qpn());
  EXPECT_EQ(0, std::memcmp(to_b.data(), src.data(), 3000));
  const auto ra = p.poll(p.domain.srqs.at(kSrqA).cq);
  ASSERT_EQ(ra.size(), 1u);
  EXPECT_EQ(ra[0].wr_id, 100u);
  EXPECT_EQ(ra[0].byte_len, 100u);
  EXPECT_TRUE(ra[0].wc_flags & wc_flags::kWithImm);
  EXPECT_EQ(0, std::memcmp(to_a.data(), src.data(), 100));
  // Neither host CQ of the target's host saw anything: the SRQs' CQs did.
  EXPECT_EQ(p.b.recv_cq().size(), 0u);
  EXPECT_EQ(p.ini.counters().get(Counter::kSentPkts), 4u);
}

TEST(SimXrc, WriteReadAndAtomicReachTheSrqsMemory) {
  XrcPair p;
  std::vector<std::uint8_t> src(2500), target(4096, 0), back(2500, 0);
  std::iota(src.begin(), src.end(), 3);
  alignas(8) std::uint64_t counter = 40, orig = 0;
  const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
  const auto bk = p.a.memory().reg(back.data(), back.size(), access::kLocalWrite);
  const auto ok = p.a.memory().reg(&orig, 8, access::kLocalWrite);
  const auto rk =
      p.b.memory().reg(target.data(), target.size(), access::kRemoteWrite | access::kRemoteRead);
  const auto ck = p.b.memory().reg(&counter, 8, access::kRemoteAtomic);
  SendWr w = xrc_wr(WrOpcode::kRdmaWrite, 1, kSrqA, src.data(), 2500, lk);
  w.remote_addr = reinterpret_cast<std::uint64_t>(target.data());
  w.rkey = rk;
  SendWr r = xrc_wr(WrOpcode::kRdmaRead, 2, kSrqB, back.data(), 2500, bk);
  r.remote_addr = w.remote_addr;
  r.rkey = rk;
  SendWr f = xrc_wr(WrOpcode::kAtomicFetchAndAdd, 3, kSrqA, &orig, 8, ok);
  f.remote_addr = reinterpret_cast<std::uint64_t>(&counter);
  f.rkey = ck;
  f.compare_add = 2;
  ASSERT_EQ(p.ini.post_send(w), 0);
  ASSERT_EQ(p.ini.post_send(r), 0);
  ASSERT_EQ(p.ini.post_send(f), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 3));
  for (const Wc& wc : p.poll(p.a.send_cq())) EXPECT_EQ(wc.status, WcStatus::kSuccess) << wc.wr_id;
  EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 2500));
  EXPECT_EQ(0, std::memcmp(back.data(), src.data(), 2500));
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(counter, 42u);
}

TEST(SimXrc, ASrqOfNoDomainIsAnInvalidRequest) {
  XrcPair p;
  std::vector<std::uint8_t> src(64, 1);
  const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
  ASSERT_EQ(p.ini.post_send(xrc_wr(WrOpcode::kSend, 9, 0x123456, src.data(), 64, lk)), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 1));
  const auto s = p.poll(p.a.send_cq());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(p.tgt.counters().get(Counter::kXrcSrqErr), 1u);
  EXPECT_EQ(p.tgt.state(), QpState::kErr);
}

TEST(SimXrc, AnotherDomainsSrqIsARemoteAccessError) {
  XrcPair p;
  p.domain.foreign[0x0F0F0F] = true;
  std::vector<std::uint8_t> src(64, 1), dst(64, 0);
  const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
  const auto rk = p.b.memory().reg(dst.data(), dst.size(), access::kRemoteWrite);
  SendWr w = xrc_wr(WrOpcode::kRdmaWrite, 4, 0x0F0F0F, src.data(), 64, lk);
  w.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  w.rkey = rk;
  ASSERT_EQ(p.ini.post_send(w), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 1));
  const auto s = p.poll(p.a.send_cq());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(dst, std::vector<std::uint8_t>(64, 0)) << "nothing written through a foreign SRQ";
  EXPECT_EQ(p.tgt.counters().get(Counter::kXrcSrqErr), 1u);
}

TEST(SimXrc, LossyLinkDeliversEveryMessageOnceInOrderToItsSrq) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    XrcPair p(seed);
    test::FaultModel f;
    f.drop = 0.05;
    p.net.set_faults_all(f);
    constexpr int kMessages = 60;
    constexpr std::uint32_t kLen = 2500;
    std::vector<std::uint8_t> src(kMessages * kLen);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 31 + 5);
    std::vector<std::uint8_t> dst(kMessages * kLen, 0);
    const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
    const auto dk = p.b.memory().reg(dst.data(), dst.size(), access::kLocalWrite);
    for (int m = 0; m < kMessages; ++m) {
      const std::uint32_t srqn = (m % 2) ? kSrqB : kSrqA;
      p.post_srq_recv(srqn, static_cast<std::uint64_t>(m), dst.data() + m * kLen, kLen, dk);
    }
    for (int m = 0; m < kMessages; ++m) {
      const std::uint32_t srqn = (m % 2) ? kSrqB : kSrqA;
      ASSERT_EQ(p.ini.post_send(xrc_wr(WrOpcode::kSend, static_cast<std::uint64_t>(m), srqn,
                                       src.data() + m * kLen, kLen, lk)),
                0);
      if (m % 16 == 15) p.net.run_for(200'000);
    }
    ASSERT_TRUE(p.wait_cq(p.a.send_cq(), kMessages)) << "seed " << seed;
    for (const Wc& wc : p.poll(p.a.send_cq()))
      ASSERT_EQ(wc.status, WcStatus::kSuccess) << "seed " << seed;
    // Each SRQ's receives completed in the order posted, exactly once.
    for (const std::uint32_t srqn : {kSrqA, kSrqB}) {
      const auto r = p.poll(p.domain.srqs.at(srqn).cq);
      ASSERT_EQ(r.size(), static_cast<std::size_t>(kMessages / 2)) << "seed " << seed;
      for (std::size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].status, WcStatus::kSuccess);
        EXPECT_EQ(r[i].wr_id, 2 * i + (srqn == kSrqB ? 1 : 0));
        EXPECT_EQ(r[i].byte_len, kLen);
      }
    }
    EXPECT_EQ(dst, src) << "seed " << seed;
    EXPECT_GT(p.net.stats().dropped, 0u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace uroce::transport
