/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/icrc.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "support/icrc_check.h"
#include "support/pcap.h"
#include "support/tshark.h"
#include "support/wire_samples.h"
#include "wire/crc32.h"
#include "wire/crc32_linear.h"
#include "wire/roce_parser.h"

namespace uroce::wire {
namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// An independent reference: bitwise-table CRC-32 (IEEE, reflected) and the
// ICRC mask written out from IBA Annex A17.3.3 field by field.
std::uint32_t reference_crc32(const std::vector<std::uint8_t>& data) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320 ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFF;
  for (std::uint8_t b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::uint32_t reference_icrc(const std::vector<std::uint8_t>& frame, std::size_t l3) {
  std::vector<std::uint8_t> buf(8, 0xFF);
  for (std::size_t i = l3; i + 4 < frame.size(); ++i) buf.push_back(frame[i]);
  std::uint8_t* ip = buf.data() + 8;
  std::size_t udp;
  if ((ip[0] >> 4) == 4) {
    ip[1] = 0xFF;            // type of service
    ip[8] = 0xFF;            // time to live
    ip[10] = ip[11] = 0xFF;  // header checksum
    udp = 20;
  } else {
    ip[0] |= 0x0F;                 // traffic class, high nibble
    ip[1] = ip[2] = ip[3] = 0xFF;  // traffic class, low nibble; flow label
    ip[7] = 0xFF;                  // hop limit
    udp = 40;
  }
  ip[udp + 6] = ip[udp + 7] = 0xFF;  // UDP checksum
  ip[udp + 8 + 4] = 0xFF;            // BTH: FECN, BECN, resv6
  return reference_crc32(buf);
}

TEST(Crc32, IsZlibsCrc32AndChains) {
  const std::string s = "123456789";
  const ConstBytes all(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  EXPECT_EQ(crc32(0, all), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32(crc32(0, all.first(4)), all.subspan(4)), 0xCBF43926u);
  EXPECT_EQ(crc32(0, {}), 0u);
}

// Vector 1: a CNP sent by a ConnectX-4 Lx NIC (scapy's roce.uts).
TEST(Icrc, MatchesACnpCapturedFromAConnectX4Lx) {
  const auto frame = from_hex(
      "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100"
      "ffff400001180000000000000000000000000000000000000000"
      "82fd002a");
  ASSERT_EQ(frame.size(), 74u);
  EXPECT_EQ(icrc_compute(ConstBytes(frame).subspan(14, frame.size() - 14 - 4)),
            icrc_load(frame.data() + 70));
  RocePacket p;
  ASSERT_EQ(parse_roce_frame(frame, p), DropReason::kNone);
  EXPECT_EQ(p.bth.opcode, 0x81);
  EXPECT_TRUE(p.bth.becn);
  EXPECT_EQ(p.bth.dest_qp, 0x0118u);
  EXPECT_EQ(p.dscp, 48);
}

// Vector 2: scapy's UC SEND_ONLY example (M=1, pad 2).
TEST(Icrc, MatchesScapysUcSendOnlyExample) {
  RoceRoute r;
  r.src_ip = r.dst_ip = *IpAddr::parse("192.168.0.7");
  r.ecn = Ecn::kEct1;  // TOS 0x01
  r.udp_sport = 49152;
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kUcSendOnly);
  bth.mig_req = true;
  bth.dest_qp = 211;
  bth.psn = Psn(13571856);
  const std::string hex = "4630818be28935d90e9a95505401be885e50";
  const auto pl = from_hex(hex);
  ASSERT_EQ(pl.size(), 18u);
  std::vector<std::uint8_t> frame(roce_frame_length(r, opcode_info(bth.opcode), pl.size()));
  ASSERT_EQ(build_roce_frame(frame, r, bth, {}, pl, 1144), frame.size());
  EXPECT_EQ(frame.size() - 14, 64u) << "IP total length of the example";
  const auto icrc = from_hex("78f353f3");
  EXPECT_TRUE(std::equal(icrc.begin(), icrc.end(), frame.end() - 4));
}

// Vector 3: computed with zlib.crc32 and checked against Wireshark's display.
TEST(Icrc, MatchesTheLocalRcSendOnlyVector) {
  RoceRoute r;
  r.src_ip = *IpAddr::parse("10.0.0.1");
  r.dst_ip = *IpAddr::parse("10.0.0.2");
  r.ecn = Ecn::kEct0;  // TOS 0x02
  r.udp_sport = 0xC123;
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kRcSendOnly);
  bth.dest_qp = 0x12;
  bth.ack_req = true;
  bth.psn = Psn(0xABCD);
  const std::string text = "hello RoCE!!";
  std::vector<std::uint8_t> frame(roce_frame_length(r, opcode_info(bth.opcode), text.size()));
  ASSERT_EQ(
      build_roce_frame(frame, r, bth, {},
                       ConstBytes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
                       0x1234),
      frame.size());
  EXPECT_EQ(icrc_load(frame.data() + frame.size() - 4), 0x08B992B5u);
  const std::uint8_t wire[4] = {0xb5, 0x92, 0xb9, 0x08};
  EXPECT_TRUE(std::equal(wire, wire + 4, frame.end() - 4));
}

// Every packet Linux rxe sent in the capture (RC SEND first/middle/last
// over IPv4, RC SEND_ONLY over IPv6, UD SEND_ONLY over IPv4) parses and
// passes ICRC.
TEST(Icrc, EveryPacketRxeSentPasses) {
  const auto frames = test::read_pcap(UROCE_TESTDATA_DIR "/rxe-send-rc-ud-ipv4-ipv6.pcap");
  ASSERT_EQ(frames.size(), 66u);
  int ipv6 = 0, ud = 0;
  for (const auto& f : frames) {
    RocePacket p;
    ASSERT_EQ(parse_roce_frame(f, p), DropReason::kNone);
    EXPECT_EQ(reference_icrc(f, p.l3_offset), p.icrc);
    ipv6 += p.ipv6;
    ud += transport_of(p.bth.opcode) == Transport::kUd;
  }
  EXPECT_EQ(ipv6, 5);
  EXPECT_EQ(ud, 1);
}

// Random packets of every opcode: the library agrees with the reference,
// whole or split into any chain of segments.
TEST(Icrc, AgreesWithTheReferenceOnRandomPacketsAndChains) {
  std::mt19937_64 rng(7);
  const auto ops = test::all_opcodes();
  for (int i = 0; i < 2000; ++i) {
    const bool v6 = rng() & 1;
    const RoceRoute route = test::sample_route(v6, rng() & 1);
    const auto frame = test::build_frame(route, test::sample_packet(ops[rng() % ops.size()], rng),
                                         static_cast<std::uint16_t>(rng()));
    const std::size_t l3 = route.l3_offset();
    const ConstBytes body = ConstBytes(frame).subspan(l3, frame.size() - l3 - 4);
    const std::uint32_t ref = reference_icrc(frame, l3);
    ASSERT_EQ(icrc_load(frame.data() + frame.size() - 4), ref);

    std::vector<ConstBytes> chain;
    std::size_t off = 0;
    while (off < body.size()) {
      const std::size_t n = std::min<std::size_t>(body.size() - off, rng() % 70);
      chain.push_back(body.subspan(off, n));  // zero-length segments included
      off += n;
    }
    ASSERT_EQ(icrc_compute(chain), ref) << "chain of " << chain.size();
  }
}

// A check written apart from lib/wire (tests/support/icrc_check.py: zlib
// and its own header walk) passes what rxe sent and what lib/wire builds,
// over IPv4, IPv6 and 802.1Q, fails every frame with one covered bit
// flipped, and passes frames whose masked fields a router rewrote.
TEST(Icrc, AnIndependentCheckAgreesWithRxeAndWithTheBuilder) {
  const auto rxe =
      test::independent_icrc_check(UROCE_TESTDATA_DIR "/rxe-send-rc-ud-ipv4-ipv6.pcap");
  EXPECT_EQ(rxe.status, 0) << rxe.output;
  EXPECT_EQ(rxe.roce, 66u) << rxe.output;
  EXPECT_EQ(rxe.bad, 0u);

  std::mt19937_64 rng(13);
  const auto ops = test::all_opcodes();
  std::vector<test::Frame> good, flipped, rewritten;
  for (int i = 0; i < 600; ++i) {
    const RoceRoute route = test::sample_route(i % 2, (i / 2) % 2);
    auto f = test::build_frame(route, test::sample_packet(ops[rng() % ops.size()], rng),
                               static_cast<std::uint16_t>(rng()));
    good.push_back(f);
    // One bit of the covered part from the UDP header on, or of the ICRC
    // (not of the destination port, which makes the frame not RoCEv2).
    const std::size_t udp = route.l3_offset() + (route.ipv6() ? 40 : 20);
    auto g = f;
    std::size_t at;
    do {
      at = udp + rng() % (f.size() - udp);
    } while (at == udp + 2 || at == udp + 3 || at == udp + 6 || at == udp + 7 || at == udp + 8 + 4);
    g[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    flipped.push_back(g);
    // What a router may change: DSCP/ECN, TTL or hop limit, FECN/BECN.
    auto h = f;
    const std::size_t l3 = route.l3_offset();
    if (route.ipv6()) {
      h[l3] ^= 0x0F;  // traffic class
      h[l3 + 7] = static_cast<std::uint8_t>(rng());
    } else {
      h[l3 + 1] = static_cast<std::uint8_t>(rng());
      h[l3 + 8] = static_cast<std::uint8_t>(rng());
    }
    h[udp + 8 + 4] ^= 0xC0;
    rewritten.push_back(h);
  }
  test::TempDir dir;
  for (auto [name, set, bad] :
       {std::tuple{"good", &good, std::size_t{0}}, std::tuple{"flipped", &flipped, good.size()},
        std::tuple{"rewritten", &rewritten, std::size_t{0}}}) {
    const std::string path = dir.path() + "/" + name + ".pcap";
    test::write_pcap(path, *set);
    const auto r = test::independent_icrc_check(path);
    EXPECT_EQ(r.roce, set->size()) << name << ": " << r.output.substr(0, 2000);
    EXPECT_EQ(r.bad, bad) << name << ": " << r.output.substr(0, 2000);
  }
}

// Routers may rewrite DSCP/ECN, TTL and FECN/BECN (and fix the IP
// checksum); the ICRC must survive that, and nothing else.
TEST(Icrc, CoversInvariantFieldsOnly) {
  std::mt19937_64 rng(11);
  const RoceRoute route = test::sample_route(false);
  const auto base = test::build_frame(
      route, test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcRdmaWriteOnly), rng));
  const std::size_t l3 = route.l3_offset();
  const std::size_t bth = route.bth_offset();

