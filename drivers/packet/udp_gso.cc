/* SPDX-License-Identifier: BSD-3-Clause */
#include "packet/udp_gso.h"

#include <algorithm>
#include <cstring>

#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::packet {

namespace {

constexpr std::uint32_t kEth = wire::EthHdr::kSize;
constexpr std::uint32_t kUdp = 8;

// Ones' complement sum of 16-bit words, folded; not complemented.
std::uint16_t fold(std::uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

std::uint64_t sum_words(const std::uint8_t* p, std::size_t len) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i + 1 < len; i += 2) sum += wire::load_be16(p + i);
  return sum;
}

// The UDP pseudo-header's sum for a datagram of `udp_length` bytes: what
// a CHECKSUM_PARTIAL datagram holds in its checksum field (the kernel's
// udp4_hwcsum and udp6_hwcsum).
std::uint16_t pseudo_header_sum(const std::uint8_t* frame, const UdpFrame& at,
                                std::uint32_t udp_length) {
  const std::uint8_t* ip = frame + at.l3;
  std::uint64_t sum = wire::ip_proto::kUdp;
  if (at.ipv6) {
    sum += sum_words(ip + 8, 32) + (udp_length >> 16) + (udp_length & 0xFFFF);
  } else {
    sum += sum_words(ip + 12, 8) + udp_length;
  }
  return fold(sum);
}

// Writes the IP and UDP lengths of a datagram with `payload` bytes after
// its UDP header, and the IPv4 header checksum.
void set_lengths(std::uint8_t* frame, const UdpFrame& at, std::uint32_t payload) {
  std::uint8_t* ip = frame + at.l3;
  const auto udp_length = static_cast<std::uint16_t>(kUdp + payload);
  if (at.ipv6) {
    wire::store_be16(ip + 4, udp_length);
  } else {
    wire::store_be16(ip + 2, static_cast<std::uint16_t>(wire::Ipv4Hdr::kMinSize + udp_length));
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::inet_checksum(ip, wire::Ipv4Hdr::kMinSize));
  }
  wire::store_be16(frame + at.l4 + 4, udp_length);
}

// Whether `b`'s headers are `a`'s but for the fields segmentation writes:
// the lengths, the IPv4 ID and the checksums.
bool same_flow(const std::uint8_t* a, const std::uint8_t* b, const UdpFrame& at) {
  const std::uint32_t l3 = at.l3;
  if (std::memcmp(a, b, l3) != 0) return false;
  if (at.ipv6) {
    return std::memcmp(a + l3, b + l3, 4) == 0 &&
           std::memcmp(a + l3 + 6, b + l3 + 6, at.l4 + 4 - (l3 + 6)) == 0;
  }
  return std::memcmp(a + l3, b + l3, 2) == 0 && std::memcmp(a + l3 + 6, b + l3 + 6, 4) == 0 &&
         std::memcmp(a + l3 + 12, b + l3 + 12, at.l4 + 4 - (l3 + 12)) == 0;
}

}  // namespace

UdpFrame locate_udp(wire::ConstBytes frame) {
  UdpFrame at;
  if (frame.size() < kEth) return at;
  const std::uint8_t* p = frame.data();
  const std::uint16_t type = wire::load_be16(p + 12);
  at.l3 = kEth;
  std::uint32_t l3_end = 0;
  if (type == wire::ether_type::kIpv4) {
    if (frame.size() < kEth + wire::Ipv4Hdr::kMinSize + kUdp) return at;
    const std::uint8_t* ip = p + kEth;
    // Version 4, no options, neither fragment nor more fragments.
    if (ip[0] != 0x45 || ip[9] != wire::ip_proto::kUdp || (wire::load_be16(ip + 6) & 0x3FFF) != 0)
      return at;
    at.l4 = kEth + wire::Ipv4Hdr::kMinSize;
    l3_end = kEth + wire::load_be16(ip + 2);
  } else if (type == wire::ether_type::kIpv6) {
    if (frame.size() < kEth + wire::Ipv6Hdr::kSize + kUdp) return at;
    const std::uint8_t* ip = p + kEth;
    if ((ip[0] >> 4) != 6 || ip[6] != wire::ip_proto::kUdp) return at;
    at.ipv6 = true;
    at.l4 = kEth + wire::Ipv6Hdr::kSize;
    l3_end = at.l4 + wire::load_be16(ip + 4);
  } else {
    return at;
  }
  const std::uint32_t udp_length = wire::load_be16(p + at.l4 + 4);
  // Ethernet pads short frames: the IP length may fall short of the
  // frame, never past it, and the UDP datagram fills the IP payload.
  if (l3_end > frame.size() || at.l4 + udp_length != l3_end || udp_length < kUdp) return at;
  at.payload = udp_length - kUdp;
  at.valid = true;
  return at;
}

