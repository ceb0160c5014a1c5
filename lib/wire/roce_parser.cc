/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/roce_parser.h"

#include "wire/classify.h"
#include "wire/icrc.h"

namespace uroce::wire {
namespace {

// Parses the IP and UDP headers at `l3`; returns the reason to drop or
// kNone, with `l4_end` set to where the IP packet ends in the frame.
DropReason parse_ipv4(ConstBytes frame, std::size_t l3, RocePacket& pkt, std::size_t& l3_end) {
  if (frame.size() < l3 + Ipv4Hdr::kMinSize) return DropReason::kShortFrame;
  const std::uint8_t* p = frame.data() + l3;
  if ((p[0] >> 4) != 4) return DropReason::kBadIpVersion;
  const Ipv4Hdr ip = Ipv4Hdr::parse(p);
  if (ip.ihl != 5) return DropReason::kBadIpHeaderLength;
  if (ip.total_length < Ipv4Hdr::kMinSize || l3 + ip.total_length > frame.size())
    return DropReason::kBadIpLength;
  if (inet_checksum(p, Ipv4Hdr::kMinSize) != 0) return DropReason::kBadIpChecksum;
  if (ip.mf || ip.frag_offset != 0) return DropReason::kIpFragment;
  if (ip.protocol != ip_proto::kUdp) return DropReason::kNotUdp;
  pkt.ipv6 = false;
  pkt.src_ip = IpAddr::from_v4(ip.src);
  pkt.dst_ip = IpAddr::from_v4(ip.dst);
  pkt.dscp = ip.dscp;
  pkt.ecn = ip.ecn;
  pkt.hop_limit = ip.ttl;
  pkt.ip_id = ip.id;
  l3_end = l3 + ip.total_length;
  return DropReason::kNone;
}

DropReason parse_ipv6(ConstBytes frame, std::size_t l3, RocePacket& pkt, std::size_t& l3_end) {
  if (frame.size() < l3 + Ipv6Hdr::kSize) return DropReason::kShortFrame;
  const std::uint8_t* p = frame.data() + l3;
  if ((p[0] >> 4) != 6) return DropReason::kBadIpVersion;
  const Ipv6Hdr ip = Ipv6Hdr::parse(p);
  if (l3 + Ipv6Hdr::kSize + ip.payload_length > frame.size()) return DropReason::kBadIpLength;
  // RoCEv2 puts UDP right after the fixed header; extension headers
  // (fragments among them) are not RoCE.
  if (ip.next_header != ip_proto::kUdp) return DropReason::kNotUdp;
  pkt.ipv6 = true;
  pkt.src_ip = ip.src;
  pkt.dst_ip = ip.dst;
  pkt.dscp = ip.traffic_class >> 2;
  pkt.ecn = static_cast<Ecn>(ip.traffic_class & 3);
  pkt.hop_limit = ip.hop_limit;
  pkt.flow_label = ip.flow_label;
  l3_end = l3 + Ipv6Hdr::kSize + ip.payload_length;
  return DropReason::kNone;
}

// Pad rules (IBA 9.2, rxe_resp_check_length): only packets that end a
// message may pad, and never by more than their payload.
bool pad_is_valid(const OpcodeInfo& info, std::uint8_t pad, std::size_t payload_with_pad) {
  if (pad == 0) return true;
  if (!info.has_payload || !info.ends_message()) return false;
  return pad <= payload_with_pad;
}

}  // namespace

DropReason parse_roce_frame(ConstBytes frame, RocePacket& pkt) {
  return parse_roce_frame(frame, classify(frame), pkt);
}

DropReason parse_roce_frame(ConstBytes frame, const FrameClass& c, RocePacket& pkt) {
  if (!c.valid()) return DropReason::kShortFrame;
  const std::size_t l3 = c.l3_offset();
  const std::uint16_t type = c.ether_type;
  pkt.has_vlan = c.tagged;
  if (pkt.has_vlan) pkt.vlan = VlanTag::parse(frame.data() + EthHdr::kSize);

  // The frame may carry Ethernet padding past the IP packet (short frames
  // are padded to 60 bytes): everything below uses the IP length.
  std::size_t l3_end = 0;
  DropReason r;
  if (type == ether_type::kIpv4) {
    r = parse_ipv4(frame, l3, pkt, l3_end);
  } else if (type == ether_type::kIpv6) {
    r = parse_ipv6(frame, l3, pkt, l3_end);
  } else {
    return DropReason::kNotIp;
  }
  if (r != DropReason::kNone) return r;
  pkt.l3_offset = l3;

  const std::size_t udp_off = l3 + (pkt.ipv6 ? Ipv6Hdr::kSize : Ipv4Hdr::kMinSize);
  if (l3_end < udp_off + UdpHdr::kSize) return DropReason::kShortFrame;
  const UdpHdr udp = UdpHdr::parse(frame.data() + udp_off);
  if (udp.dst_port != kRoceV2Port) return DropReason::kNotRoceV2Port;
  if (udp.length != l3_end - udp_off) return DropReason::kBadUdpLength;
  pkt.udp_sport = udp.src_port;

  const std::size_t bth_off = udp_off + UdpHdr::kSize;
  if (l3_end < bth_off + kBthSize + kIcrcSize) return DropReason::kShortFrame;
  const std::uint8_t* bth = frame.data() + bth_off;
  pkt.bth = Bth::parse(bth);
  if (pkt.bth.tver != 0) return DropReason::kBadTver;
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  if (!info.valid()) return DropReason::kUnknownOpcode;
  pkt.info = &info;
  pkt.bth_offset = bth_off;

  const std::size_t icrc_off = l3_end - kIcrcSize;
  if (icrc_off < bth_off + info.length) return DropReason::kBadLength;
  const std::size_t payload_with_pad = icrc_off - (bth_off + info.length);
  if (payload_with_pad != 0 && !info.has_payload) return DropReason::kBadLength;
  if (!pad_is_valid(info, pkt.bth.pad_count, payload_with_pad)) return DropReason::kBadPad;

  pkt.icrc = icrc_load(frame.data() + icrc_off);
  if (icrc_compute(frame.subspan(l3, icrc_off - l3)) != pkt.icrc) return DropReason::kBadIcrc;

  pkt.ext = ExtHeaders::parse(info, bth);
  pkt.frame = frame;
  pkt.payload = frame.subspan(bth_off + info.length, payload_with_pad - pkt.bth.pad_count);
  return DropReason::kNone;
}

}  // namespace uroce::wire
