/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <set>

#include "support/wire_samples.h"
#include "wire/ethernet.h"
#include "wire/ib_headers.h"
#include "wire/ip.h"
#include "wire/mtu.h"
#include "wire/multicast.h"
#include "wire/roce_parser.h"
#include "wire/udp.h"

namespace uroce::wire {
namespace {

TEST(Bth, EveryFieldRoundTripsAndLandsOnItsBits) {
  Bth b;
  b.opcode = 0x0B;
  b.se = true;
  b.mig_req = true;
  b.pad_count = 3;
  b.pkey = 0x7FFF;
  b.fecn = true;
  b.becn = true;
  b.dest_qp = 0xABCDEF;
  b.ack_req = true;
  b.selective_repeat = true;
  b.psn = Psn(0xFFFFFF);
  std::uint8_t buf[kBthSize];
  b.write(buf);
  const std::uint8_t expect[kBthSize] = {0x0B, 0xF0, 0x7F, 0xFF, 0xC0, 0xAB,
                                         0xCD, 0xEF, 0xC0, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(0, std::memcmp(buf, expect, kBthSize));
  const Bth back = Bth::parse(buf);
  EXPECT_EQ(back.opcode, b.opcode);
  EXPECT_TRUE(back.se && back.mig_req && back.fecn && back.becn && back.ack_req &&
              back.selective_repeat);
  EXPECT_EQ(back.pad_count, 3);
  EXPECT_EQ(back.tver, 0);
  EXPECT_EQ(back.pkey, 0x7FFF);
  EXPECT_EQ(back.dest_qp, 0xABCDEFu);
  EXPECT_EQ(back.psn, Psn(0xFFFFFF));
}

TEST(ExtHeaders, EachHeaderRoundTrips) {
  std::uint8_t buf[32];
  // The SACKETH: bit i is bit 7 - i % 8 of byte i / 8.
  std::uint8_t bits[SackEth::kSize] = {};
  for (unsigned i : {0u, 9u, 63u, 64u, 255u}) SackEth::set(bits, i);
  SackEth{bits}.write(buf);
  const std::uint8_t expect_sack[32] = {0x80, 0x40, 0, 0, 0, 0, 0, 0x01, 0x80, 0,   0,
                                        0,    0,    0, 0, 0, 0, 0, 0,    0,    0,   0,
                                        0,    0,    0, 0, 0, 0, 0, 0,    0,    0x01};
  EXPECT_EQ(0, std::memcmp(buf, expect_sack, 32));
  const SackEth s = SackEth::parse(buf);
  for (unsigned i = 0; i < SackEth::kBits; ++i)
    EXPECT_EQ(s.test(i), i == 0 || i == 9 || i == 63 || i == 64 || i == 255) << i;
  SackEth{}.write(buf);  // none held
  EXPECT_EQ(0, std::memcmp(buf, std::array<std::uint8_t, 32>{}.data(), 32));

  Reth{0x0123456789ABCDEF, 0xDEADBEEF, 0x80000000}.write(buf);
  const Reth r = Reth::parse(buf);
  EXPECT_EQ(r.va, 0x0123456789ABCDEFu);
  EXPECT_EQ(r.rkey, 0xDEADBEEFu);
  EXPECT_EQ(r.dma_length, 0x80000000u);

  AtomicEth{0x1000, 0x42, 0x1111222233334444, 0x5555666677778888}.write(buf);
  const AtomicEth a = AtomicEth::parse(buf);
  EXPECT_EQ(a.va, 0x1000u);
  EXPECT_EQ(a.rkey, 0x42u);
  EXPECT_EQ(a.swap_add, 0x1111222233334444u);
  EXPECT_EQ(a.compare, 0x5555666677778888u);
  EXPECT_EQ(buf[12], 0x11);  // swap/add follows VA and R_Key

  AtomicAckEth{0xCAFEF00DDEADBEEF}.write(buf);
  EXPECT_EQ(AtomicAckEth::parse(buf).orig_remote_data, 0xCAFEF00DDEADBEEFu);

  Deth{kGsiQkey, 0x000001}.write(buf);
  EXPECT_EQ(buf[4], 0) << "DETH byte 4 is reserved";
  const Deth d = Deth::parse(buf);
  EXPECT_EQ(d.qkey, kGsiQkey);
  EXPECT_EQ(d.src_qp, 1u);
}

TEST(Ethernet, VlanTagCarriesPcpDeiVid) {
  std::uint8_t buf[4];
  VlanTag{5, true, 0xABC, ether_type::kIpv4}.write(buf);
  EXPECT_EQ(buf[0], 0xBA);  // 101 1 1010
  const VlanTag t = VlanTag::parse(buf);
  EXPECT_EQ(t.pcp, 5);
  EXPECT_TRUE(t.dei);
  EXPECT_EQ(t.vid, 0xABC);
  EXPECT_EQ(t.ether_type, ether_type::kIpv4);
}

TEST(MulticastGid, GroupsAreIpv4ClassDAndIpv6Ff00AndMapToTheirMacs) {
  const auto ip = [](const char* s) { return *IpAddr::parse(s); };
  EXPECT_TRUE(is_multicast(ip("224.0.0.1")));
  EXPECT_TRUE(is_multicast(ip("239.255.255.255")));
  EXPECT_FALSE(is_multicast(ip("223.255.255.255")));
  EXPECT_FALSE(is_multicast(ip("240.0.0.1")));
  EXPECT_FALSE(is_multicast(ip("10.0.0.1")));
  EXPECT_TRUE(is_multicast(ip("ff02::1")));
  EXPECT_FALSE(is_multicast(ip("fe80::1")));
  EXPECT_FALSE(is_multicast(ip("::")));
  // RFC 1112 6.4: the low 23 bits; 239.129.2.3 and 239.1.2.3 share a MAC.
  const MacAddr v4{{0x01, 0x00, 0x5E, 0x01, 0x02, 0x03}};
  EXPECT_EQ(multicast_mac(ip("239.1.2.3")), v4);
  EXPECT_EQ(multicast_mac(ip("239.129.2.3")), v4);
  // RFC 2464 7: 33:33 and the low 32 bits.
  const MacAddr v6{{0x33, 0x33, 0xAB, 0xCD, 0x00, 0x12}};
  EXPECT_EQ(multicast_mac(ip("ff0e::abcd:12")), v6);
}

TEST(Ip, Ipv4HeaderRoundTripsWithAValidChecksum) {
  Ipv4Hdr h;
  h.dscp = 46;
  h.ecn = Ecn::kCe;
  h.total_length = 1082;
  h.id = 0xBEEF;
  h.ttl = 17;
  h.src = 0x0A000001;
  h.dst = 0x0A000002;
  std::uint8_t buf[20];
  h.write(buf);
  EXPECT_EQ(inet_checksum(buf, 20), 0);
  const Ipv4Hdr b = Ipv4Hdr::parse(buf);
  EXPECT_EQ(b.dscp, 46);
  EXPECT_EQ(b.ecn, Ecn::kCe);
  EXPECT_EQ(b.total_length, 1082);
  EXPECT_EQ(b.id, 0xBEEF);
  EXPECT_TRUE(b.df);
  EXPECT_FALSE(b.mf);
  EXPECT_EQ(b.ttl, 17);
  EXPECT_EQ(b.src, 0x0A000001u);
}

// The Internet checksum against RFC 1071 written out (16-bit words, end
// around carry), at every length up to 64 and from any starting sum; and
// RFC 1071's own example.
TEST(Ip, InternetChecksumIsRfc1071s) {
  auto reference = [](const std::vector<std::uint8_t>& b, std::uint32_t sum) {
    std::uint32_t s = sum;
    for (std::size_t i = 0; i < b.size(); i += 2) {
      s += std::uint32_t{b[i]} << 8 | (i + 1 < b.size() ? b[i + 1] : 0u);
      s = (s & 0xFFFF) + (s >> 16);
    }
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return static_cast<std::uint16_t>(~s);
  };
  std::mt19937_64 rng(21);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> b(rng() % 65);
    const int fill = static_cast<int>(rng() % 3);  // random, all ones, all zeros
    for (auto& x : b) x = fill == 0 ? static_cast<std::uint8_t>(rng()) : fill == 1 ? 0xFF : 0;
    const auto sum = static_cast<std::uint32_t>(rng() % 3 == 0 ? 0 : rng() % (1u << 24));
    ASSERT_EQ(inet_checksum(b.data(), b.size(), sum), reference(b, sum)) << b.size();
  }
  const std::uint8_t rfc1071[] = {0x00, 0x01, 0xF2, 0x03, 0xF4, 0xF5, 0xF6, 0xF7};
  EXPECT_EQ(inet_checksum(rfc1071, sizeof(rfc1071)), static_cast<std::uint16_t>(~0xDDF2));
}

TEST(Ip, Ipv6HeaderRoundTrips) {
  Ipv6Hdr h;
  h.traffic_class = 0x6A;
  h.flow_label = 0xFEDCB;
  h.payload_length = 1000;
  h.hop_limit = 3;
  h.src = *IpAddr::parse("fe80::1");
  h.dst = *IpAddr::parse("2001:db8::2");
  std::uint8_t buf[40];
  h.write(buf);
  EXPECT_EQ(buf[0] >> 4, 6);
  const Ipv6Hdr b = Ipv6Hdr::parse(buf);
  EXPECT_EQ(b.traffic_class, 0x6A);
  EXPECT_EQ(b.flow_label, 0xFEDCBu);
  EXPECT_EQ(b.payload_length, 1000);
  EXPECT_EQ(b.hop_limit, 3);
  EXPECT_EQ(b.src, h.src);
  EXPECT_EQ(b.dst.to_string(), "2001:db8::2");
}

TEST(Ip, AddressesKeepIpv4Mapped) {
  const IpAddr a = *IpAddr::parse("192.168.7.9");
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.v4(), 0xC0A80709u);
  EXPECT_EQ(a.to_string(), "192.168.7.9");
  EXPECT_EQ(*IpAddr::parse("::ffff:192.168.7.9"), a);
  EXPECT_FALSE(IpAddr::parse("fe80::1")->is_v4());
  EXPECT_FALSE(IpAddr::parse("10.0.0.256").has_value());
}

TEST(Udp, SourcePortIsFlowEntropyInTheEphemeralRange) {
  EXPECT_EQ(roce_udp_sport(7, 9), roce_udp_sport(9, 7));
  std::mt19937 rng(1);
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::uint16_t p = roce_udp_sport(rng() & 0xFFFFFF, rng() & 0xFFFFFF);
    EXPECT_GE(p, 0xC000);
    seen.insert(p);
  }
  EXPECT_GT(seen.size(), 900u) << "source ports should spread flows";
  // Kernel values (rdma_flow_label_to_udp_sport): the 20-bit label folds
  // its top 6 bits into the low 14.
  EXPECT_EQ(flow_label_to_udp_sport(0xFC000), 0xC03F);
  EXPECT_EQ(flow_label_to_udp_sport(0x03FFF), 0xFFFF);
}

