/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/wire_samples.h"

#include <stdexcept>

namespace uroce::test {

using namespace uroce::wire;

RoceRoute sample_route(bool ipv6, bool vlan) {
  RoceRoute r;
  r.src_mac = {{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
  r.dst_mac = {{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
  r.vlan = vlan;
  r.pcp = 3;
  r.vid = vlan ? 100 : 0;
  if (ipv6) {
    r.src_ip = *IpAddr::parse("fd00::1");
    r.dst_ip = *IpAddr::parse("fd00::2");
    r.flow_label = 0xABCDE;
  } else {
    r.src_ip = *IpAddr::parse("10.0.0.1");
    r.dst_ip = *IpAddr::parse("10.0.0.2");
  }
  r.dscp = 26;
  r.ecn = Ecn::kEct0;
  r.hop_limit = 64;
  r.udp_sport = roce_udp_sport(0x11, 0x22);
  return r;
}

SamplePacket sample_packet(std::uint8_t opcode, std::mt19937_64& rng) {
  const OpcodeInfo& info = opcode_info(opcode);
  if (!info.valid()) throw std::invalid_argument("sample_packet: unknown opcode");
  auto u32 = [&] { return static_cast<std::uint32_t>(rng()); };
  SamplePacket s;
  s.bth.opcode = opcode;
  s.bth.se = info.ends_message() && (rng() & 1);
  s.bth.pkey = 0xFFFF;
  s.bth.dest_qp = u32() & 0xFFFFFF;
  s.bth.ack_req = info.is_request() && (rng() & 1);
  s.bth.psn = Psn(u32());
  if (info.operation == Operation::kCnp) {
    s.bth.becn = true;
    s.bth.psn = Psn(0);
  }

  ExtHeaders& e = s.ext;
  e.deth = {u32(), u32() & 0xFFFFFF};
  e.reth = {rng(), u32(), u32() & 0x7FFFFFFF};
  e.atomic_eth = {rng() & ~std::uint64_t{7}, u32(), rng(), rng()};
  e.aeth = {AethSyndrome::ack(), u32() & 0xFFFFFF};
  e.atomic_ack_eth = {rng()};
  e.imm_data = u32();
  e.ieth_rkey = u32();
  // From the bytes already drawn, so that adding XRC left the samples of
  // every other opcode (and the committed fuzz seeds) as they were.
  e.xrc_srqn = (e.ieth_rkey ^ e.imm_data) & 0xFFFFFF;

  if (info.has_payload) {
    const bool may_pad = info.ends_message();
    std::size_t len = 1 + rng() % 300;
    if (!may_pad) len = (len + 3) & ~std::size_t{3};
    s.payload.resize(len);
    // Payload that no ULP heuristic dissector mistakes for its own.
    for (std::size_t i = 0; i < len; ++i) s.payload[i] = static_cast<std::uint8_t>(0xA5 ^ i);
  }
  return s;
}

std::vector<std::uint8_t> build_frame(const RoceRoute& route, const SamplePacket& pkt,
                                      std::uint16_t ip_id) {
  std::vector<std::uint8_t> frame(
      roce_frame_length(route, opcode_info(pkt.bth.opcode), pkt.payload.size()));
  if (build_roce_frame(frame, route, pkt.bth, pkt.ext, pkt.payload, ip_id) != frame.size())
    throw std::logic_error("build_frame: builder refused a sample");
  return frame;
}

std::vector<std::uint8_t> all_opcodes() {
  std::vector<std::uint8_t> ops;
  for (unsigned op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<std::uint8_t>(op)).valid())
      ops.push_back(static_cast<std::uint8_t>(op));
  }
  return ops;
}

}  // namespace uroce::test
