/* SPDX-License-Identifier: BSD-3-Clause */
// UDP GSO for RoCEv2 (drivers/packet/udp_gso.h): which of the engine's
// frames go out as one super-frame, and the frames splitting it gives
// back, which must be the engine's byte for byte (ICRC included), as the
// kernel's segmentation of it would write them.

#include "packet/udp_gso.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/wire_samples.h"
#include "wire/ib_headers.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

namespace uroce::packet {
namespace {

using wire::ConstBytes;
using Frame = std::vector<std::uint8_t>;

// A frame of `opcode` with `payload` bytes (value `fill`), PSN `psn`, IPv4
// ID `ip_id`, on `route`.
Frame roce(const wire::RoceRoute& route, std::uint8_t opcode, std::size_t payload,
           std::uint32_t psn, std::uint16_t ip_id, std::uint8_t fill = 0x5A) {
  wire::Bth bth;
  bth.opcode = opcode;
  bth.dest_qp = 0x123456;
  bth.psn = wire::Psn(psn);
  wire::ExtHeaders ext;
  ext.reth.va = 0x1000;
  ext.reth.rkey = 0xBEEF;
  ext.reth.dma_length = 65536;
  const std::vector<std::uint8_t> data(payload, fill);
  const ConstBytes seg(data.data(), data.size());
  Frame f(wire::roce_frame_length(route, wire::opcode_info(opcode), payload));
  EXPECT_EQ(wire::build_roce_frame(f, route, bth, ext, std::span(&seg, 1), ip_id, false), f.size());
  return f;
}

constexpr std::uint8_t kFirst = 0x06;   // RC RDMA WRITE First
constexpr std::uint8_t kMiddle = 0x07;  // RC RDMA WRITE Middle
constexpr std::uint8_t kLast = 0x08;    // RC RDMA WRITE Last

// A WRITE's packets as the engine builds them: consecutive IDs from `id`.
std::vector<Frame> write(const wire::RoceRoute& route, int middles, std::size_t last,
                         std::uint16_t id) {
  std::vector<Frame> f;
  f.push_back(roce(route, kFirst, 1024, 100, id++));
  for (int i = 0; i < middles; ++i) f.push_back(roce(route, kMiddle, 1024, 101 + i, id++));
  f.push_back(roce(route, kLast, last, 101 + middles, id++));
  return f;
}

std::vector<ConstBytes> views(const std::vector<Frame>& frames, std::size_t from = 0) {
  std::vector<ConstBytes> v;
  for (std::size_t i = from; i < frames.size(); ++i)
    v.emplace_back(frames[i].data(), frames[i].size());
  return v;
}

// The super-frame of frames[from, from + n) as the port sends it: the
// super header and each frame's UDP payload.
Frame super_frame(const std::vector<Frame>& frames, std::size_t from, std::size_t n) {
  const UdpFrame first = locate_udp(ConstBytes(frames[from].data(), frames[from].size()));
  std::uint32_t total = 0;
  for (std::size_t i = from; i < from + n; ++i) total += locate_udp(frames[i]).payload;
  Frame s(first.header_length());
  write_super_header(frames[from], first, total, s.data());
  for (std::size_t i = from; i < from + n; ++i) {
    const UdpFrame at = locate_udp(frames[i]);
    s.insert(s.end(), frames[i].begin() + at.header_length(),
             frames[i].begin() + at.header_length() + at.payload);
  }
  return s;
}

class UdpGso : public ::testing::TestWithParam<bool> {
 protected:
  wire::RoceRoute route_ = test::sample_route(GetParam());
};

// Expect: FIRST carries a RETH and goes alone; the MIDDLEs and the
// shorter LAST make one super-frame, whose segments are the frames.
TEST_P(UdpGso, AWritesMiddlesAndLastMakeOneSuperFrameThatSplitsBackIntoThem) {
  const std::vector<Frame> frames = write(route_, 10, 300, 0xFFFA);  // the IDs wrap
  const auto v = views(frames);
  const UdpFrame first = locate_udp(v[0]);
  ASSERT_TRUE(first.valid);
  EXPECT_EQ(first.ipv6, GetParam());
  // FIRST's payload is PMTU plus the RETH: the MIDDLE after it is shorter,
  // so it may only be FIRST's last segment.
  EXPECT_EQ(coalescible(v, first), 2);
  const auto rest = views(frames, 1);
  ASSERT_EQ(coalescible(rest, locate_udp(rest[0])), 11);

  const Frame s = super_frame(frames, 1, 11);
  const UdpFrame at = locate_udp(s);
  ASSERT_TRUE(at.valid) << "the super-frame's lengths are its own";
  const auto gso_size = static_cast<std::uint16_t>(locate_udp(frames[1]).payload);
  ASSERT_EQ(segments(at.payload, gso_size), 11u);
  const ConstBytes header(s.data(), at.header_length());
  const ConstBytes payload(s.data() + at.header_length(), at.payload);
  for (std::uint32_t k = 0; k < 11; ++k) {
    Frame out(9728);
    const std::size_t len = split(header, at, payload, gso_size, k, out);
    out.resize(len);
    EXPECT_EQ(out, frames[1 + k]) << "segment " << k;
    wire::RocePacket pkt;
    EXPECT_EQ(wire::parse_roce_frame(out, pkt), wire::DropReason::kNone) << "segment " << k;
    EXPECT_EQ(pkt.bth.psn.value(), 101 + k);
  }
  Frame out(9728);
  EXPECT_EQ(split(header, at, payload, gso_size, 11, out), 0u) << "past the last segment";
}

TEST_P(UdpGso, ThePseudoHeaderSumIsWhatTheKernelCompletes) {
  const std::vector<Frame> frames = write(route_, 3, 1024, 7);
  const Frame s = super_frame(frames, 1, 4);
  const UdpFrame at = locate_udp(s);
  // CHECKSUM_PARTIAL: the field holds the sum (folded, not complemented)
  // of the pseudo-header with the whole datagram's length, which the
  // kernel adjusts to each segment's length and completes over its bytes.
  const wire::IpAddr src = GetParam() ? wire::IpAddr::from_v6_bytes(&s[at.l3 + 8])
                                      : wire::IpAddr::from_v4_bytes(&s[at.l3 + 12]);
  const wire::IpAddr dst = GetParam() ? wire::IpAddr::from_v6_bytes(&s[at.l3 + 24])
                                      : wire::IpAddr::from_v4_bytes(&s[at.l3 + 16]);
  std::uint64_t pseudo = wire::ip_proto::kUdp + (s.size() - at.l4);
  if (GetParam()) {
    for (int i = 0; i < 16; i += 2)
      pseudo += wire::load_be16(&src.bytes[i]) + wire::load_be16(&dst.bytes[i]);
  } else {
    pseudo += (src.v4() >> 16) + (src.v4() & 0xFFFF) + (dst.v4() >> 16) + (dst.v4() & 0xFFFF);
  }
  while (pseudo >> 16) pseudo = (pseudo & 0xFFFF) + (pseudo >> 16);
  EXPECT_EQ(wire::load_be16(&s[at.l4 + 6]), pseudo);
}

// Expect: a run ends where segmentation could not reproduce the next
// frame.
TEST_P(UdpGso, ARunEndsWhereSegmentationWouldWriteAnotherFrame) {
  std::vector<Frame> f;
  for (int i = 0; i < 4; ++i)
    f.push_back(roce(route_, kMiddle, 1024, 10 + i, static_cast<std::uint16_t>(50 + i)));
  const auto count = [&] {
    const auto v = views(f);
    return coalescible(v, locate_udp(v[0]));
  };
  ASSERT_EQ(count(), 4);
  if (!GetParam()) {
    // IPv4: an ID out of sequence (a CNP built in between, say).
    f[2] = roce(route_, kMiddle, 1024, 12, 60);
    EXPECT_EQ(count(), 2);
    f[2] = roce(route_, kMiddle, 1024, 12, 52);
  }
  wire::RoceRoute other = route_;
  other.udp_sport ^= 1;  // another QP's flow
  f[1] = roce(other, kMiddle, 1024, 11, 51);
  EXPECT_EQ(count(), 1);
  other = route_;
  other.dscp = static_cast<std::uint8_t>(route_.dscp ^ 8);  // another traffic class
  f[1] = roce(other, kMiddle, 1024, 11, 51);
  EXPECT_EQ(count(), 1);
  f[1] = roce(route_, kMiddle, 1024, 11, 51);
  f[3] = roce(route_, kFirst, 1024, 13, 53);  // longer: cannot follow
  EXPECT_EQ(count(), 3);
  f[3] = roce(route_, kMiddle, 1024, 13, 53);
  f[1] = roce(route_, kLast, 8, 11, 51);  // shorter: only last
  EXPECT_EQ(count(), 2);
  // Different QPs of one flow, same length: each segment is a complete
  // packet, so they may share a super-frame.
  f[1] = roce(route_, kMiddle, 1024, 11, 51);
  EXPECT_EQ(count(), 4);
}

TEST_P(UdpGso, ASuperFrameStaysWithinTheKernelsLimits) {
  std::vector<Frame> f;
  for (int i = 0; i < 100; ++i)
    f.push_back(roce(route_, kMiddle, 256, i, static_cast<std::uint16_t>(i)));
  auto v = views(f);
  EXPECT_EQ(coalescible(v, locate_udp(v[0])), kMaxSegments);
  f.clear();
  for (int i = 0; i < 40; ++i)
    f.push_back(roce(route_, kMiddle, 4096, i, static_cast<std::uint16_t>(i)));
  v = views(f);
  const std::uint16_t n = coalescible(v, locate_udp(v[0]));
  const UdpFrame at = locate_udp(v[0]);
  EXPECT_LE(at.header_length() + std::size_t{n} * at.payload, kMaxSuperFrame);
  EXPECT_GT(at.header_length() + (std::size_t{n} + 1) * at.payload, kMaxSuperFrame);
}

TEST_P(UdpGso, WhatIsNotAPlainUdpDatagramGoesAlone) {
  Frame f = roce(route_, kMiddle, 1024, 1, 1);
  wire::RoceRoute tagged = route_;
  tagged.vlan = true;
  const Frame t = roce(tagged, kMiddle, 1024, 1, 1);
  EXPECT_FALSE(locate_udp(t).valid) << "802.1Q";
  Frame bad = f;
  wire::store_be16(&bad[locate_udp(f).l4 + 4], 9000);  // UDP length past the frame
  EXPECT_FALSE(locate_udp(bad).valid);
  EXPECT_FALSE(locate_udp(ConstBytes(f.data(), 20)).valid) << "short";
  const std::vector<ConstBytes> one = {ConstBytes(t.data(), t.size()),
                                       ConstBytes(t.data(), t.size())};
  EXPECT_EQ(coalescible(one, locate_udp(one[0])), 1);
  EXPECT_EQ(coalescible({}, UdpFrame{}), 0);
}

INSTANTIATE_TEST_SUITE_P(Ip, UdpGso, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Ipv6" : "Ipv4"; });

}  // namespace
}  // namespace uroce::packet