  auto reparse = [&](std::vector<std::uint8_t> f) {
    // Recompute the IPv4 header checksum as a router would.
    store_be16(f.data() + l3 + 10, 0);
    store_be16(f.data() + l3 + 10, inet_checksum(f.data() + l3, 20));
    RocePacket p;
    return parse_roce_frame(f, p);
  };

  for (int i = 0; i < 200; ++i) {
    auto f = base;
    f[l3 + 1] = static_cast<std::uint8_t>(rng());          // DSCP and ECN (CE marking)
    f[l3 + 8] = static_cast<std::uint8_t>(rng());          // TTL
    f[bth + 4] = static_cast<std::uint8_t>(rng() & 0xC0);  // FECN/BECN
    EXPECT_EQ(reparse(f), DropReason::kNone);
  }
  auto id = base;
  id[l3 + 5] ^= 1;
  EXPECT_EQ(reparse(id), DropReason::kBadIcrc) << "IP ID is covered";
  auto sport = base;
  sport[l3 + 20 + 1] ^= 1;
  EXPECT_EQ(reparse(sport), DropReason::kBadIcrc) << "UDP source port is covered";
  auto psn = base;
  psn[bth + 11] ^= 1;
  EXPECT_EQ(reparse(psn), DropReason::kBadIcrc) << "PSN is covered";
  // The last payload byte, ahead of the 4-byte ICRC.
  ASSERT_GT(base.size(), bth + 12 + 16 + 4);
  auto data = base;
  data.at(data.size() - 5) ^= 0x80;
  EXPECT_EQ(reparse(data), DropReason::kBadIcrc) << "payload is covered";
}

