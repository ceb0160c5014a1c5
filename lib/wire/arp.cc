/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/arp.h"

#include <algorithm>
#include <cstring>

#include "wire/classify.h"

namespace uroce::wire {
namespace {

constexpr std::size_t kArpSize = 28;
constexpr std::uint16_t kHtypeEthernet = 1;

std::size_t build_arp(Bytes out, const MacAddr& eth_dst, const ArpPacket& arp) {
  if (out.size() < kMinFrameSize) return 0;
  std::uint8_t* p = out.data();
  std::memset(p, 0, kMinFrameSize);
  EthHdr{eth_dst, arp.sender_mac, ether_type::kArp}.write(p);
  p += EthHdr::kSize;
  store_be16(p, kHtypeEthernet);
  store_be16(p + 2, ether_type::kIpv4);
  p[4] = 6;
  p[5] = 4;
  store_be16(p + 6, static_cast<std::uint16_t>(arp.op));
  std::copy(arp.sender_mac.bytes.begin(), arp.sender_mac.bytes.end(), p + 8);
  store_be32(p + 14, arp.sender_ip);
  std::copy(arp.target_mac.bytes.begin(), arp.target_mac.bytes.end(), p + 18);
  store_be32(p + 24, arp.target_ip);
  return kMinFrameSize;
}

}  // namespace

std::size_t build_arp_request(Bytes out, const MacAddr& src_mac, std::uint32_t src_ip,
                              std::uint32_t target_ip) {
  return build_arp(out, MacAddr::broadcast(),
                   {ArpOp::kRequest, src_mac, src_ip, MacAddr{}, target_ip});
}

std::size_t build_arp_reply(Bytes out, const ArpPacket& request, const MacAddr& our_mac,
                            std::uint32_t our_ip) {
  return build_arp(out, request.sender_mac,
                   {ArpOp::kReply, our_mac, our_ip, request.sender_mac, request.sender_ip});
}

bool parse_arp_frame(ConstBytes frame, ArpPacket& out) {
  const FrameClass c = classify(frame);
  const std::size_t off = c.l2_len;
  if (!c.valid() || c.ether_type != ether_type::kArp || frame.size() < off + kArpSize)
    return false;
  const std::uint8_t* p = frame.data() + off;
  if (load_be16(p) != kHtypeEthernet || load_be16(p + 2) != ether_type::kIpv4 || p[4] != 6 ||
      p[5] != 4)
    return false;
  const std::uint16_t op = load_be16(p + 6);
  if (op != 1 && op != 2) return false;
  out.op = static_cast<ArpOp>(op);
  std::copy_n(p + 8, 6, out.sender_mac.bytes.begin());
  out.sender_ip = load_be32(p + 14);
  std::copy_n(p + 18, 6, out.target_mac.bytes.begin());
  out.target_ip = load_be32(p + 24);
  return true;
}

}  // namespace uroce::wire
