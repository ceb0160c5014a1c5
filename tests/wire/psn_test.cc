/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/psn.h"

#include <gtest/gtest.h>

namespace uroce::wire {
namespace {

TEST(Psn, WrapsAt24Bits) {
  EXPECT_EQ((Psn(0xFFFFFF) + 1).value(), 0u);
  EXPECT_EQ((Psn(0xFFFFFE) + 5).value(), 3u);
  EXPECT_EQ((Psn(2) - 5).value(), 0xFFFFFDu);
  EXPECT_EQ(Psn(0x1234567).value(), 0x234567u);
  Psn p(0xFFFFFF);
  ++p;
  EXPECT_EQ(p, Psn(0));
}

TEST(Psn, DistanceIsSignedAcrossTheWrap) {
  EXPECT_EQ(Psn(0) - Psn(0xFFFFFF), 1);
  EXPECT_EQ(Psn(0xFFFFFF) - Psn(0), -1);
  EXPECT_EQ(Psn(5) - Psn(0xFFFFFB), 10);
  EXPECT_TRUE(Psn(0).after(Psn(0xFFFFFF)));
  EXPECT_TRUE(Psn(0xFFFFFF).before(Psn(0)));
}

// IBA 9.7.1 as rxe implements it: relative to ePSN, [ePSN-2^23, ePSN-1] is duplicate and
// [ePSN+1, ePSN+2^23-1] out of sequence; a distance of exactly 2^23 counts
// as duplicate. Checked at every ePSN near the wrap.
TEST(Psn, ResponderRegionsAroundEveryEpsnNearTheWrap) {
  for (std::uint32_t e : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFFEu, 0xFFFFFFu}) {
    const Psn epsn(e);
    EXPECT_TRUE((epsn + 1).after(epsn));
    EXPECT_TRUE((epsn + 0x7FFFFF).after(epsn));
    EXPECT_TRUE((epsn + 0x800000).before(epsn)) << e;  // exactly 2^23: duplicate
    EXPECT_TRUE((epsn - 1).before(epsn));
    EXPECT_TRUE((epsn - 0x800000).before(epsn));
    EXPECT_FALSE(epsn.before(epsn));
    EXPECT_FALSE(epsn.after(epsn));
  }
}

}  // namespace
}  // namespace uroce::wire
