/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include "counters/counter_set.h"
#include "support/wire_samples.h"
#include "wire/icrc.h"
#include "wire/roce_parser.h"

namespace uroce::wire {
namespace {

// Each malformed case starts from a valid frame, breaks one thing, and
// expects its own drop reason. `fix_icrc` re-seals the ICRC so that the
// check under test, not the ICRC, is what rejects the frame.
class Parser : public ::testing::Test {
 protected:
  Parser() : route_(test::sample_route(false)) {
    std::mt19937_64 rng(3);
    sample_ = test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcSendOnly), rng);
    sample_.payload.resize(13);  // pad 3
    frame_ = test::build_frame(route_, sample_);
  }

  std::size_t l3() const { return route_.l3_offset(); }
  std::size_t udp() const { return l3() + 20; }
  std::size_t bth() const { return route_.bth_offset(); }

  void fix_ip_checksum(std::vector<std::uint8_t>& f) const {
    store_be16(f.data() + l3() + 10, 0);
    store_be16(f.data() + l3() + 10, inet_checksum(f.data() + l3(), 20));
  }
  void fix_icrc(std::vector<std::uint8_t>& f) const {
    const std::size_t end = l3() + load_be16(f.data() + l3() + 2) - 4;
    icrc_store(f.data() + end, icrc_compute(ConstBytes(f).subspan(l3(), end - l3())));
  }
  DropReason parse(const std::vector<std::uint8_t>& f) const {
    RocePacket p;
    return parse_roce_frame(f, p);
  }
  DropReason mutate(const std::function<void(std::vector<std::uint8_t>&)>& change) const {
    auto f = frame_;
    change(f);
    return parse(f);
  }

  RoceRoute route_;
  test::SamplePacket sample_;
  std::vector<std::uint8_t> frame_;
};

TEST_F(Parser, AcceptsTheUnbrokenFrame) { EXPECT_EQ(parse(frame_), DropReason::kNone); }

TEST_F(Parser, EveryTruncationIsShortOrBadLengthNeverAnOverread) {
  // ASan guards the "never reads past the buffer" half: each prefix is
  // copied into a vector of exactly its size.
  for (std::size_t n = 0; n < frame_.size(); ++n) {
    const std::vector<std::uint8_t> f(frame_.begin(), frame_.begin() + static_cast<long>(n));
    const DropReason r = parse(f);
    EXPECT_TRUE(r == DropReason::kShortFrame || r == DropReason::kBadIpLength) << n;
  }
}

TEST_F(Parser, RejectsNonIpEtherTypes) {
  EXPECT_EQ(mutate([](auto& f) { store_be16(f.data() + 12, ether_type::kArp); }),
            DropReason::kNotIp);
}

TEST_F(Parser, RejectsAnIpVersionThatDisagreesWithTheEtherType) {
  EXPECT_EQ(mutate([&](auto& f) { f[l3()] = 0x65; }), DropReason::kBadIpVersion);
  EXPECT_EQ(mutate([](auto& f) { store_be16(f.data() + 12, ether_type::kIpv6); }),
            DropReason::kBadIpVersion);
}

TEST_F(Parser, RejectsIpv4Options) {
  EXPECT_EQ(mutate([&](auto& f) { f[l3()] = 0x46; }), DropReason::kBadIpHeaderLength);
  EXPECT_EQ(mutate([&](auto& f) { f[l3()] = 0x44; }), DropReason::kBadIpHeaderLength);
}

TEST_F(Parser, RejectsIpLengthsOutsideTheFrame) {
  EXPECT_EQ(mutate([&](auto& f) {
              store_be16(f.data() + l3() + 2, static_cast<std::uint16_t>(f.size()));
              fix_ip_checksum(f);
            }),
            DropReason::kBadIpLength);
  EXPECT_EQ(mutate([&](auto& f) {
              store_be16(f.data() + l3() + 2, 19);
              fix_ip_checksum(f);
            }),
            DropReason::kBadIpLength);
}

TEST_F(Parser, RejectsABadIpChecksum) {
  EXPECT_EQ(mutate([&](auto& f) { f[l3() + 10] ^= 1; }), DropReason::kBadIpChecksum);
}

TEST_F(Parser, RejectsFragments) {
  EXPECT_EQ(mutate([&](auto& f) {
              f[l3() + 6] |= 0x20;  // more fragments
              fix_ip_checksum(f);
            }),
            DropReason::kIpFragment);
  EXPECT_EQ(mutate([&](auto& f) {
              f[l3() + 7] = 1;  // offset 8
              fix_ip_checksum(f);
            }),
            DropReason::kIpFragment);
}

TEST_F(Parser, RejectsOtherIpProtocols) {
  EXPECT_EQ(mutate([&](auto& f) {
              f[l3() + 9] = 6;  // TCP
              fix_ip_checksum(f);
            }),
            DropReason::kNotUdp);
}

