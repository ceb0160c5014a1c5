/* SPDX-License-Identifier: BSD-3-Clause */
// The transport's cross-thread contract, checked under TSan in CI: the
// program posts and polls on its thread while the engine thread runs the
// QPs. Send and receive queues and CQs are single-producer rings between
// the two.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

TEST(Threads, CqDeliversEveryCompletionInOrderAcrossThreads) {
  Cq cq(64);
  constexpr std::uint64_t kCount = 200'000;
  std::thread producer([&] {
    Wc wc;
    for (std::uint64_t i = 0; i < kCount;) {
      wc.wr_id = i;
      if (cq.push(wc)) ++i;
    }
  });
  std::uint64_t next = 0;
  Wc out[16];
  while (next < kCount) {
    const std::uint32_t n = cq.poll(out, 16);
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i].wr_id, next++);
  }
  producer.join();
}

TEST(Threads, RecvQueueHandsEveryWrOverInOrder) {
  RecvQueue rq(32, 1);
  constexpr std::uint64_t kCount = 200'000;
  std::thread program([&] {
    RecvWr wr;
    for (std::uint64_t i = 0; i < kCount;) {
      wr.wr_id = i;
      if (rq.post(wr) == 0) ++i;
    }
  });
  RecvWr got;
  for (std::uint64_t next = 0; next < kCount;) {
    if (rq.take(got)) {
      ASSERT_EQ(got.wr_id, next++);
    }
  }
  program.join();
}

TEST(Threads, ProgramPostsWhileTheEngineThreadRunsTheQps) {
  test::SimNet net(11);
  test::SimHost& a = net.add_host();
  test::SimHost& b = net.add_host();
  Qp& qa = a.create_qp(QpType::kRc, 64);
  Qp& qb = b.create_qp(QpType::kRc, 64);
  QpAttr p;
  p.max_rd_atomic = p.max_dest_rd_atomic = 4;
  p.timeout = 14;
  p.retry_cnt = 7;
  p.rnr_retry = 7;
  p.min_rnr_timer = 1;
  net.connect(qa, a, qb, b, p);
  std::vector<std::uint8_t> src(512, 3), dst(512);
  const unsigned all = access::kLocalWrite | access::kRemoteWrite;
  const auto lk = a.memory().reg(src.data(), src.size(), all);
  const auto rk = b.memory().reg(dst.data(), dst.size(), all);

  constexpr int kMessages = 5000;
  std::atomic<bool> stop{false};
  std::thread engine([&] {
    while (!stop.load(std::memory_order_acquire)) net.run_for(10'000);
  });
  int sent = 0, completed = 0, received = 0;
  Wc wc[16];
  while (completed < kMessages || received < kMessages) {
    if (sent < kMessages) {
      RecvWr r;
      r.wr_id = sent;
      r.num_sge = 1;
      r.sg_list[0] = {reinterpret_cast<std::uint64_t>(dst.data()), 512, rk};
      SendWr s;
      s.wr_id = sent;
      s.send_flags = send_flags::kSignaled;
      s.num_sge = 1;
      s.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()), 100, lk};
      if (qb.post_recv(r) == 0) {
        while (qa.post_send(s) != 0) std::this_thread::yield();
        ++sent;
      }
    }
    for (std::uint32_t n = a.send_cq().poll(wc, 16), i = 0; i < n; ++i, ++completed) {
      ASSERT_EQ(wc[i].status, WcStatus::kSuccess);
      ASSERT_EQ(wc[i].wr_id, static_cast<std::uint64_t>(completed));
    }
    received += static_cast<int>(b.recv_cq().poll(wc, 16));
  }
  stop.store(true, std::memory_order_release);
  engine.join();
  EXPECT_EQ(received, kMessages);
}

}  // namespace
}  // namespace uroce::transport
