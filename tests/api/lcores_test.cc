/* SPDX-License-Identifier: BSD-3-Clause */
// A device whose engine runs on two lcores (DeviceConfig::lcores, the
// engine's "Several lcores" in docs/engine.md), over two devices joined in
// memory by a pipe of two queues: a frame arrives on the queue of the
// sender's lcore, so many are for a QP of the other lcore and are handed
// to it. The QPs of both lcores share CQs and an SRQ, and atomics of both
// lcores' QPs hit one word.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "support/pipe_driver.h"
#include "uroce/uroce.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kLcores = 2;
constexpr std::size_t kPerLcore = 3;  // QPs of each lcore, on each side
constexpr std::size_t kSlot = 1 << 16;

struct Side {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<SharedReceiveQueue> srq;
  std::vector<std::uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;
  std::vector<std::unique_ptr<QueuePair>> qps;  ///< kPerLcore of each lcore, by lcore
  std::uint64_t addr(std::size_t off) const {
    return reinterpret_cast<std::uint64_t>(buf.data() + off);
  }
};

std::uint64_t counter(const std::vector<Counter>& cs, const std::string& name) {
  for (const auto& [n, v] : cs)
    if (n == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

class Lcores : public ::testing::Test {
 protected:
  void open(Side& s, const std::string& ip, const Config& config, bool srq) {
    test::register_pipe_driver();
    DeviceConfig dc;
    dc.name = "uroce-lc-" + ip;
    dc.port = std::string("pipe:lcores-") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dc.ip = {IpPrefix{ip, 24}};
    dc.lcores = kLcores;
    std::string err;
    s.dev = Device::open(dc, config, &err);
    ASSERT_TRUE(s.dev) << err;
    s.pd = s.dev->alloc_pd();
    s.cq = s.dev->create_cq(4096);
    ASSERT_TRUE(s.cq);
    if (srq) {
      s.srq = s.pd->create_srq(1024, 1);
      ASSERT_TRUE(s.srq);
    }
    s.buf.assign(kSlot * kLcores * kPerLcore * 2, 0);
    s.mr = s.pd->reg_mr(s.buf.data(), s.buf.size(), access::kAll);
    ASSERT_TRUE(s.mr);
    // QPNs are random and each falls to lcore qpn % 2: make QPs until
    // each lcore has its share, and keep those.
    std::vector<std::unique_ptr<QueuePair>> by_lcore[kLcores];
    for (int tries = 0; tries < 200; ++tries) {
      int err2 = 0;
      auto qp = s.pd->create_qp(
          {.send_cq = s.cq.get(), .recv_cq = s.cq.get(), .srq = s.srq.get(), .max_send_wr = 256},
          &err2);
      ASSERT_TRUE(qp) << err2;
      auto& mine = by_lcore[qp->qpn() % kLcores];
      if (mine.size() < kPerLcore) mine.push_back(std::move(qp));
      if (by_lcore[0].size() == kPerLcore && by_lcore[1].size() == kPerLcore) break;
    }
    for (auto& l : by_lcore) {
      ASSERT_EQ(l.size(), kPerLcore);
      for (auto& qp : l) s.qps.push_back(std::move(qp));
    }
  }

  // What a side holds, the device last.
  static void close(Side& s) {
    s.qps.clear();
    s.mr.reset();
    s.srq.reset();
    s.cq.reset();
    s.pd.reset();
    s.dev.reset();
  }

  void SetUp() override { open_both(Config{}, false); }

  void open_both(const Config& config, bool srq) {
    close(a_);
    close(b_);
    open(a_, "10.78.0.1", config, srq);
    open(b_, "10.78.0.2", config, srq);
    // A's QPs of lcore 0 meet B's of lcore 1 and the other way round, so
    // that frames arrive on the queue of the other lcore than their QP's.
    const auto gid = [](Side& s) { return s.dev->port().gids.at(1); };
    const std::size_t n = a_.qps.size();
    for (std::size_t i = 0; i < n; ++i) {
      QueuePair& qa = *a_.qps[i];
      QueuePair& qb = *b_.qps[n - 1 - i];
      ASSERT_EQ(qa.connect({gid(b_), qb.qpn(), qb.psn()}), 0);
      ASSERT_EQ(qb.connect({gid(a_), qa.qpn(), qa.psn()}), 0);
    }
  }
  QueuePair& peer_of(std::size_t i) { return *b_.qps[b_.qps.size() - 1 - i]; }

  // Waits for `n` successful completions on s's CQ; returns them.
  static std::vector<Completion> wait_all(Side& s, std::size_t n) {
    std::vector<Completion> got;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
      if (auto c = s.cq->wait(100ms)) {
        EXPECT_TRUE(c->ok()) << to_string(c->status) << " wr_id " << c->wr_id;
        got.push_back(*c);
      }
    }
    EXPECT_EQ(got.size(), n) << "completions within 20 s";
    return got;
  }

  // Every QP of A: a WRITE of its own pattern into its slot of B, a READ
  // of it back, and fetch-and-adds on one word of B that every QP shares.
  void write_read_and_add(std::size_t rounds) {
    const std::size_t n = a_.qps.size();
    std::vector<Sge> sges(n * 3);
    for (std::size_t r = 0; r < rounds; ++r) {
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < kSlot; ++k)
          a_.buf[i * kSlot + k] = static_cast<std::uint8_t>(k * 7 + i * 31 + r);
        sges[i * 3] = {a_.addr(i * kSlot), kSlot, a_.mr->lkey()};
        ASSERT_EQ(a_.qps[i]->post_send({.wr_id = i,
                                        .opcode = Opcode::kRdmaWrite,
                                        .sges = {&sges[i * 3], 1},
                                        .remote_addr = b_.addr(i * kSlot),
                                        .rkey = b_.mr->rkey()}),
                  0);
        const std::size_t back = (n + i) * kSlot;
        sges[i * 3 + 1] = {a_.addr(back), kSlot, a_.mr->lkey()};
        ASSERT_EQ(a_.qps[i]->post_send({.wr_id = 100 + i,
                                        .opcode = Opcode::kRdmaRead,
                                        .sges = {&sges[i * 3 + 1], 1},
                                        .remote_addr = b_.addr(i * kSlot),
                                        .rkey = b_.mr->rkey()}),
                  0);
        // The word after the last slot, 8-byte aligned; the old value
        // lands in the QP's slot past what the READ fills.
        sges[i * 3 + 2] = {a_.addr(back + kSlot - 8), 8, a_.mr->lkey()};
        ASSERT_EQ(a_.qps[i]->post_send({.wr_id = 200 + i,
                                        .opcode = Opcode::kAtomicFetchAndAdd,
                                        .sges = {&sges[i * 3 + 2], 1},
                                        .remote_addr = b_.addr(n * 2 * kSlot - 8),
                                        .rkey = b_.mr->rkey(),
                                        .compare_add = 1}),
                  0);
      }
      wait_all(a_, 3 * n);
      for (std::size_t i = 0; i < n; ++i) {
        // The READ's copy, but for its last 8 bytes (the atomic's result).
        EXPECT_EQ(
            std::memcmp(a_.buf.data() + i * kSlot, a_.buf.data() + (n + i) * kSlot, kSlot - 8), 0)
            << "QP " << i << " round " << r;
      }
    }
  }

  void TearDown() override {
    close(a_);
    close(b_);
  }

  Side a_, b_;
};