TEST(Udp, Ipv6ChecksumVerifiesAndIsTheSameOverAnyChain) {
  std::mt19937_64 rng(9);
  const RoceRoute route = test::sample_route(true);
  const auto frame = test::build_frame(
      route, test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcSendOnly), rng));
  const std::size_t udp = route.l3_offset() + Ipv6Hdr::kSize;
  const std::uint16_t sent = load_be16(frame.data() + udp + 6);
  EXPECT_NE(sent, 0) << "RFC 8200 forbids a zero UDP checksum over IPv6";

  std::vector<std::uint8_t> datagram(frame.begin() + static_cast<long>(udp), frame.end());
  datagram[6] = datagram[7] = 0;
  const ConstBytes whole(datagram);
  EXPECT_EQ(udp6_checksum(route.src_ip, route.dst_ip, std::span(&whole, 1)), sent);
  // Odd-sized segments put bytes at odd offsets of the 16-bit sum.
  const ConstBytes parts[] = {whole.first(3), whole.subspan(3, 0), whole.subspan(3, 7),
                              whole.subspan(10)};
  EXPECT_EQ(udp6_checksum(route.src_ip, route.dst_ip, parts), sent);
}

TEST(Mtu, EnumAndLinkMtu) {
  EXPECT_EQ(mtu_bytes(Mtu::k1024), 1024u);
  EXPECT_EQ(mtu_from_code(3), Mtu::k1024);
  EXPECT_FALSE(mtu_from_code(0).has_value());
  EXPECT_FALSE(mtu_from_code(6).has_value());
  EXPECT_EQ(mtu_for_link(1500), Mtu::k1024);
  EXPECT_EQ(mtu_for_link(2200), Mtu::k2048);
  EXPECT_EQ(mtu_for_link(9000), Mtu::k4096);
}

