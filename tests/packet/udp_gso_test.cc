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

// Splits the super-frame of frames[from, from + n) and expects each
// segment to be the frame the engine built, byte for byte.
void expect_splits_into(const std::vector<Frame>& frames, std::size_t from, std::size_t n) {
  const Frame s = super_frame(frames, from, n);
  const UdpFrame at = locate_udp(s);
  ASSERT_TRUE(at.valid) << "the super-frame's lengths are its own";
  const auto gso_size = static_cast<std::uint16_t>(locate_udp(frames[from]).payload);
  ASSERT_EQ(segments(at.payload, gso_size), n);
  const ConstBytes header(s.data(), at.header_length());
  const ConstBytes payload(s.data() + at.header_length(), at.payload);
  for (std::uint32_t k = 0; k < n; ++k) {
    Frame out(9728);
    out.resize(split(header, at, payload, gso_size, k, out));
    EXPECT_EQ(out, frames[from + k]) << "segment " << k;
    wire::RocePacket pkt;
    EXPECT_EQ(wire::parse_roce_frame(out, pkt), wire::DropReason::kNone) << "segment " << k;
  }
  Frame out(9728);
  EXPECT_EQ(split(header, at, payload, gso_size, static_cast<std::uint32_t>(n), out), 0u)
      << "past the last segment";
}

// Expect: FIRST carries a RETH, so the MIDDLE after it is shorter and
// can only be its last segment: a two-packet super-frame, the shorter
// second (the kernel's edge case). The other MIDDLEs and the shorter
// LAST make the next. Each splits back into the frames, as tx_burst
// cuts the burst.
TEST_P(UdpGso, AWritesPacketsMakeSuperFramesThatSplitBackIntoThem) {
  const std::vector<Frame> frames = write(route_, 10, 300, 0xFFFA);  // the IDs wrap
  const auto v = views(frames);
  const UdpFrame first = locate_udp(v[0]);
  ASSERT_TRUE(first.valid);
  EXPECT_EQ(first.ipv6, GetParam());
  ASSERT_EQ(coalescible(v, first), 2);
  const auto rest = views(frames, 2);
  ASSERT_EQ(coalescible(rest, locate_udp(rest[0])), 10);
  expect_splits_into(frames, 0, 2);
  expect_splits_into(frames, 2, 10);
}

std::uint16_t add16(std::uint32_t a, std::uint32_t b) {
  std::uint32_t s = a + b;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

// The UDP checksum each segment gets, done as the kernel does it: the
// super-frame's pseudo-header sum adjusted from its UDP length to the
// segment's (__udp_gso_segment), completed over the segment's datagram
// and complemented (a NIC's checksum offload, or gso_make_checksum). It
// must verify as the segment's UDP checksum.
TEST_P(UdpGso, EachSegmentsUdpChecksumComesOutRight) {
  const std::vector<Frame> frames = write(route_, 3, 333, 7);
  const Frame s = super_frame(frames, 2, 3);
  const UdpFrame at = locate_udp(s);
  const std::uint16_t super_check = wire::load_be16(&s[at.l4 + 6]);
  const std::uint16_t super_len = wire::load_be16(&s[at.l4 + 4]);
  const auto gso_size = static_cast<std::uint16_t>(locate_udp(frames[2]).payload);
  const ConstBytes header(s.data(), at.header_length());
  const ConstBytes payload(s.data() + at.header_length(), at.payload);
  for (std::uint32_t k = 0; k < 3; ++k) {
    Frame seg(9728);
    seg.resize(split(header, at, payload, gso_size, k, seg));
    std::uint8_t* udp = &seg[at.l4];
    const std::size_t udp_len = seg.size() - at.l4;
    ASSERT_EQ(wire::load_be16(udp + 4), udp_len);
    // csum16_add(csum16_sub(check, uh->len), newlen)
    wire::store_be16(udp + 6, add16(add16(super_check, static_cast<std::uint16_t>(~super_len)),
                                    static_cast<std::uint16_t>(udp_len)));
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i + 1 < udp_len; i += 2) sum = add16(sum, wire::load_be16(udp + i));
    if (udp_len % 2) sum = add16(sum, std::uint32_t{udp[udp_len - 1]} << 8);
    const auto check = static_cast<std::uint16_t>(~sum);
    wire::store_be16(udp + 6, check == 0 ? 0xFFFF : check);
    // The receiver's verification: pseudo-header and datagram sum to 0xFFFF.
    std::uint32_t verify = wire::ip_proto::kUdp + static_cast<std::uint32_t>(udp_len);
    const std::uint8_t* ip = &seg[at.l3];
    const std::size_t addr = GetParam() ? 8 : 12, bytes = GetParam() ? 32 : 8;
    for (std::size_t i = 0; i < bytes; i += 2)
      verify = add16(verify, wire::load_be16(ip + addr + i));
    for (std::size_t i = 0; i + 1 < udp_len; i += 2)
      verify = add16(verify, wire::load_be16(udp + i));
    if (udp_len % 2) verify = add16(verify, std::uint32_t{udp[udp_len - 1]} << 8);
    EXPECT_EQ(verify, 0xFFFFu) << "segment " << k;
  }
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
