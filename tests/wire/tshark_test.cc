/* SPDX-License-Identifier: BSD-3-Clause */
// Wireshark cross-check: frames built by lib/wire, decoded by tshark, must
// show exactly the fields the builder wrote, and none may be malformed.

#include "support/tshark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "support/icrc_check.h"
#include "support/pcap.h"
#include "support/wire_samples.h"
#include "wire/arp.h"
#include "wire/icrc.h"
#include "wire/mac_control.h"
#include "wire/ndp.h"

namespace uroce::wire {
namespace {

using test::tshark_number;

// One expectation: a tshark field and the value the builder wrote.
struct Expect {
  std::string field;
  unsigned long long value;
};

struct Case {
  test::Frame frame;
  std::string what;
  std::vector<Expect> expects;
};

std::vector<Expect> roce_expects(const RoceRoute& route, const test::SamplePacket& s,
                                 const test::Frame& frame) {
  const OpcodeInfo& info = opcode_info(s.bth.opcode);
  std::vector<Expect> e = {
      {"infiniband.bth.opcode", s.bth.opcode},
      {"infiniband.bth.se", s.bth.se},
      {"infiniband.bth.m", s.bth.mig_req},
      {"infiniband.bth.padcnt", pad_count(s.payload.size())},
      {"infiniband.bth.tver", 0},
      {"infiniband.bth.p_key", s.bth.pkey},
      {"infiniband.bth.destqp", s.bth.dest_qp},
      {"infiniband.bth.a", s.bth.ack_req},
      // uroce's selective-repeat offer: the top bit of the seven after A.
      {"infiniband.bth.reserved7", s.bth.selective_repeat ? 0x40u : 0u},
      {"infiniband.bth.psn", s.bth.psn.value()},
      {"udp.srcport", route.udp_sport},
      {"udp.dstport", kRoceV2Port},
  };
  // Wireshark shows the ICRC's wire bytes read big-endian (it does not
  // check them: the independent check does, below). Wireshark 4.0 does
  // not know the CNP opcode and shows its last 20 bytes as vendor data
  // instead; nor the XRC opcodes (0xA0-0xB7), of which it decodes the BTH
  // alone: their XRCETH and the headers after it are checked by lib/wire's
  // parser and the independent ICRC check, not here. uroce's own
  // SELECTIVE_ACKNOWLEDGE (0xE0), a manufacturer's opcode, it shows as a
  // BTH and vendor data, as a CNP.
  const bool known_to_tshark = transport_of(s.bth.opcode) != Transport::kXrc &&
                               transport_of(s.bth.opcode) != Transport::kManufacturer;
  if (info.operation != Operation::kCnp && info.operation != Operation::kSelectiveAcknowledge &&
      known_to_tshark) {
    e.push_back({"infiniband.invariant.crc",
                 __builtin_bswap32(icrc_load(frame.data() + frame.size() - 4))});
  }
  if (route.ipv6()) {
    e.push_back(
        {"ipv6.tclass", static_cast<unsigned>(route.dscp << 2 | static_cast<unsigned>(route.ecn))});
    e.push_back({"ipv6.flow", route.flow_label});
    e.push_back({"ipv6.hlim", route.hop_limit});
    e.push_back({"udp.checksum.status", 1});  // verified good
  } else {
    e.push_back({"ip.dsfield.dscp", route.dscp});
    e.push_back({"ip.dsfield.ecn", static_cast<unsigned>(route.ecn)});
    e.push_back({"ip.flags.df", 1});
    e.push_back({"ip.ttl", route.hop_limit});
  }
  if (route.vlan) e.push_back({"vlan.priority", route.pcp});
  if (!known_to_tshark) return e;
  if (info.has(ExtHeader::kReth)) {
    e.push_back({"infiniband.reth.va", s.ext.reth.va});
    e.push_back({"infiniband.reth.r_key", s.ext.reth.rkey});
    e.push_back({"infiniband.reth.dmalen", s.ext.reth.dma_length});
  }
  if (info.has(ExtHeader::kAtomicEth)) {
    e.push_back({"infiniband.atomiceth.swapdt", s.ext.atomic_eth.swap_add});
    e.push_back({"infiniband.atomiceth.cmpdt", s.ext.atomic_eth.compare});
  }
  if (info.has(ExtHeader::kAeth)) {
    e.push_back({"infiniband.aeth.syndrome", s.ext.aeth.syndrome.encode()});
    e.push_back({"infiniband.aeth.msn", s.ext.aeth.msn});
  }
  if (info.has(ExtHeader::kAtomicAckEth))
    e.push_back({"infiniband.atomicacketh.origremdt", s.ext.atomic_ack_eth.orig_remote_data});
  if (info.has(ExtHeader::kDeth)) {
    e.push_back({"infiniband.deth.q_key", s.ext.deth.qkey});
    e.push_back({"infiniband.deth.srcqp", s.ext.deth.src_qp});
  }
  return e;
}

std::vector<Case> build_cases() {
  std::vector<Case> cases;
  std::mt19937_64 rng(2024);
  const RoceRoute routes[] = {test::sample_route(false), test::sample_route(true),
                              test::sample_route(false, true)};
  for (const RoceRoute& route : routes) {
    for (std::uint8_t op : test::all_opcodes()) {
      test::SamplePacket s = test::sample_packet(op, rng);
      // Give AETHs each kind of syndrome in turn.
      const std::uint8_t kinds[] = {0x1F, 0x60, 0x62, 0x2E, 0x05};
      s.ext.aeth.syndrome = AethSyndrome::decode(kinds[op % 5]);
      // Half the RC requests offer selective repeat.
      s.bth.selective_repeat = opcode_info(op).is_request() && (op & 1) != 0;
      Case c;
      c.frame = test::build_frame(route, s);
      c.what = std::string(opcode_info(op).name) + (route.ipv6() ? " ipv6" : " ipv4") +
               (route.vlan ? " vlan" : "");
      c.expects = roce_expects(route, s, c.frame);
      cases.push_back(std::move(c));
    }
  }

  const MacAddr mac = {{0x02, 0, 0, 0, 0, 0x10}};
  const std::array<std::uint16_t, 8> times = {0, 1, 0, 0xFFFF, 0, 0, 0x8000, 0};
  Case pfc{test::Frame(60), "PFC", {{"macc.opcode", 0x0101}, {"macc.cbfc.enbv", 0x4A}}};
  build_pfc_frame(pfc.frame, mac, 0x4A, times);
  for (int i = 0; i < 8; ++i)
    pfc.expects.push_back({"macc.cbfc.pause_time.c" + std::to_string(i), times[i]});
  cases.push_back(pfc);

  Case pause{test::Frame(60), "PAUSE", {{"macc.opcode", 1}, {"macc.pause_time", 0x1234}}};
  build_pause_frame(pause.frame, mac, 0x1234);
  cases.push_back(pause);

  Case arp{test::Frame(60), "ARP request", {{"arp.opcode", 1}}};
  build_arp_request(arp.frame, mac, 0x0A000001, 0x0A000002);
  cases.push_back(arp);
  ArpPacket req;
  if (!parse_arp_frame(arp.frame, req)) throw std::logic_error("ARP request does not parse");
  Case reply{test::Frame(60), "ARP reply", {{"arp.opcode", 2}}};
  build_arp_reply(reply.frame, req, {{0x02, 0, 0, 0, 0, 0x20}}, 0x0A000002);
  cases.push_back(reply);

  // IPv6 neighbour discovery; checksum status 1 is Wireshark's "Good".
  const IpAddr us = *IpAddr::parse("fd77::1"), peer = *IpAddr::parse("fd77::2");
  Case ns{test::Frame(86),
          "Neighbor Solicitation",
          {{"icmpv6.type", 135}, {"icmpv6.checksum.status", 1}, {"ipv6.hlim", 255}}};
  build_neighbor_solicitation(ns.frame, mac, us, peer);
  cases.push_back(ns);
  NdpPacket sol;
  if (!parse_ndp_frame(ns.frame, sol)) throw std::logic_error("NS does not parse");
  Case na{test::Frame(86),
          "Neighbor Advertisement",
          {{"icmpv6.type", 136}, {"icmpv6.checksum.status", 1}, {"icmpv6.nd.na.flag.s", 1}}};
  build_neighbor_advertisement(na.frame, sol, {{0x02, 0, 0, 0, 0, 0x20}}, peer);
  cases.push_back(na);
  return cases;
}

std::size_t roce_cases(const std::vector<Case>& cases) {
  return static_cast<std::size_t>(std::count_if(cases.begin(), cases.end(), [](const Case& c) {
    return std::any_of(c.expects.begin(), c.expects.end(),
                       [](const Expect& e) { return e.field == "infiniband.bth.opcode"; });
  }));
}

TEST(Tshark, DecodesEveryFieldTheBuilderWroteAndNothingIsMalformed) {
  const std::vector<Case> cases = build_cases();
  test::TempDir dir;
  const std::string pcap = dir.path() + "/wire.pcap";
  std::vector<test::Frame> frames;
  for (const Case& c : cases) frames.push_back(c.frame);
  test::write_pcap(pcap, frames);

  std::vector<std::string> fields = {"frame.number", "frame.protocols", "_ws.malformed",
                                     "_ws.expert.severity", "_ws.expert.message"};
  for (const Case& c : cases) {
    for (const Expect& e : c.expects) {
      if (std::find(fields.begin(), fields.end(), e.field) == fields.end())
        fields.push_back(e.field);
    }
  }
  const auto decoded = test::tshark_decode(pcap, fields, {"udp.check_checksum:TRUE"});
  ASSERT_EQ(decoded.size(), cases.size());
  // tshark shows the ICRC field but does not check it: the independent
  // check does (tests/support/icrc_check.py).
  const auto icrc = test::independent_icrc_check(pcap);
  EXPECT_EQ(icrc.status, 0) << icrc.output;
  EXPECT_EQ(icrc.roce, roce_cases(cases)) << icrc.output;
  EXPECT_EQ(icrc.bad, 0u) << icrc.output;

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const test::DecodedFrame& d = decoded[i];
    SCOPED_TRACE(c.what + " (frame " + std::to_string(i + 1) + ", " + d.at("frame.protocols") +
                 ")");
    EXPECT_EQ(d.at("_ws.malformed"), "");
    // Expert severity 0x00800000 is an error; warnings and notes are allowed.
    EXPECT_NE(d.at("_ws.expert.severity"), "8388608") << d.at("_ws.expert.message");
    for (const Expect& e : c.expects) {
      const std::string& shown = d.at(e.field);
      ASSERT_FALSE(shown.empty()) << e.field << " not decoded";
      EXPECT_EQ(tshark_number(shown), e.value) << e.field << " shown as " << shown;
    }
  }
}

// Immediate data and IETH are byte fields in Wireshark: check their bytes.
TEST(Tshark, ShowsImmediateDataAndInvalidateKeyBytes) {
  std::mt19937_64 rng(5);
  const RoceRoute route = test::sample_route(false);
  test::SamplePacket imm =
      test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcSendOnlyWithImmediate), rng);
  const std::uint8_t imm_bytes[4] = {0xDE, 0xAD, 0xBE, 0xEF};
  std::memcpy(&imm.ext.imm_data, imm_bytes, 4);
  test::SamplePacket inv =
      test::sample_packet(static_cast<std::uint8_t>(Opcode::kRcSendOnlyWithInvalidate), rng);
  inv.ext.ieth_rkey = 0x01020304;

  test::TempDir dir;
  const std::string pcap = dir.path() + "/imm.pcap";
  test::write_pcap(pcap, {test::build_frame(route, imm), test::build_frame(route, inv)});
  const auto d = test::tshark_decode(pcap, {"infiniband.immdt", "infiniband.ieth"});
  ASSERT_EQ(d.size(), 2u);
  auto bytes = [](std::string s) {
    std::erase(s, ':');
    return s;
  };
  EXPECT_EQ(bytes(d[0].at("infiniband.immdt")), "deadbeef");
  EXPECT_EQ(bytes(d[1].at("infiniband.ieth")), "01020304");
}

}  // namespace
}  // namespace uroce::wire
