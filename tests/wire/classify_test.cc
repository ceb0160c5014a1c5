/* SPDX-License-Identifier: BSD-3-Clause */
// The frame classifier (classify.cc): offsets and fields of every kind of
// frame uroce receives, and no read past the end of a short one.

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "support/wire_samples.h"
#include "wire/arp.h"
#include "wire/classify.h"
#include "wire/opcode.h"

namespace uroce::wire {
namespace {

std::vector<std::uint8_t> roce(bool ipv6, bool vlan) {
  std::mt19937_64 rng(7);
  RoceRoute r = test::sample_route(ipv6, vlan);
  r.dscp = 26;
  r.ecn = Ecn::kEct0;
  r.pcp = 5;
  return test::build_frame(r, test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcSendOnly),
                                                  rng));
}

TEST(Classify, UntaggedIpv4) {
  const auto f = roce(false, false);
  const FrameClass c = classify(f);
  ASSERT_TRUE(c.valid());
  EXPECT_FALSE(c.tagged);
  EXPECT_EQ(c.l2_len, 14);
  EXPECT_EQ(c.ether_type, ether_type::kIpv4);
  EXPECT_EQ(c.ip_version, 4);
  EXPECT_EQ(c.l3_len, 20);
  EXPECT_EQ(c.l4_offset(), 34u);
  EXPECT_EQ(c.l4_proto, ip_proto::kUdp);
  EXPECT_EQ(c.dscp(), 26);
  EXPECT_EQ(c.ecn(), Ecn::kEct0);
  EXPECT_EQ(c.ip_dst(f), test::sample_route(false).dst_ip);
}

TEST(Classify, TaggedIpv6CarriesPcpVidAndTrafficClass) {
  const auto f = roce(true, true);
  const FrameClass c = classify(f);
  ASSERT_TRUE(c.valid());
  EXPECT_TRUE(c.tagged);
  EXPECT_EQ(c.pcp, 5);
  EXPECT_EQ(c.vid, test::sample_route(true, true).vid);
  EXPECT_EQ(c.l2_len, 18);
  EXPECT_EQ(c.ether_type, ether_type::kIpv6);
  EXPECT_EQ(c.ip_version, 6);
  EXPECT_EQ(c.l4_offset(), 18u + 40);
  EXPECT_EQ(c.l4_proto, ip_proto::kUdp);
  EXPECT_EQ(c.dscp(), 26);
  EXPECT_EQ(c.ecn(), Ecn::kEct0);
  EXPECT_EQ(c.ip_dst(f), test::sample_route(true, true).dst_ip);
}

TEST(Classify, Ipv4OptionsLengthenTheL3Header) {
  auto f = roce(false, false);
  f[14] = 0x46;  // IHL 6: four bytes of options (the frame has them to spare)
  const FrameClass c = classify(f);
  EXPECT_EQ(c.ip_version, 4);
  EXPECT_EQ(c.l3_len, 24);
  f[14] = 0x44;  // IHL 4 is below the minimum: not an IP header
  EXPECT_EQ(classify(f).ip_version, 0);
}

TEST(Classify, NonIpFramesStopAtL2) {
  std::uint8_t arp[kMinFrameSize];
  ASSERT_NE(build_arp_request(arp, {{2, 0, 0, 0, 0, 1}}, 0x0A000001, 0x0A000002), 0u);
  const FrameClass c = classify(arp);
  ASSERT_TRUE(c.valid());
  EXPECT_EQ(c.ether_type, ether_type::kArp);
  EXPECT_FALSE(c.ip());
}

TEST(Classify, TruncatedFramesReadNothingTheyDoNotHave) {
  for (bool ipv6 : {false, true}) {
    for (bool vlan : {false, true}) {
      const auto f = roce(ipv6, vlan);
      const std::size_t l2 = vlan ? 18 : 14;
      const std::size_t l3 = ipv6 ? 40 : 20;
      for (std::size_t n = 0; n < l2 + l3 + 4; ++n) {
        // A copy of exactly n bytes, so a sanitizer sees any read past it.
        const std::vector<std::uint8_t> cut(f.begin(), f.begin() + static_cast<long>(n));
        const FrameClass c = classify(cut);
        EXPECT_EQ(c.valid(), n >= l2) << n;
        EXPECT_EQ(c.ip(), n >= l2 + l3) << n;
      }
    }
  }
}

}  // namespace
}  // namespace uroce::wire