TEST(Icrc, Ipv6TrafficClassFlowLabelAndHopLimitAreMasked) {
  std::mt19937_64 rng(12);
  const RoceRoute route = test::sample_route(true);
  auto f = test::build_frame(
      route, test::sample_packet(static_cast<std::uint8_t>(Opcode::kUdSendOnly), rng));
  const std::size_t l3 = route.l3_offset();
  f[l3] = 0x6F;  // traffic class high nibble
  f[l3 + 1] = 0xFF;
  f[l3 + 2] = 0x12;
  f[l3 + 7] = 1;
  RocePacket p;
  EXPECT_EQ(parse_roce_frame(f, p), DropReason::kNone);
  f[l3 + 8] ^= 1;  // source address is covered
  EXPECT_EQ(parse_roce_frame(f, p), DropReason::kBadIcrc);
}

// The one-buffer path (one CRC call and a correction for the masked bytes)
// agrees with the reference at every length up to 600 bytes and at one in
// seven beyond (every shift's table entry is a step from the one before),
// IPv4 and IPv6, for random bytes in every header field, masked or not;
// past its longest shift the general path takes over and agrees too.
TEST(Icrc, OneBufferAgreesWithTheReferenceAtEveryLength) {
  std::mt19937_64 rng(13);
  for (const bool v6 : {false, true}) {
    const std::size_t headers = (v6 ? 40 : 20) + 8 + 12;
    const std::size_t longest = headers + crc32_linear::kMaxShift;
    for (std::size_t len = headers; len <= longest + 8;
         len += (len < 600 || len + 8 >= longest) ? 1 : 7) {
      // A frame as reference_icrc takes it: 14 bytes ahead, 4 behind.
      std::vector<std::uint8_t> frame(14 + len + 4);
      for (auto& b : frame) b = static_cast<std::uint8_t>(rng());
      frame[14] = static_cast<std::uint8_t>((v6 ? 0x60 : 0x40) | (frame[14] & 0x0F));
      const ConstBytes packet = ConstBytes(frame).subspan(14, len);
      ASSERT_EQ(icrc_compute(packet), reference_icrc(frame, 14)) << (v6 ? "IPv6 " : "IPv4 ") << len;
    }
  }
}

