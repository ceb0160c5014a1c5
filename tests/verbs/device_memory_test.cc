/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/device_memory.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/limits.h"

namespace uroce::verbs {
namespace {

TEST(DeviceMemory, BytesCopiedInComeBackOutIntact) {
  DmPool pool(4096);
  int err = 0;
  auto dm = pool.alloc(1024, 0, &err);
  ASSERT_NE(dm, nullptr);
  std::vector<std::uint8_t> src(512 + 1);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 13 + 5);
  // From an unaligned host address to a word-aligned offset.
  ASSERT_EQ(dm->copy_to(256, src.data() + 1, 512), 0);
  std::vector<std::uint8_t> out(512 + 1, 0);
  ASSERT_EQ(dm->copy_from(out.data() + 1, 256, 512), 0);
  EXPECT_EQ(std::memcmp(out.data() + 1, src.data() + 1, 512), 0);
  // The words around the range were not touched, and start zeroed.
  std::uint32_t w = 1;
  ASSERT_EQ(dm->copy_from(&w, 252, 4), 0);
  EXPECT_EQ(w, 0u);
  ASSERT_EQ(dm->copy_from(&w, 768, 4), 0);
  EXPECT_EQ(w, 0u);
  // A copy of nothing is no error.
  EXPECT_EQ(dm->copy_to(1024, src.data(), 0), 0);
}

TEST(DeviceMemory, CopiesAreWholeWordsInsideTheAllocation) {
  DmPool pool(4096);
  int err = 0;
  auto dm = pool.alloc(100, 0, &err);
  ASSERT_NE(dm, nullptr);
  std::vector<std::uint8_t> buf(256, 0x5A);
  // Expect: unaligned offset or length is EINVAL, outside is EFAULT.
  EXPECT_EQ(dm->copy_to(3, buf.data(), 4), EINVAL);
  EXPECT_EQ(dm->copy_to(4, buf.data(), 3), EINVAL);
  EXPECT_EQ(dm->copy_from(buf.data(), 2, 8), EINVAL);
  EXPECT_EQ(dm->copy_to(104, buf.data(), 4), EFAULT);
  EXPECT_EQ(dm->copy_to(0, buf.data(), 104), EFAULT);
  EXPECT_EQ(dm->copy_from(buf.data(), 96, 8), EFAULT);
  EXPECT_EQ(dm->copy_from(buf.data(), ~std::uint64_t{3}, 8), EFAULT) << "offset + length wraps";
  EXPECT_EQ(dm->copy_to(96, buf.data(), 4), 0);
  EXPECT_EQ(dm->copy_from(buf.data(), 0, 100), 0);
}

TEST(DeviceMemory, ThePoolBoundsAllAllocationsTogether) {
  DmPool pool(1000);
  int err = 0;
  // Expect: beyond the capacity can never succeed (EINVAL); beyond what is
  // left is ENOMEM until something is freed.
  EXPECT_EQ(pool.alloc(1001, 0, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(pool.alloc(0, 0, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  auto a = pool.alloc(600, 0, &err);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool.alloc(401, 0, &err), nullptr);
  EXPECT_EQ(err, ENOMEM);
  auto b = pool.alloc(400, 0, &err);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.in_use(), 1000u);
  a.reset();
  EXPECT_EQ(pool.in_use(), 400u);
  EXPECT_NE(pool.alloc(600, 0, &err), nullptr);
}

TEST(DeviceMemory, AllocationsHonourTheRequestedAlignment) {
  DmPool pool(transport::kMaxDmSize);
  int err = 0;
  auto dm = pool.alloc(4, transport::kMaxDmLogAlign, &err);
  ASSERT_NE(dm, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(dm->data()) % (1u << transport::kMaxDmLogAlign), 0u);
  EXPECT_EQ(pool.alloc(4, transport::kMaxDmLogAlign + 1, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

}  // namespace
}  // namespace uroce::verbs