struct RouteCase {
  bool ipv6;
  bool vlan;
};

void PrintTo(const RouteCase& c, std::ostream* os) {
  *os << (c.ipv6 ? "IPv6" : "IPv4") << (c.vlan ? "+802.1Q" : "");
}

class EveryOpcode : public ::testing::TestWithParam<RouteCase> {};

// Every opcode, built and parsed back, over IPv4, IPv6 and 802.1Q: every
// header field and every payload byte survives.
TEST_P(EveryOpcode, RoundTripsThroughBuilderAndParser) {
  const RoceRoute route = test::sample_route(GetParam().ipv6, GetParam().vlan);
  std::mt19937_64 rng(42);
  for (std::uint8_t op : test::all_opcodes()) {
    SCOPED_TRACE(std::string(opcode_info(op).name));
    for (int rep = 0; rep < 8; ++rep) {
      const test::SamplePacket s = test::sample_packet(op, rng);
      const std::vector<std::uint8_t> frame = test::build_frame(route, s, 0x4321);
      RocePacket p;
      ASSERT_EQ(parse_roce_frame(frame, p), DropReason::kNone);
      const OpcodeInfo& info = *p.info;
      EXPECT_EQ(&info, &opcode_info(op));
      EXPECT_EQ(p.has_vlan, route.vlan);
      if (route.vlan) {
        EXPECT_EQ(p.vlan.pcp, route.pcp);
      }
      EXPECT_EQ(p.ipv6, route.ipv6());
      EXPECT_EQ(p.src_ip, route.src_ip);
      EXPECT_EQ(p.dst_ip, route.dst_ip);
      EXPECT_EQ(p.dscp, route.dscp);
      EXPECT_EQ(p.ecn, route.ecn);
      EXPECT_EQ(p.hop_limit, route.hop_limit);
      EXPECT_EQ(p.udp_sport, route.udp_sport);
      if (route.ipv6()) {
        EXPECT_EQ(p.flow_label, route.flow_label);
      } else {
        EXPECT_EQ(p.ip_id, 0x4321);
      }

      EXPECT_EQ(p.bth.opcode, op);
      EXPECT_EQ(p.bth.se, s.bth.se);
      EXPECT_EQ(p.bth.ack_req, s.bth.ack_req);
      EXPECT_EQ(p.bth.becn, s.bth.becn);
      EXPECT_EQ(p.bth.dest_qp, s.bth.dest_qp);
      EXPECT_EQ(p.bth.psn, s.bth.psn);
      EXPECT_EQ(p.bth.pad_count, pad_count(s.payload.size()));

      if (info.has(ExtHeader::kDeth)) {
        EXPECT_EQ(p.ext.deth.qkey, s.ext.deth.qkey);
        EXPECT_EQ(p.ext.deth.src_qp, s.ext.deth.src_qp);
      }
      if (info.has(ExtHeader::kXrcEth)) {
        EXPECT_EQ(p.ext.xrc_srqn, s.ext.xrc_srqn);
      }
      if (info.has(ExtHeader::kReth)) {
        EXPECT_EQ(p.ext.reth.va, s.ext.reth.va);
        EXPECT_EQ(p.ext.reth.rkey, s.ext.reth.rkey);
        EXPECT_EQ(p.ext.reth.dma_length, s.ext.reth.dma_length);
      }
      if (info.has(ExtHeader::kAtomicEth)) {
        EXPECT_EQ(p.ext.atomic_eth.va, s.ext.atomic_eth.va);
        EXPECT_EQ(p.ext.atomic_eth.swap_add, s.ext.atomic_eth.swap_add);
        EXPECT_EQ(p.ext.atomic_eth.compare, s.ext.atomic_eth.compare);
      }
      if (info.has(ExtHeader::kAeth)) {
        EXPECT_EQ(p.ext.aeth.syndrome, s.ext.aeth.syndrome);
        EXPECT_EQ(p.ext.aeth.msn, s.ext.aeth.msn);
      }
      if (info.has(ExtHeader::kAtomicAckEth)) {
        EXPECT_EQ(p.ext.atomic_ack_eth.orig_remote_data, s.ext.atomic_ack_eth.orig_remote_data);
      }
      if (info.has(ExtHeader::kImmDt)) {
        EXPECT_EQ(p.ext.imm_data, s.ext.imm_data);
      }
      if (info.has(ExtHeader::kIeth)) {
        EXPECT_EQ(p.ext.ieth_rkey, s.ext.ieth_rkey);
      }

      ASSERT_EQ(p.payload.size(), s.payload.size());
      EXPECT_TRUE(std::equal(p.payload.begin(), p.payload.end(), s.payload.begin()));
      EXPECT_EQ(frame.size(),
                route.bth_offset() + info.length + s.payload.size() + p.bth.pad_count + 4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Routes, EveryOpcode,
                         ::testing::Values(RouteCase{false, false}, RouteCase{true, false},
                                           RouteCase{false, true}, RouteCase{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.ipv6 ? "Ipv6" : "Ipv4") +
                                  (info.param.vlan ? "Vlan" : "");
                         });

TEST(Opcode, TableAgreesWithTheSpecForEveryKnownOpcode) {
  // 23 RC + 12 UC + 2 UD + CNP + 23 XRC + uroce's SELECTIVE_ACKNOWLEDGE.
  EXPECT_EQ(test::all_opcodes().size(), 62u);
  for (std::uint8_t op : test::all_opcodes()) {
    const OpcodeInfo& i = opcode_info(op);
    SCOPED_TRACE(std::string(i.name));
    const Transport t = transport_of(op);
    EXPECT_TRUE(t == Transport::kRc || t == Transport::kUc || t == Transport::kUd ||
                t == Transport::kCnp || t == Transport::kXrc || t == Transport::kManufacturer);
    if (t == Transport::kManufacturer) {
      // uroce's one: an acknowledgement with an AETH and a SACKETH.
      EXPECT_EQ(op, static_cast<std::uint8_t>(Opcode::kSelectiveAcknowledge));
      EXPECT_EQ(i.name, "SELECTIVE_ACKNOWLEDGE");
      EXPECT_TRUE(i.is_response());
      EXPECT_EQ(i.offset_of(ExtHeader::kAeth), kBthSize);
      EXPECT_EQ(i.offset_of(ExtHeader::kSackEth), kBthSize + 4);
      EXPECT_EQ(i.length, kBthSize + 4 + 32);
      continue;
    }
    EXPECT_EQ(i.name.substr(0, 3), t == Transport::kRc    ? "RC_"
                                   : t == Transport::kUc  ? "UC_"
                                   : t == Transport::kUd  ? "UD_"
                                   : t == Transport::kXrc ? "XRC"
                                                          : "CNP");
    // An XRC request names its SRQ in an XRCETH right after the BTH, and
    // is otherwise RC's request (IBA A14.8.2).
    if (t == Transport::kXrc && i.is_request()) {
      EXPECT_EQ(i.offset_of(ExtHeader::kXrcEth), kBthSize);
      EXPECT_EQ(i.length, opcode_info(static_cast<std::uint8_t>(op & 0x1F)).length + 4);
    }
    // Responses carry an AETH exactly where IBA puts one: all but the
    // middle read response.
    if (i.is_response()) {
      EXPECT_EQ(i.has(ExtHeader::kAeth), i.position != Position::kMiddle);
    }
    if (i.is_atomic()) {
      EXPECT_EQ(i.length, t == Transport::kXrc ? 44 : 40);
    }
  }
}

}  // namespace
}  // namespace uroce::wire