TEST_F(Parser, RejectsOtherUdpPorts) {
  EXPECT_EQ(mutate([&](auto& f) { store_be16(f.data() + udp() + 2, 4792); }),
            DropReason::kNotRoceV2Port);
}

TEST_F(Parser, RejectsAUdpLengthThatDisagreesWithIp) {
  EXPECT_EQ(mutate([&](auto& f) { f[udp() + 5] ^= 4; }), DropReason::kBadUdpLength);
}

TEST_F(Parser, RejectsTransportVersionOtherThanZero) {
  EXPECT_EQ(mutate([&](auto& f) {
              f[bth() + 1] |= 1;
              fix_icrc(f);
            }),
            DropReason::kBadTver);
}

TEST_F(Parser, RejectsUnknownOpcodes) {
  for (std::uint8_t op : {0x15, 0x18, 0x1C, 0x2C, 0x40, 0x60, 0x80, 0xB5, 0xB8, 0xFF}) {
    EXPECT_EQ(mutate([&](auto& f) {
                f[bth()] = op;
                fix_icrc(f);
              }),
              DropReason::kUnknownOpcode)
        << int(op);
  }
}

TEST_F(Parser, RejectsAPacketTooShortForItsOpcodesHeaders) {
  // SEND_ONLY with 16 bytes of payload and pad relabelled as CMP_SWAP,
  // whose AtomicETH alone is 28 bytes.
  EXPECT_EQ(mutate([&](auto& f) {
              f[bth()] = static_cast<std::uint8_t>(Opcode::kRcCompareSwap);
              f[bth() + 1] &= 0xCF;  // no pad
              fix_icrc(f);
            }),
            DropReason::kBadLength);
}

TEST_F(Parser, RejectsPayloadOnAnOpcodeWithoutPayload) {
  // An ACK (BTH + AETH = 16 bytes) with the 16 bytes of payload that
  // follow read as data it may not carry.
  EXPECT_EQ(mutate([&](auto& f) {
              f[bth()] = static_cast<std::uint8_t>(Opcode::kRcAcknowledge);
              f[bth() + 1] &= 0xCF;
              fix_icrc(f);
            }),
            DropReason::kBadLength);
}

TEST_F(Parser, RejectsPadOnPacketsThatMayNotPad) {
  EXPECT_EQ(mutate([&](auto& f) {
              f[bth()] = static_cast<std::uint8_t>(Opcode::kRcSendFirst);
              fix_icrc(f);
            }),
            DropReason::kBadPad);
}

TEST_F(Parser, RejectsPadLongerThanThePayload) {
  // A SEND_ONLY with no payload that claims 3 bytes of pad.
  std::vector<std::uint8_t> f(roce_frame_length(route_, opcode_info(Opcode::kRcSendOnly), 0));
  Bth b = sample_.bth;
  ASSERT_EQ(build_roce_frame(f, route_, b, {}, ConstBytes{}, 1), f.size());
  f[bth() + 1] |= 0x30;  // pad count 3 with no payload
  fix_icrc(f);
  EXPECT_EQ(parse(f), DropReason::kBadPad);
}

TEST_F(Parser, RejectsABadIcrc) {
  for (std::size_t i = l3(); i < frame_.size(); ++i) {
    // Skip bytes that ICRC masks or that other checks catch first.
    if (i == l3() + 1 || i == l3() + 8 || i == l3() + 10 || i == l3() + 11 || i == udp() + 6 ||
        i == udp() + 7 || i == bth() + 4)
      continue;
    // IP and UDP fields, and the BTH byte holding pad count and TVer,
    // have checks of their own that come first.
    if (i < bth() + 2) continue;
    auto f = frame_;
    f[i] ^= 0x04;
    EXPECT_EQ(parse(f), DropReason::kBadIcrc) << "byte " << i;
  }
}

TEST_F(Parser, IgnoresEthernetPaddingAfterTheIpPacket) {
  // A CNP is 74 bytes and needs none, but a tiny UD packet may be padded
  // by the sender's NIC up to 60 bytes; trailing bytes beyond the IP
  // length are not part of the packet.
  auto f = frame_;
  f.insert(f.end(), 6, 0);
  RocePacket p;
  ASSERT_EQ(parse_roce_frame(f, p), DropReason::kNone);
  EXPECT_EQ(p.payload.size(), 13u);
}

TEST(DropReason, EveryReasonHasADistinctName) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < counters::kCountOf<DropReason>; ++i)
    names.insert(name(static_cast<DropReason>(i)));
  EXPECT_EQ(names.size(), counters::kCountOf<DropReason>);
  EXPECT_EQ(drop_reason_name(DropReason::kBadIcrc), "bad_icrc");
}

}  // namespace
}  // namespace uroce::wire
