/* SPDX-License-Identifier: BSD-3-Clause */
// The completion queue ring (cq.cc).

#include <gtest/gtest.h>

#include <vector>

#include "transport/cq.h"

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

}  // namespace
}  // namespace uroce::transport
