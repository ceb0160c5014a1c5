/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/classify.h"

namespace uroce::wire {

FrameClass classify(ConstBytes frame) {
  FrameClass c;
  if (frame.size() < EthHdr::kSize) return c;
  std::uint16_t type = load_be16(frame.data() + 12);
  std::size_t l2 = EthHdr::kSize;
  if (type == ether_type::kVlan) {
    if (frame.size() < l2 + VlanTag::kSize) return c;
    const VlanTag tag = VlanTag::parse(frame.data() + l2);
    c.tagged = true;
    c.pcp = tag.pcp;
    c.vid = tag.vid;
    type = tag.ether_type;
    l2 += VlanTag::kSize;
  }
  c.l2_len = static_cast<std::uint8_t>(l2);
  c.ether_type = type;
  const std::uint8_t* ip = frame.data() + l2;
  const std::size_t left = frame.size() - l2;
  if (type == ether_type::kIpv4 && left >= Ipv4Hdr::kMinSize && (ip[0] >> 4) == 4) {
    const std::size_t ihl = std::size_t{ip[0] & 0x0Fu} * 4;
    if (ihl < Ipv4Hdr::kMinSize || left < ihl) return c;
    c.ip_version = 4;
    c.l3_len = static_cast<std::uint8_t>(ihl);
    c.tclass = ip[1];
    c.l4_proto = ip[9];
  } else if (type == ether_type::kIpv6 && left >= Ipv6Hdr::kSize && (ip[0] >> 4) == 6) {
    c.ip_version = 6;
    c.l3_len = Ipv6Hdr::kSize;
    // The traffic class straddles the first two bytes, 4 bits in each.
    c.tclass = static_cast<std::uint8_t>((ip[0] & 0x0F) << 4 | ip[1] >> 4);
    c.l4_proto = ip[6];
  }
  return c;
}

IpAddr FrameClass::ip_dst(ConstBytes frame) const {
  const std::uint8_t* ip = frame.data() + l2_len;
  return ip_version == 4 ? IpAddr::from_v4_bytes(ip + 16) : IpAddr::from_v6_bytes(ip + 24);
}

}  // namespace uroce::wire