// CRC-32 as a linear map: a difference anywhere, followed by zeros, moves
// the CRC by its own register shifted; the shift and the product agree
// with feeding zeros one by one.
TEST(Crc32Linear, ShiftAndMultiplyAgreeWithFeedingZeros) {
  std::mt19937_64 rng(14);
  for (int i = 0; i < 2000; ++i) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::size_t n = rng() % (crc32_linear::kMaxShift + 1);
    ASSERT_EQ(crc32_linear::shift(r, n), crc32_linear::feed_zeros(r, n)) << n;
    // x^(8n) is 1 (bit 31) fed n zero bytes.
    ASSERT_EQ(crc32_linear::multiply(r, crc32_linear::feed_zeros(0x80000000, n)),
              crc32_linear::feed_zeros(r, n));
  }
  for (int i = 0; i < 200; ++i) {
    std::vector<std::uint8_t> m(1 + rng() % 300), d(m.size(), 0);
    for (auto& b : m) b = static_cast<std::uint8_t>(rng());
    const std::size_t at = rng() % m.size();
    d[at] = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> md = m;
    md[at] ^= d[at];
    const std::uint32_t delta =
        crc32_linear::shift(crc32_linear::byte_at(0)[d[at]], m.size() - 1 - at);
    ASSERT_EQ(crc32(0x1234, md), crc32(0x1234, m) ^ delta);
    ASSERT_EQ(crc32_linear::byte_at(m.size() - 1 - at)[d[at]], delta);
  }
}

}  // namespace
}  // namespace uroce::wire
