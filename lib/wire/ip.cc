/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/ip.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

namespace uroce::wire {

IpAddr IpAddr::from_v4_bytes(const std::uint8_t* p) { return from_v4(load_be32(p)); }

IpAddr IpAddr::from_v6_bytes(const std::uint8_t* p) {
  IpAddr a;
  std::copy_n(p, 16, a.bytes.begin());
  return a;
}

std::optional<IpAddr> IpAddr::parse(std::string_view text) {
  const std::string s(text);
  std::uint8_t buf[16];
  if (inet_pton(AF_INET, s.c_str(), buf) == 1) return from_v4_bytes(buf);
  if (inet_pton(AF_INET6, s.c_str(), buf) == 1) return from_v6_bytes(buf);
  return std::nullopt;
}

std::string IpAddr::to_string() const {
  char s[INET6_ADDRSTRLEN];
  if (is_v4()) {
    inet_ntop(AF_INET, bytes.data() + 12, s, sizeof(s));
  } else {
    inet_ntop(AF_INET6, bytes.data(), s, sizeof(s));
  }
  return s;
}

std::uint16_t ip6_checksum(const IpAddr& src, const IpAddr& dst, std::uint8_t proto,
                           std::span<const ConstBytes> packet) {
  // Big-endian 32-bit words summed into 64 bits fold to the same ones'
  // complement sum as 16-bit words (2^16 = 1 modulo 0xFFFF), four bytes
  // at a time instead of one.
  std::uint64_t sum = 0;
  std::size_t len = 0;
  bool odd = false;  // the next byte is the low byte of a 16-bit word
  for (const ConstBytes& seg : packet) {
    const std::uint8_t* p = seg.data();
    std::size_t n = seg.size();
    len += n;
    if (odd && n > 0) {
      sum += *p++;
      --n;
      odd = false;
    }
    for (; n >= 8; p += 8, n -= 8) sum += std::uint64_t{load_be32(p)} + load_be32(p + 4);
    for (; n >= 2; p += 2, n -= 2) sum += load_be16(p);
    if (n == 1) {
      sum += std::uint32_t{*p} << 8;
      odd = true;
    }
  }
  // Pseudo-header: addresses, upper-layer length, next header.
  for (std::size_t i = 0; i < 16; i += 2)
    sum += load_be16(&src.bytes[i]) + load_be16(&dst.bytes[i]);
  sum += (len >> 16) + (len & 0xFFFF) + proto;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

std::uint16_t udp6_checksum(const IpAddr& src, const IpAddr& dst,
                            std::span<const ConstBytes> datagram) {
  const std::uint16_t csum = ip6_checksum(src, dst, ip_proto::kUdp, datagram);
  return csum == 0 ? 0xFFFF : csum;
}

Ipv4Hdr Ipv4Hdr::parse(const std::uint8_t* p) {
  Ipv4Hdr h;
  h.ihl = p[0] & 0x0F;
  h.dscp = p[1] >> 2;
  h.ecn = static_cast<Ecn>(p[1] & 3);
  h.total_length = load_be16(p + 2);
  h.id = load_be16(p + 4);
  const std::uint16_t frag = load_be16(p + 6);
  h.df = (frag & 0x4000) != 0;
  h.mf = (frag & 0x2000) != 0;
  h.frag_offset = frag & 0x1FFF;
  h.ttl = p[8];
  h.protocol = p[9];
  h.checksum = load_be16(p + 10);
  h.src = load_be32(p + 12);
  h.dst = load_be32(p + 16);
  return h;
}

void Ipv4Hdr::write(std::uint8_t* p, bool checksum) const {
  p[0] = 0x45;
  p[1] = static_cast<std::uint8_t>(dscp << 2 | static_cast<std::uint8_t>(ecn));
  store_be16(p + 2, total_length);
  store_be16(p + 4, id);
  store_be16(p + 6, static_cast<std::uint16_t>((df ? 0x4000 : 0) | (mf ? 0x2000 : 0) |
                                               (frag_offset & 0x1FFF)));
  p[8] = ttl;
  p[9] = protocol;
  store_be16(p + 10, 0);
  store_be32(p + 12, src);
  store_be32(p + 16, dst);
  if (checksum) store_be16(p + 10, inet_checksum(p, kMinSize));
}

Ipv6Hdr Ipv6Hdr::parse(const std::uint8_t* p) {
  Ipv6Hdr h;
  const std::uint32_t w = load_be32(p);
  h.traffic_class = static_cast<std::uint8_t>(w >> 20);
  h.flow_label = w & 0xFFFFF;
  h.payload_length = load_be16(p + 4);
  h.next_header = p[6];
  h.hop_limit = p[7];
  h.src = IpAddr::from_v6_bytes(p + 8);
  h.dst = IpAddr::from_v6_bytes(p + 24);
  return h;
}

void Ipv6Hdr::write(std::uint8_t* p) const {
  store_be32(p, 6u << 28 | std::uint32_t{traffic_class} << 20 | (flow_label & 0xFFFFF));
  store_be16(p + 4, payload_length);
  p[6] = next_header;
  p[7] = hop_limit;
  std::copy(src.bytes.begin(), src.bytes.end(), p + 8);
  std::copy(dst.bytes.begin(), dst.bytes.end(), p + 24);
}

}  // namespace uroce::wire
