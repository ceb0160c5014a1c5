/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>

#include "wire/aeth_syndrome.h"
#include "wire/ib_headers.h"

namespace uroce::wire {
namespace {

TEST(AethSyndrome, EveryCodeOfEveryTypeRoundTrips) {
  for (unsigned type : {0u, 1u, 3u}) {
    for (unsigned value = 0; value < 32; ++value) {
      const AethSyndrome s{static_cast<AethType>(type), static_cast<std::uint8_t>(value)};
      const std::uint8_t byte = s.encode();
      EXPECT_EQ(byte & 0x80, 0) << "bit 7 is reserved";
      EXPECT_EQ(byte, type << 5 | value);
      EXPECT_EQ(AethSyndrome::decode(byte), s);
    }
  }
}

TEST(AethSyndrome, NakCodesEncodeAsTheSpecTableSays) {
  EXPECT_EQ(AethSyndrome::nak(NakCode::kPsnSequenceError).encode(), 0x60);
  EXPECT_EQ(AethSyndrome::nak(NakCode::kInvalidRequest).encode(), 0x61);
  EXPECT_EQ(AethSyndrome::nak(NakCode::kRemoteAccessError).encode(), 0x62);
  EXPECT_EQ(AethSyndrome::nak(NakCode::kRemoteOperationalError).encode(), 0x63);
  EXPECT_EQ(AethSyndrome::nak(NakCode::kInvalidRdRequest).encode(), 0x64);
  EXPECT_EQ(AethSyndrome::decode(0x63).nak_code(), NakCode::kRemoteOperationalError);
  EXPECT_EQ(AethSyndrome::ack().encode(), 0x1F);
}

TEST(AethSyndrome, RnrTimerTableMatchesIba) {
  EXPECT_EQ(rnr_timer_usec(0), 655360u);
  EXPECT_EQ(rnr_timer_usec(1), 10u);
  EXPECT_EQ(rnr_timer_usec(12), 640u);
  EXPECT_EQ(rnr_timer_usec(14), 1280u);
  EXPECT_EQ(rnr_timer_usec(25), 61440u);
  EXPECT_EQ(rnr_timer_usec(31), 491520u);
  // Codes 1..31 grow strictly; code 0 is the longest of all.
  for (std::uint8_t c = 2; c < 32; ++c) EXPECT_GT(rnr_timer_usec(c), rnr_timer_usec(c - 1));
  EXPECT_GT(rnr_timer_usec(0), rnr_timer_usec(31));
}

TEST(AethSyndrome, CreditCodes) {
  EXPECT_EQ(credit_count(0), 0u);
  EXPECT_EQ(credit_count(5), 6u);
  EXPECT_EQ(credit_count(30), 32768u);
  EXPECT_FALSE(credit_count(kCreditsUnlimited).has_value());
  for (std::uint8_t c = 0; c < 31; ++c) EXPECT_EQ(credit_code_for(*credit_count(c)), c);
  EXPECT_EQ(credit_code_for(5), 4);  // 4 credits: the most that does not exceed 5
  EXPECT_EQ(credit_code_for(1'000'000), 30);
}

TEST(Aeth, HeaderRoundTripsWithMsn) {
  std::uint8_t buf[4];
  Aeth{AethSyndrome::rnr_nak(14), 0xABCDEF}.write(buf);
  EXPECT_EQ(buf[0], 0x2E);
  EXPECT_EQ(buf[1], 0xAB);
  const Aeth back = Aeth::parse(buf);
  EXPECT_EQ(back.syndrome, AethSyndrome::rnr_nak(14));
  EXPECT_EQ(back.msn, 0xABCDEFu);
}

}  // namespace
}  // namespace uroce::wire
