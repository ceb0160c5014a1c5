/* SPDX-License-Identifier: BSD-3-Clause */
// The completion queue ring (cq.cc).

#include "transport/cq.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace uroce::transport {
namespace {

TEST(Cq, RemovingAQpsCompletionsKeepsTheOthersInOrder) {
  Cq cq(8);
  auto push = [&](std::uint64_t id, std::uint32_t qpn) {
    Wc wc;
    wc.wr_id = id;
    wc.qp_num = qpn;
    ASSERT_TRUE(cq.push(wc));
  };
  // Across the ring's end: four taken, then seven waiting in slots 4..10.
  for (std::uint64_t i = 0; i < 4; ++i) push(i, 1);
  Wc out[8];
  ASSERT_EQ(cq.poll(out, 4), 4u);
  for (std::uint64_t i = 4; i < 11; ++i) push(i, i % 2 ? 2 : 1);
  EXPECT_EQ(cq.remove_qp(2), 3u);
  EXPECT_EQ(cq.remove_qp(7), 0u);
  ASSERT_EQ(cq.size(), 4u);
  ASSERT_EQ(cq.poll(out, 8), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].wr_id, 4 + 2 * i);
    EXPECT_EQ(out[i].qp_num, 1u);
  }
  push(99, 2);  // the ring goes on from where it was left
  ASSERT_EQ(cq.poll(out, 8), 1u);
  EXPECT_EQ(out[0].wr_id, 99u);
}

TEST(Cq, ResizeKeepsWhatWaitsAndRefusesToDropAny) {
  Cq cq(4);
  Wc wc, out[8];
  for (std::uint64_t i = 0; i < 3; ++i) {
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  ASSERT_EQ(cq.poll(out, 2), 2u);
  for (std::uint64_t i = 3; i < 6; ++i) {  // wraps around the 4 slots
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  EXPECT_FALSE(cq.resize(3)) << "four wait";
  EXPECT_EQ(cq.depth(), 4u);
  ASSERT_TRUE(cq.resize(6));
  EXPECT_EQ(cq.depth(), 6u);
  for (std::uint64_t i = 6; i < 8; ++i) {
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  ASSERT_EQ(cq.poll(out, 8), 6u);
  for (std::uint64_t i = 0; i < 6; ++i) EXPECT_EQ(out[i].wr_id, 2 + i);
  ASSERT_TRUE(cq.resize(1));
  EXPECT_FALSE(cq.resize(0));
}

// The program arms the CQ and polls it while the engine pushes a
// completion: either the poll finds the completion or the push notifies.
// A lost wakeup (neither) leaves a program that waits on its completion
// channel waiting forever (ibv_*_pingpong -e hung so). Both threads start
// each round together, to make the two sides overlap as often as they can.
TEST(Cq, AnArmRacingAPushEitherSeesItOrIsNotified) {
  struct Counter : CqNotifier {
    std::atomic<int> n{0};
    void notify(Cq&) override { n.fetch_add(1, std::memory_order_relaxed); }
  } notified;
  Cq cq(4);
  cq.set_notifier(&notified);
  constexpr int kRounds = 200000;
  std::atomic<int> round{-1};   // the round both are to run
  std::atomic<int> pushed{-1};  // the last round the engine pushed in
  std::thread engine([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (round.load(std::memory_order_acquire) != r) std::this_thread::yield();
      Wc wc;
      wc.wr_id = static_cast<std::uint64_t>(r);
      cq.push(wc);
      pushed.store(r, std::memory_order_release);
    }
  });
  int lost = 0;
  Wc out[4];
  for (int r = 0; r < kRounds; ++r) {
    const int before = notified.n.load(std::memory_order_relaxed);
    round.store(r, std::memory_order_release);
    cq.arm(false);
    const std::uint32_t seen = cq.poll(out, 4);
    while (pushed.load(std::memory_order_acquire) != r) std::this_thread::yield();
    const bool woken = notified.n.load(std::memory_order_relaxed) != before;
    if (seen == 0 && !woken) ++lost;
    // Leave the CQ empty and unarmed for the next round.
    cq.poll(out, 4);
    if (!woken) {
      Wc spare;
      cq.push(spare);  // takes the arm left over
      cq.poll(out, 4);
    }
  }
  engine.join();
  EXPECT_EQ(lost, 0) << "rounds where the completion was neither seen nor notified";
}

}  // namespace
}  // namespace uroce::transport
