/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>

#include <cstring>

#include "support/wire_samples.h"
#include "wire/arp.h"
#include "wire/cnp.h"
#include "wire/icmp.h"
#include "wire/mac_control.h"
#include "wire/ndp.h"
#include "wire/roce_parser.h"

namespace uroce::wire {
namespace {

const MacAddr kMac = {{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};

TEST(Pfc, FrameHasTheLayoutOf8021Qbb) {
  std::array<std::uint8_t, 64> buf;
  const std::array<std::uint16_t, 8> times = {0, 0, 0, 0xFFFF, 0, 0, 0x1234, 0};
  ASSERT_EQ(build_pfc_frame(buf, kMac, 0x48, times), 60u);
  EXPECT_EQ((MacAddr{{buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]}}), kMacControlDst);
  EXPECT_EQ(load_be16(buf.data() + 12), 0x8808);
  EXPECT_EQ(load_be16(buf.data() + 14), 0x0101);
  EXPECT_EQ(buf[16], 0);     // reserved octet of the enable vector
  EXPECT_EQ(buf[17], 0x48);  // priorities 3 and 6
  EXPECT_EQ(load_be16(buf.data() + 18 + 2 * 3), 0xFFFF);
  EXPECT_EQ(load_be16(buf.data() + 18 + 2 * 6), 0x1234);
  for (std::size_t i = 34; i < 60; ++i) EXPECT_EQ(buf[i], 0) << "padding " << i;

  MacControlFrame f;
  ASSERT_EQ(parse_mac_control_frame(ConstBytes(buf.data(), 60), f), MacControlError::kNone);
  EXPECT_EQ(f.opcode, mac_control_opcode::kPfc);
  EXPECT_EQ(f.src, kMac);
  EXPECT_EQ(f.class_enable, 0x48);
  EXPECT_EQ(f.class_time, times);
}

TEST(Pause, FrameRoundTrips) {
  std::array<std::uint8_t, 60> buf;
  ASSERT_EQ(build_pause_frame(buf, kMac, 0xABCD), 60u);
  EXPECT_EQ(load_be16(buf.data() + 14), 0x0001);
  MacControlFrame f;
  ASSERT_EQ(parse_mac_control_frame(buf, f), MacControlError::kNone);
  EXPECT_EQ(f.opcode, mac_control_opcode::kPause);
  EXPECT_EQ(f.pause_time, 0xABCD);
}

TEST(MacControl, MalformedFramesAreRefusedWithTheirReason) {
  std::array<std::uint8_t, 60> good;
  ASSERT_EQ(build_pfc_frame(good, kMac, 1, {1, 0, 0, 0, 0, 0, 0, 0}), 60u);
  MacControlFrame f;
  auto with = [&](auto change) {
    auto b = good;
    change(b);
    return parse_mac_control_frame(b, f);
  };
  EXPECT_EQ(with([](auto& b) { b[5] = 0x02; }), MacControlError::kBadDestination);
  EXPECT_EQ(with([](auto& b) { b[15] = 0x02; }), MacControlError::kUnknownOpcode);
  EXPECT_EQ(with([](auto& b) { b[16] = 0x01; }), MacControlError::kBadClassEnable);
  EXPECT_EQ(with([](auto& b) {
              b[12] = 0x08;
              b[13] = 0x00;
            }),
            MacControlError::kNotMacControl);
  EXPECT_EQ(parse_mac_control_frame(ConstBytes(good.data(), 20), f), MacControlError::kShortFrame);
  EXPECT_EQ(parse_mac_control_frame(ConstBytes(good.data(), 10), f), MacControlError::kShortFrame);
}

TEST(Arp, RequestAndReplyRoundTrip) {
  std::array<std::uint8_t, 60> req;
  ASSERT_EQ(build_arp_request(req, kMac, 0x0A000001, 0x0A000002), 60u);
  ArpPacket a;
  ASSERT_TRUE(parse_arp_frame(req, a));
  EXPECT_EQ(a.op, ArpOp::kRequest);
  EXPECT_EQ(a.sender_mac, kMac);
  EXPECT_EQ(a.sender_ip, 0x0A000001u);
  EXPECT_EQ(a.target_ip, 0x0A000002u);
  EXPECT_EQ((MacAddr{{req[0], req[1], req[2], req[3], req[4], req[5]}}), MacAddr::broadcast());

  const MacAddr ours = {{0x02, 0, 0, 0, 0, 2}};
  std::array<std::uint8_t, 60> rep;
  ASSERT_EQ(build_arp_reply(rep, a, ours, 0x0A000002), 60u);
  ArpPacket r;
  ASSERT_TRUE(parse_arp_frame(rep, r));
  EXPECT_EQ(r.op, ArpOp::kReply);
  EXPECT_EQ(r.sender_mac, ours);
  EXPECT_EQ(r.sender_ip, 0x0A000002u);
  EXPECT_EQ(r.target_mac, kMac);
  EXPECT_EQ(r.target_ip, 0x0A000001u);
  EXPECT_EQ((MacAddr{{rep[0], rep[1], rep[2], rep[3], rep[4], rep[5]}}), kMac);

  EXPECT_FALSE(parse_arp_frame(ConstBytes(req.data(), 41), a)) << "truncated";
  req[15] = 2;  // hardware type 2
  EXPECT_FALSE(parse_arp_frame(req, a));
}

// An echo request as Linux's ping sends it: 56 bytes of data.
std::vector<std::uint8_t> echo_request() {
  std::vector<std::uint8_t> f(14 + 20 + 8 + 56);
  EthHdr{kMac, {{0x02, 0, 0, 0, 0, 9}}, ether_type::kIpv4}.write(f.data());
  Ipv4Hdr ip;
  ip.total_length = 20 + 8 + 56;
  ip.id = 77;
  ip.protocol = ip_proto::kIcmp;
  ip.src = 0x0A000009;
  ip.dst = 0x0A000001;
  ip.write(f.data() + 14);
  std::uint8_t* icmp = f.data() + 34;
  icmp[0] = 8;
  store_be16(icmp + 4, 0x1234);  // identifier
  store_be16(icmp + 6, 7);       // sequence
  for (int i = 0; i < 56; ++i) icmp[8 + i] = static_cast<std::uint8_t>(i);
  store_be16(icmp + 2, inet_checksum(icmp, 64));
  return f;
}

TEST(Ndp, SolicitationAndAdvertisementRoundTrip) {
  const IpAddr us = *IpAddr::parse("fd77::1"), peer = *IpAddr::parse("fd77::2:3344");
  std::array<std::uint8_t, 128> ns{};
  const std::size_t n = build_neighbor_solicitation(ns, kMac, us, peer);
  ASSERT_EQ(n, 86u);
  // To the solicited-node group of the target.
  EXPECT_EQ(solicited_node_mac(peer), (MacAddr{{0x33, 0x33, 0xFF, 0x02, 0x33, 0x44}}));
  EXPECT_EQ(std::memcmp(ns.data(), solicited_node_mac(peer).bytes.data(), 6), 0);
  NdpPacket s;
  ASSERT_TRUE(parse_ndp_frame(ConstBytes(ns.data(), n), s));
  EXPECT_EQ(s.type, icmpv6_type::kNeighborSolicitation);
  EXPECT_EQ(s.src, us);
  EXPECT_EQ(s.target, peer);
  ASSERT_TRUE(s.has_link_addr);
  EXPECT_EQ(s.link_addr, kMac);

  const MacAddr theirs = {{0x02, 0, 0, 0, 0, 0x77}};
  std::array<std::uint8_t, 128> na{};
  const std::size_t m = build_neighbor_advertisement(na, s, theirs, peer);
  ASSERT_EQ(m, 86u);
  NdpPacket a;
  ASSERT_TRUE(parse_ndp_frame(ConstBytes(na.data(), m), a));
  EXPECT_EQ(a.type, icmpv6_type::kNeighborAdvertisement);
  EXPECT_EQ(a.target, peer);
  EXPECT_EQ(a.link_addr, theirs);
  EXPECT_EQ(std::memcmp(na.data(), kMac.bytes.data(), 6), 0) << "unicast to the solicitor";

  // A flipped bit fails the checksum; a forwarded one (hop limit < 255)
  // is not from the link.
  na[70] ^= 1;
  EXPECT_FALSE(parse_ndp_frame(ConstBytes(na.data(), m), a));
  na[70] ^= 1;
  na[14 + 7] = 64;
  EXPECT_FALSE(parse_ndp_frame(ConstBytes(na.data(), m), a));
  EXPECT_FALSE(parse_ndp_frame(ConstBytes(ns.data(), 60), s)) << "truncated";
}

TEST(IcmpEcho, ReplySwapsAddressesAndKeepsIdSequenceAndData) {
  const auto req = echo_request();
  std::vector<std::uint8_t> rep(200);
  const std::size_t n = build_icmp_echo_reply(rep, req);
  ASSERT_EQ(n, req.size());
  const EthHdr eth = EthHdr::parse(rep.data());
  EXPECT_EQ(eth.dst, (MacAddr{{0x02, 0, 0, 0, 0, 9}}));
  EXPECT_EQ(eth.src, kMac);
  EXPECT_EQ(inet_checksum(rep.data() + 14, 20), 0);
  const Ipv4Hdr ip = Ipv4Hdr::parse(rep.data() + 14);
  EXPECT_EQ(ip.src, 0x0A000001u);
  EXPECT_EQ(ip.dst, 0x0A000009u);
  const std::uint8_t* icmp = rep.data() + 34;
  EXPECT_EQ(icmp[0], 0);
  EXPECT_EQ(inet_checksum(icmp, 64), 0);
  EXPECT_EQ(load_be16(icmp + 4), 0x1234);
  EXPECT_EQ(load_be16(icmp + 6), 7);
  EXPECT_TRUE(std::equal(icmp + 8, icmp + 64, req.begin() + 42));
}

TEST(IcmpEcho, RefusesWhatIsNotAValidEchoRequest) {
  std::vector<std::uint8_t> rep(200);
  auto req = echo_request();
  req[34] = 0;  // an echo reply
  EXPECT_EQ(build_icmp_echo_reply(rep, req), 0u);
  req = echo_request();
  req[40] ^= 1;  // bad ICMP checksum
  EXPECT_EQ(build_icmp_echo_reply(rep, req), 0u);
  req = echo_request();
  req.resize(50);  // truncated
  EXPECT_EQ(build_icmp_echo_reply(rep, req), 0u);
  std::vector<std::uint8_t> small(40);
  EXPECT_EQ(build_icmp_echo_reply(small, echo_request()), 0u);
}

// The CNP a ConnectX-4 Lx sent (scapy's roce.uts), rebuilt from its
// addresses: every byte, ICRC included, must come out the same.
TEST(Cnp, RebuildsAHardwareCnpByteForByte) {
  const std::uint8_t captured[74] = {
      0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00, 0x45,
      0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01,
      0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff,
      0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a};
  RoceRoute r;
  r.dst_mac = {{0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2}};
  r.src_mac = {{0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32}};
  r.src_ip = *IpAddr::parse("10.0.17.1");
  r.dst_ip = *IpAddr::parse("10.0.18.1");
  r.dscp = 48;  // cnp_dscp
  r.ecn = Ecn::kEct0;
  r.udp_sport = 0;
  std::array<std::uint8_t, 74> built{};
  ASSERT_EQ(build_cnp_frame(built, r, 0x000118, 0x718c), 74u);
  for (std::size_t i = 0; i < built.size(); ++i) EXPECT_EQ(built[i], captured[i]) << "byte " << i;
}

// The CNP's layout as a ConnectX-4 Lx sends it (IBA Annex A17.9.2).
TEST(Cnp, MatchesTheLayoutOfAHardwareCnp) {
  RoceRoute r = test::sample_route(false);
  r.dscp = 48;
  r.ecn = Ecn::kEct0;
  r.udp_sport = 0;
  std::vector<std::uint8_t> f(cnp_frame_length(r));
  ASSERT_EQ(f.size(), 74u);
  ASSERT_EQ(build_cnp_frame(f, r, 0x000118, 0x718c), 74u);
  EXPECT_EQ(f[15], 0xC2) << "TOS: DSCP 48, ECT(0)";
  EXPECT_EQ(load_be16(f.data() + 16), 60) << "IP total length";
  EXPECT_EQ(load_be16(f.data() + 38), 40) << "UDP length";
  const std::uint8_t bth[12] = {0x81, 0x00, 0xFF, 0xFF, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0};
  EXPECT_TRUE(std::equal(bth, bth + 12, f.begin() + 42));
  for (int i = 54; i < 70; ++i) EXPECT_EQ(f[i], 0) << "reserved " << i;
  RocePacket p;
  ASSERT_EQ(parse_roce_frame(f, p), DropReason::kNone);
  EXPECT_EQ(p.info->operation, Operation::kCnp);
}

}  // namespace
}  // namespace uroce::wire