std::uint16_t coalescible(std::span<const wire::ConstBytes> frames, const UdpFrame& first) {
  if (frames.empty() || !first.valid || first.payload == 0) return frames.empty() ? 0 : 1;
  const std::uint8_t* lead = frames[0].data();
  const std::uint32_t hdr = first.header_length();
  const std::uint16_t id0 = first.ipv6 ? 0 : wire::load_be16(lead + first.l3 + 4);
  const std::size_t limit = std::min<std::size_t>(frames.size(), kMaxSegments);
  std::size_t bytes = hdr + first.payload;
  std::uint16_t n = 1;
  for (; n < limit; ++n) {
    const wire::ConstBytes f = frames[n];
    const UdpFrame at = locate_udp(f);
    if (!at.valid || at.ipv6 != first.ipv6 || at.payload == 0 || at.payload > first.payload) break;
    if (bytes + at.payload > kMaxSuperFrame) break;
    if (!same_flow(lead, f.data(), first)) break;
    if (!first.ipv6 &&
        wire::load_be16(f.data() + first.l3 + 4) != static_cast<std::uint16_t>(id0 + n))
      break;
    bytes += at.payload;
    // A shorter packet can only be the last segment.
    if (at.payload < first.payload) return static_cast<std::uint16_t>(n + 1);
  }
  return n;
}

void write_super_header(wire::ConstBytes leader, const UdpFrame& first, std::uint32_t total,
                        std::uint8_t* out) {
  std::memcpy(out, leader.data(), first.header_length());
  set_lengths(out, first, total);
  wire::store_be16(out + first.l4 + 6, pseudo_header_sum(out, first, kUdp + total));
}

std::size_t split(wire::ConstBytes header, const UdpFrame& at, wire::ConstBytes payload,
                  std::uint16_t gso_size, std::uint32_t k, wire::Bytes out) {
  const std::size_t from = std::size_t{k} * gso_size;
  if (gso_size == 0 || from >= payload.size()) return 0;
  const auto length =
      static_cast<std::uint32_t>(std::min<std::size_t>(gso_size, payload.size() - from));
  const std::uint32_t hdr = at.header_length();
  if (out.size() < hdr + length || header.size() < hdr) return 0;
  std::uint8_t* p = out.data();
  std::memcpy(p, header.data(), hdr);
  std::memcpy(p + hdr, payload.data() + from, length);
  if (!at.ipv6) {
    std::uint8_t* id = p + at.l3 + 4;
    wire::store_be16(id, static_cast<std::uint16_t>(wire::load_be16(id) + k));
  }
  set_lengths(p, at, length);
  wire::store_be16(p + at.l4 + 6, 0);
  if (at.ipv6) {
    const wire::ConstBytes datagram(p + at.l4, kUdp + length);
    wire::store_be16(p + at.l4 + 6,
                     wire::udp6_checksum(wire::IpAddr::from_v6_bytes(p + at.l3 + 8),
                                         wire::IpAddr::from_v6_bytes(p + at.l3 + 24),
                                         std::span<const wire::ConstBytes>(&datagram, 1)));
  }
  return hdr + length;
}

}  // namespace uroce::packet
