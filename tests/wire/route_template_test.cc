/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "support/wire_samples.h"
#include "wire/roce_frame.h"

namespace uroce::wire {
namespace {

// The headers below the BTH as the IBA and the IETF lay them out, written
// field by field with the checksum summed over the whole IPv4 header: what
// the template's copy and patches must reproduce.
std::size_t reference_headers(std::uint8_t* p, const RoceRoute& r, std::size_t frame_len,
                              std::uint16_t ip_id) {
  EthHdr eth{r.dst_mac, r.src_mac, r.ipv6() ? ether_type::kIpv6 : ether_type::kIpv4};
  if (r.vlan) {
    VlanTag{r.pcp, false, r.vid, eth.ether_type}.write(p + EthHdr::kSize);
    eth.ether_type = ether_type::kVlan;
  }
  eth.write(p);
  const std::size_t l3 = r.l3_offset();
  std::size_t udp;
  if (r.ipv6()) {
    Ipv6Hdr ip;
    ip.traffic_class = static_cast<std::uint8_t>(r.dscp << 2 | static_cast<unsigned>(r.ecn));
    ip.flow_label = r.flow_label;
    ip.payload_length = static_cast<std::uint16_t>(frame_len - l3 - Ipv6Hdr::kSize);
    ip.hop_limit = r.hop_limit;
    ip.src = r.src_ip;
    ip.dst = r.dst_ip;
    ip.write(p + l3);
    udp = l3 + Ipv6Hdr::kSize;
  } else {
    Ipv4Hdr ip;
    ip.dscp = r.dscp;
    ip.ecn = r.ecn;
    ip.total_length = static_cast<std::uint16_t>(frame_len - l3);
    ip.id = ip_id;
    ip.ttl = r.hop_limit;
    ip.src = r.src_ip.v4();
    ip.dst = r.dst_ip.v4();
    ip.write(p + l3, true);
    udp = l3 + Ipv4Hdr::kMinSize;
  }
  UdpHdr{r.udp_sport, kRoceV2Port, static_cast<std::uint16_t>(frame_len - udp), 0}.write(p + udp);
  return r.bth_offset();
}

RoceRoute varied_route(bool ipv6, bool vlan) {
  RoceRoute r = test::sample_route(ipv6, vlan);
  r.pcp = vlan ? 5 : 0;
  r.vid = vlan ? 0x123 : 0;
  r.dscp = 26;
  r.ecn = Ecn::kEct0;
  r.hop_limit = 17;
  r.flow_label = ipv6 ? 0xABCDE : 0;
  r.udp_sport = 0xC0DE;
  return r;
}

TEST(RouteTemplate, HeadersAreTheFieldByFieldOnesAtEveryLengthAndId) {
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kRcRdmaWriteOnly);
  bth.dest_qp = 0x123456;
  bth.psn = Psn(0xABCDEF);
  ExtHeaders ext;
  ext.reth = {0x1000, 0x42, 0};
  for (const bool ipv6 : {false, true}) {
    for (const bool vlan : {false, true}) {
      const RoceRoute route = varied_route(ipv6, vlan);
      const RouteTemplate t(route);  // one template, many frames
      EXPECT_EQ(t.bth_offset(), route.bth_offset());
      EXPECT_EQ(t.l3_offset(), route.l3_offset());
      for (const std::size_t len : {0u, 1u, 3u, 64u, 1023u, 4096u, 9000u}) {
        for (const std::uint16_t id : {0, 1, 0x7FFF, 0xFFFE, 0xFFFF}) {
          SCOPED_TRACE(testing::Message() << "ipv6 " << ipv6 << " vlan " << vlan << " payload "
                                          << len << " id " << id);
          std::array<std::uint8_t, 128> got{}, want{};
          ext.reth.dma_length = static_cast<std::uint32_t>(len);
          const std::size_t hdr = write_roce_headers(got, t, bth, ext, len, id);
          ASSERT_EQ(hdr, route.bth_offset() + opcode_info(bth.opcode).length);
          const std::size_t frame_len = roce_frame_length(t, opcode_info(bth.opcode), len);
          EXPECT_EQ(frame_len, roce_frame_length(route, opcode_info(bth.opcode), len));
          const std::size_t below_bth = reference_headers(want.data(), route, frame_len, id);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), below_bth), 0);
          if (!ipv6) {
            EXPECT_EQ(inet_checksum(got.data() + route.l3_offset(), Ipv4Hdr::kMinSize), 0)
                << "the IPv4 header checksum verifies";
          }
          const Bth parsed = Bth::parse(got.data() + below_bth);
          EXPECT_EQ(parsed.psn, bth.psn);
          EXPECT_EQ(parsed.pad_count, pad_count(len));
        }
      }
    }
  }
}

TEST(RouteTemplate, AnOffloadedIpv4ChecksumIsLeftZero) {
  const RoceRoute route = varied_route(false, false);
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kRcSendOnly);
  std::array<std::uint8_t, 128> buf;
  buf.fill(0xEE);
  ASSERT_NE(write_roce_headers(buf, RouteTemplate(route), bth, {}, 10, 77, false), 0u);
  EXPECT_EQ(load_be16(buf.data() + route.l3_offset() + 10), 0);
  EXPECT_EQ(load_be16(buf.data() + route.l3_offset() + 4), 77);
}

TEST(RouteTemplate, KeepsTheRoutesAddresses) {
  for (const bool ipv6 : {false, true}) {
    const RoceRoute route = varied_route(ipv6, true);
    const RouteTemplate t(route);
    EXPECT_EQ(t.ipv6(), ipv6);
    EXPECT_EQ(t.src_ip(), route.src_ip);
    EXPECT_EQ(t.dst_ip(), route.dst_ip);
  }
}

}  // namespace
}  // namespace uroce::wire
