/* SPDX-License-Identifier: BSD-3-Clause */
// Every operation once over a clean simulated link: the basic contract
// before faults are added.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::SimHost;
using test::SimNet;

using test::rc_params;

struct Pair {
  SimNet net{1};
  SimHost& a = net.add_host();
  SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kRc);
  Qp& qb = b.create_qp(QpType::kRc);
  Pair() { net.connect(qa, a, qb, b, rc_params()); }

  std::vector<Wc> poll(Cq& cq) {
    std::vector<Wc> out(64);
    out.resize(cq.poll(out.data(), 64));
    return out;
  }
  bool wait_cq(Cq& cq, std::uint32_t n) {
    return net.run_until([&] { return cq.size() >= n; }, net.now() + 1'000'000'000);
  }
};

SendWr wr_of(WrOpcode op, std::uint64_t id, const void* buf, std::uint32_t len,
             std::uint32_t lkey) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.send_flags = send_flags::kSignaled;
  wr.num_sge = 1;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf), len, lkey};
  return wr;
}

TEST(SimSmoke, SendSegmentsReassemblesAndCompletesBothSides) {
  Pair p;
  std::vector<std::uint8_t> src(5000), dst(8192, 0);
  std::iota(src.begin(), src.end(), 0);
  const auto lk = p.a.memory().reg(src.data(), src.size(), 0);
  const auto rk = p.b.memory().reg(dst.data(), dst.size(), access::kLocalWrite);
  RecvWr rwr;
  rwr.wr_id = 77;
  rwr.num_sge = 1;
  rwr.sg_list[0] = {reinterpret_cast<std::uint64_t>(dst.data()), 8192, rk};
  ASSERT_EQ(p.qb.post_recv(rwr), 0);
  ASSERT_EQ(p.qa.post_send(wr_of(WrOpcode::kSendWithImm, 5, src.data(), 5000, lk)), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 1));
  ASSERT_TRUE(p.wait_cq(p.b.recv_cq(), 1));
  const auto s = p.poll(p.a.send_cq());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 5u);
  EXPECT_EQ(s[0].status, WcStatus::kSuccess);
  EXPECT_EQ(s[0].opcode, WcOpcode::kSend);
  const auto r = p.poll(p.b.recv_cq());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 77u);
  EXPECT_EQ(r[0].status, WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 5000u);
  EXPECT_TRUE(r[0].wc_flags & wc_flags::kWithImm);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), 5000));
  EXPECT_EQ(p.qa.counters().get(Counter::kSentPkts), 5u);  // 5 x 1024 MTU
}

TEST(SimSmoke, WriteReadAndAtomicsMoveTheRightBytes) {
  Pair p;
  std::vector<std::uint8_t> local(70000), remote(70000, 0);
  std::iota(local.begin(), local.end(), 1);
  alignas(8) std::uint64_t counter = 100, result = 0;
  const unsigned all =
      access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  const auto lk = p.a.memory().reg(local.data(), local.size(), all);
  const auto rk = p.b.memory().reg(remote.data(), remote.size(), all);
  const auto ck = p.b.memory().reg(&counter, 8, all);
  const auto resk = p.a.memory().reg(&result, 8, all);

  SendWr w = wr_of(WrOpcode::kRdmaWrite, 1, local.data(), 65536, lk);
  w.remote_addr = reinterpret_cast<std::uint64_t>(remote.data());
  w.rkey = rk;
  ASSERT_EQ(p.qa.post_send(w), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 1));
  EXPECT_EQ(0, std::memcmp(local.data(), remote.data(), 65536));

  std::fill(local.begin(), local.end(), 0);
  SendWr r = wr_of(WrOpcode::kRdmaRead, 2, local.data(), 65536, lk);
  r.remote_addr = reinterpret_cast<std::uint64_t>(remote.data());
  r.rkey = rk;
  ASSERT_EQ(p.qa.post_send(r), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 2));
  EXPECT_EQ(0, std::memcmp(local.data(), remote.data(), 65536));

  SendWr f = wr_of(WrOpcode::kAtomicFetchAndAdd, 3, &result, 8, resk);
  f.remote_addr = reinterpret_cast<std::uint64_t>(&counter);
  f.rkey = ck;
  f.compare_add = 5;
  ASSERT_EQ(p.qa.post_send(f), 0);
  SendWr c = wr_of(WrOpcode::kAtomicCmpAndSwp, 4, &result, 8, resk);
  c.remote_addr = reinterpret_cast<std::uint64_t>(&counter);
  c.rkey = ck;
  c.compare_add = 105;
  c.swap = 1;
  ASSERT_EQ(p.qa.post_send(c), 0);
  ASSERT_TRUE(p.wait_cq(p.a.send_cq(), 4));
  EXPECT_EQ(counter, 1u);
  EXPECT_EQ(result, 105u);  // CAS found what FETCH_ADD left
  const auto wcs = p.poll(p.a.send_cq());
  ASSERT_EQ(wcs.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
  }
}

}  // namespace
}  // namespace uroce::transport
