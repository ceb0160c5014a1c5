/* SPDX-License-Identifier: BSD-3-Clause */
// QPNs and PSNs from the secure generator (random.cc).

#include <gtest/gtest.h>

#include <set>

#include "transport/random.h"

namespace uroce::transport {
namespace {

TEST(SecureRandom, QpnsAndPsnsAreUnpredictableAndInRange) {
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t q = secure_random_qpn();
    EXPECT_GT(q, 1u);
    EXPECT_LT(q, 0xFFFFFFu);
    EXPECT_LE(secure_random_psn(), 0xFFFFFFu);
    seen.insert(q);
  }
  // 1000 draws from 2^24 collide with probability about 3 %; a generator
  // that counts or repeats would fail at once.
  EXPECT_GE(seen.size(), 998u);
}

}  // namespace
}  // namespace uroce::transport
