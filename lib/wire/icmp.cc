/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/icmp.h"

#include <algorithm>
#include <cstring>

#include "wire/classify.h"
#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::wire {
namespace {

constexpr std::uint8_t kEchoReply = 0;
constexpr std::uint8_t kEchoRequest = 8;
constexpr std::size_t kIcmpHeaderSize = 8;

}  // namespace

std::size_t build_icmp_echo_reply(Bytes out, ConstBytes request) {
  const FrameClass c = classify(request);
  if (c.ip_version != 4) return 0;
  const std::size_t l3 = c.l3_offset();
  const EthHdr eth = EthHdr::parse(request.data());
  const std::uint8_t* ip_p = request.data() + l3;
  const Ipv4Hdr ip = Ipv4Hdr::parse(ip_p);
  const std::size_t ihl = ip.header_length();
  if (ihl < Ipv4Hdr::kMinSize || ip.total_length < ihl + kIcmpHeaderSize ||
      l3 + ip.total_length > request.size() || ip.protocol != ip_proto::kIcmp || ip.mf ||
      ip.frag_offset != 0 || inet_checksum(ip_p, ihl) != 0)
    return 0;
  const std::uint8_t* icmp = ip_p + ihl;
  const std::size_t icmp_len = ip.total_length - ihl;
  if (icmp[0] != kEchoRequest || icmp[1] != 0 || inet_checksum(icmp, icmp_len) != 0) return 0;

  // The reply carries no IP options: options are copied into replies only
  // by choice (RFC 1122 3.2.2.6), and none matter here.
  const std::size_t reply_len = l3 + Ipv4Hdr::kMinSize + icmp_len;
  if (out.size() < std::max(reply_len, kMinFrameSize)) return 0;
  std::uint8_t* p = out.data();
  std::memcpy(p, request.data(), l3);  // keeps an 802.1Q tag as it came
  EthHdr{eth.src, eth.dst, eth.ether_type}.write(p);

  Ipv4Hdr reply_ip;
  reply_ip.dscp = ip.dscp;
  reply_ip.total_length = static_cast<std::uint16_t>(Ipv4Hdr::kMinSize + icmp_len);
  reply_ip.id = ip.id;
  reply_ip.df = ip.df;
  reply_ip.ttl = 64;
  reply_ip.protocol = ip_proto::kIcmp;
  reply_ip.src = ip.dst;
  reply_ip.dst = ip.src;
  reply_ip.write(p + l3);

  std::uint8_t* reply_icmp = p + l3 + Ipv4Hdr::kMinSize;
  std::memcpy(reply_icmp, icmp, icmp_len);
  reply_icmp[0] = kEchoReply;
  store_be16(reply_icmp + 2, 0);
  store_be16(reply_icmp + 2, inet_checksum(reply_icmp, icmp_len));
  if (reply_len < kMinFrameSize) {
    std::memset(p + reply_len, 0, kMinFrameSize - reply_len);
    return kMinFrameSize;
  }
  return reply_len;
}

}  // namespace uroce::wire