TEST_F(Lcores, QpsOfBothLcoresMoveEveryByteAndAtomicsStayAtomic) {
  const std::size_t n = a_.qps.size();
  write_read_and_add(2);
  b_.dev->poll();  // orders what A wrote before our reads
  std::uint64_t sum = 0;
  std::memcpy(&sum, b_.buf.data() + n * 2 * kSlot - 8, 8);
  EXPECT_EQ(sum, 2 * n) << "every fetch-and-add, once";

  // SENDs, each QP's own messages into its own receives.
  std::vector<Sge> rs(n), ss(n);
  for (std::size_t i = 0; i < n; ++i) {
    rs[i] = {b_.addr(i * kSlot), 4096, b_.mr->lkey()};
    ASSERT_EQ(peer_of(i).post_recv({.wr_id = 300 + i, .sges = {&rs[i], 1}}), 0);
    std::memset(a_.buf.data() + i * kSlot, static_cast<int>(0x40 + i), 4096);
    ss[i] = {a_.addr(i * kSlot), 4096, a_.mr->lkey()};
    ASSERT_EQ(a_.qps[i]->post_send({.wr_id = 400 + i, .sges = {&ss[i], 1}}), 0);
  }
  wait_all(a_, n);
  std::set<std::uint64_t> ids;
  for (const Completion& c : wait_all(b_, n)) {
    EXPECT_EQ(c.opcode, WcOpcode::kRecv);
    EXPECT_EQ(c.byte_len, 4096u);
    ids.insert(c.wr_id);
  }
  EXPECT_EQ(ids.size(), n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(b_.buf[i * kSlot + 4095], 0x40 + i) << "QP " << i;

  // Both lcores of each side did work, and frames changed lcore.
  for (Side* s : {&a_, &b_}) {
    const auto cs = s->dev->counters();
    EXPECT_GT(counter(cs, "lcore0_rx_roce"), 0u);
    EXPECT_GT(counter(cs, "lcore1_rx_roce"), 0u);
    EXPECT_GT(counter(cs, "lcore0_tx_frames"), 0u);
    EXPECT_GT(counter(cs, "lcore1_tx_frames"), 0u);
    EXPECT_GT(counter(cs, "rx_handed_off"), 0u);
    EXPECT_EQ(counter(cs, "rx_handed_off"), counter(cs, "rx_handed_in"));
    EXPECT_EQ(counter(cs, "rx_handoff_dropped"), 0u);
    EXPECT_EQ(counter(cs, "rx_roce"),
              counter(cs, "lcore0_rx_roce") + counter(cs, "lcore1_rx_roce"));
    EXPECT_EQ(counter(cs, "rx_unknown_qpn"), 0u);
  }
}

TEST_F(Lcores, QpsOfBothLcoresShareOneSrq) {
  open_both(Config{}, true);
  const std::size_t n = a_.qps.size();
  constexpr std::size_t kEach = 40;
  std::vector<Sge> rs(n * kEach);
  for (std::size_t k = 0; k < n * kEach; ++k) {
    rs[k] = {b_.addr(k * 256), 256, b_.mr->lkey()};
    ASSERT_EQ(b_.srq->post_recv({.wr_id = k, .sges = {&rs[k], 1}}), 0);
  }
  std::vector<Sge> ss(n * kEach);
  for (std::size_t m = 0; m < kEach; ++m) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = i * kEach + m;
      std::uint8_t* p = a_.buf.data() + k * 256;
      p[0] = static_cast<std::uint8_t>(i);
      p[1] = static_cast<std::uint8_t>(m);
      ss[k] = {a_.addr(k * 256), 256, a_.mr->lkey()};
      ASSERT_EQ(a_.qps[i]->post_send({.wr_id = k, .sges = {&ss[k], 1}}), 0);
    }
  }
  wait_all(a_, n * kEach);
  // Each receive WR taken once, each message landed once, every QP's in
  // its order.
  std::set<std::uint64_t> taken;
  std::vector<int> next(n, 0);
  for (const Completion& c : wait_all(b_, n * kEach)) {
    EXPECT_TRUE(taken.insert(c.wr_id).second) << "receive " << c.wr_id << " twice";
    const std::uint8_t* p = b_.buf.data() + c.wr_id * 256;
    ASSERT_LT(p[0], n);
    EXPECT_EQ(p[1], next[p[0]]++) << "QP " << int{p[0]};
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(next[i], static_cast<int>(kEach));
}

