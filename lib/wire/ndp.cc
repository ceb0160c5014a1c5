/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/ndp.h"

#include <cstring>

#include "wire/classify.h"

namespace uroce::wire {

namespace {

constexpr std::size_t kIcmpLen = 32;  // type..checksum, flags, target, one 8-byte option
constexpr std::size_t kFrameLen = EthHdr::kSize + Ipv6Hdr::kSize + kIcmpLen;
constexpr std::uint8_t kOptSourceLinkAddr = 1;
constexpr std::uint8_t kOptTargetLinkAddr = 2;

// Ethernet + IPv6 + the ICMPv6 message (type, flags, target, option);
// fills in the checksum.
std::size_t build(Bytes out, const MacAddr& eth_dst, const MacAddr& eth_src, const IpAddr& src,
                  const IpAddr& dst, std::uint8_t type, std::uint32_t flags, const IpAddr& target,
                  std::uint8_t option, const MacAddr& option_mac) {
  if (out.size() < kFrameLen) return 0;
  std::uint8_t* p = out.data();
  EthHdr{eth_dst, eth_src, ether_type::kIpv6}.write(p);
  Ipv6Hdr ip;
  ip.payload_length = kIcmpLen;
  ip.next_header = ip_proto::kIcmpv6;
  ip.hop_limit = 255;  // RFC 4861: proves the sender is on the link
  ip.src = src;
  ip.dst = dst;
  ip.write(p + EthHdr::kSize);
  std::uint8_t* m = p + EthHdr::kSize + Ipv6Hdr::kSize;
  std::memset(m, 0, kIcmpLen);
  m[0] = type;
  store_be32(m + 4, flags);
  std::memcpy(m + 8, target.bytes.data(), 16);
  m[24] = option;
  m[25] = 1;  // length in units of 8 bytes
  std::memcpy(m + 26, option_mac.bytes.data(), 6);
  const ConstBytes seg(m, kIcmpLen);
  store_be16(m + 2, ip6_checksum(src, dst, ip_proto::kIcmpv6, std::span(&seg, 1)));
  return kFrameLen;
}

}  // namespace

IpAddr solicited_node(const IpAddr& ip) {
  IpAddr a;
  a.bytes = {0xFF,         0x02,         0,           0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF,
             ip.bytes[13], ip.bytes[14], ip.bytes[15]};
  return a;
}

MacAddr solicited_node_mac(const IpAddr& ip) {
  return {{0x33, 0x33, 0xFF, ip.bytes[13], ip.bytes[14], ip.bytes[15]}};
}

std::size_t build_neighbor_solicitation(Bytes out, const MacAddr& src_mac, const IpAddr& src_ip,
                                        const IpAddr& target) {
  return build(out, solicited_node_mac(target), src_mac, src_ip, solicited_node(target),
               icmpv6_type::kNeighborSolicitation, 0, target, kOptSourceLinkAddr, src_mac);
}

std::size_t build_neighbor_advertisement(Bytes out, const NdpPacket& ns, const MacAddr& our_mac,
                                         const IpAddr& our_ip) {
  // Solicited and Override set; to the solicitor, or to all nodes when it
  // had no address yet (RFC 4861 7.2.4).
  constexpr std::uint32_t kSolicited = 1u << 30, kOverride = 1u << 29;
  const bool unspecified = ns.src == IpAddr{};
  IpAddr all_nodes;
  all_nodes.bytes = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  const MacAddr dst_mac = unspecified ? MacAddr{{0x33, 0x33, 0, 0, 0, 1}}
                                      : (ns.has_link_addr ? ns.link_addr : ns.eth_src);
  return build(out, dst_mac, our_mac, our_ip, unspecified ? all_nodes : ns.src,
               icmpv6_type::kNeighborAdvertisement,
               unspecified ? kOverride : kSolicited | kOverride, our_ip, kOptTargetLinkAddr,
               our_mac);
}

bool parse_ndp_frame(ConstBytes frame, NdpPacket& out) {
  const FrameClass c = classify(frame);
  const std::size_t l3 = c.l3_offset();
  if (c.ip_version != 6 || frame.size() < l3 + Ipv6Hdr::kSize + 24) return false;
  const Ipv6Hdr ip = Ipv6Hdr::parse(frame.data() + l3);
  if (ip.next_header != ip_proto::kIcmpv6 || ip.hop_limit != 255) return false;
  const std::size_t len = ip.payload_length;
  if (len < 24 || frame.size() < l3 + Ipv6Hdr::kSize + len) return false;
  const std::uint8_t* m = frame.data() + l3 + Ipv6Hdr::kSize;
  if ((m[0] != icmpv6_type::kNeighborSolicitation && m[0] != icmpv6_type::kNeighborAdvertisement) ||
      m[1] != 0)
    return false;
  const ConstBytes seg(m, len);
  if (ip6_checksum(ip.src, ip.dst, ip_proto::kIcmpv6, std::span(&seg, 1)) != 0) return false;
  out = NdpPacket{};
  out.type = m[0];
  std::memcpy(out.eth_src.bytes.data(), frame.data() + 6, 6);
  out.src = ip.src;
  std::memcpy(out.target.bytes.data(), m + 8, 16);
  if (out.target.bytes[0] == 0xFF) return false;  // a multicast target is invalid
  // Options: type, length in 8-byte units, value.
  for (std::size_t off = 24; off + 8 <= len;) {
    const std::uint8_t opt = m[off];
    const std::size_t olen = std::size_t{m[off + 1]} * 8;
    if (olen == 0 || off + olen > len) return false;
    const bool wanted = out.type == icmpv6_type::kNeighborSolicitation ? opt == kOptSourceLinkAddr
                                                                       : opt == kOptTargetLinkAddr;
    if (wanted && olen >= 8) {
      std::memcpy(out.link_addr.bytes.data(), m + off + 2, 6);
      out.has_link_addr = true;
    }
    off += olen;
  }
  return true;
}

}  // namespace uroce::wire