TEST_F(Lcores, LossIsRecoveredWhicheverLcoreTheFrameCameIn) {
  Config lossy;
  lossy.fault.rx_drop = 0.02;
  lossy.fault.tx_duplicate = 0.01;
  lossy.fault.seed = 7;
  open_both(lossy, false);
  write_read_and_add(2);
  b_.dev->poll();
  std::uint64_t sum = 0;
  std::memcpy(&sum, b_.buf.data() + a_.qps.size() * 2 * kSlot - 8, 8);
  EXPECT_EQ(sum, 2 * a_.qps.size()) << "every fetch-and-add, once";
  const auto cs = a_.dev->counters();
  EXPECT_GT(counter(cs, "fault_dropped"), 0u) << "the test lost nothing";
}

TEST_F(Lcores, QpsOfOneDeviceOnBothLcoresTalkToEachOther) {
  // Frames to the device itself never reach the port: each is received
  // again, on the sender's lcore, and handed as a copy to the other.
  std::unique_ptr<QueuePair> on[kLcores];  // a new QP of each lcore
  for (int tries = 0; tries < 100 && !(on[0] && on[1]); ++tries) {
    auto qp = a_.pd->create_qp({.send_cq = a_.cq.get(), .recv_cq = a_.cq.get()});
    ASSERT_TRUE(qp);
    if (!on[qp->qpn() % kLcores]) on[qp->qpn() % kLcores] = std::move(qp);
  }
  ASSERT_TRUE(on[0] && on[1]);
  QueuePair& x = *on[0];
  QueuePair& y = *on[1];
  const Gid self = a_.dev->port().gids.at(1);
  ASSERT_EQ(x.connect({self, y.qpn(), y.psn()}), 0);
  ASSERT_EQ(y.connect({self, x.qpn(), x.psn()}), 0);
  for (std::size_t k = 0; k < kSlot; ++k) a_.buf[k] = static_cast<std::uint8_t>(k * 13 + 1);
  Sge src{a_.addr(0), kSlot, a_.mr->lkey()};
  ASSERT_EQ(x.post_send({.wr_id = 1,
                         .opcode = Opcode::kRdmaWrite,
                         .sges = {&src, 1},
                         .remote_addr = a_.addr(kSlot),
                         .rkey = a_.mr->rkey()}),
            0);
  Sge rbuf{a_.addr(2 * kSlot), 4096, a_.mr->lkey()};
  ASSERT_EQ(x.post_recv({.wr_id = 2, .sges = {&rbuf, 1}}), 0);
  Sge msg{a_.addr(0), 4096, a_.mr->lkey()};
  ASSERT_EQ(y.post_send({.wr_id = 3, .sges = {&msg, 1}}), 0);
  wait_all(a_, 3);
  a_.dev->poll();
  EXPECT_EQ(std::memcmp(a_.buf.data(), a_.buf.data() + kSlot, kSlot), 0);
  EXPECT_EQ(std::memcmp(a_.buf.data(), a_.buf.data() + 2 * kSlot, 4096), 0);
  const auto cs = a_.dev->counters();
  EXPECT_GT(counter(cs, "rx_handed_off"), 64u) << "both ways, each frame once";
  EXPECT_GT(counter(cs, "rx_loopback"), 64u);
}

TEST_F(Lcores, UdQpsAreLcoreZeros) {
  // UD QPs stay with QP 1 and multicast, on lcore 0 (engine/handoff.h).
  for (int i = 0; i < 8; ++i) {
    int err = 0;
    auto qp = a_.pd->create_qp(
        {.type = QpType::kUd, .send_cq = a_.cq.get(), .recv_cq = a_.cq.get()}, &err);
    ASSERT_TRUE(qp) << err;
    EXPECT_EQ(qp->qpn() % kLcores, 0u);
  }
}

}  // namespace
}  // namespace uroce
