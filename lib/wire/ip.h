/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// IPv4 and IPv6 headers, and the 16-byte address that holds either (an
// IPv4 address is kept IPv4-mapped, ::ffff:a.b.c.d, which is also how a
// RoCEv2 GID carries it).

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "wire/bytes.h"

namespace uroce::wire {

namespace ip_proto {
inline constexpr std::uint8_t kIcmp = 1;
inline constexpr std::uint8_t kUdp = 17;
inline constexpr std::uint8_t kIcmpv6 = 58;
}  // namespace ip_proto

/// The two ECN bits of the IP traffic class (RFC 3168).
enum class Ecn : std::uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

/// An IPv6 address, or an IPv4 address in its IPv4-mapped IPv6 form.
struct IpAddr {
  std::array<std::uint8_t, 16> bytes{};

  static constexpr IpAddr from_v4(std::uint32_t host_order) {
    IpAddr a;
    a.bytes[10] = a.bytes[11] = 0xFF;
    store_be32(a.bytes.data() + 12, host_order);
    return a;
  }
  static IpAddr from_v4_bytes(const std::uint8_t* p);
  static IpAddr from_v6_bytes(const std::uint8_t* p);
  /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text.
  static std::optional<IpAddr> parse(std::string_view text);

  /// True for an IPv4-mapped address (::ffff:0:0/96).
  constexpr bool is_v4() const {
    return load_be64(bytes.data()) == 0 && load_be32(bytes.data() + 8) == 0x0000FFFF;
  }
  constexpr std::uint32_t v4() const { return load_be32(bytes.data() + 12); }
  std::string to_string() const;
  /// Two 8-byte compares: the defaulted comparison called memcmp, on
  /// every packet received (is the destination one of ours?).
  constexpr bool operator==(const IpAddr& o) const {
    return load_be64(bytes.data()) == load_be64(o.bytes.data()) &&
           load_be64(bytes.data() + 8) == load_be64(o.bytes.data() + 8);
  }
};

/// The IPv4 header. Written without options (IHL 5); parsed with or
/// without them.
struct Ipv4Hdr {
  static constexpr std::size_t kMinSize = 20;

  std::uint8_t ihl = 5;  ///< header length in 32-bit words
  std::uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  std::uint16_t total_length = 0;
  std::uint16_t id = 0;
  bool df = true;  ///< RoCE must not be fragmented; rxe sets DF
  bool mf = false;
  std::uint16_t frag_offset = 0;
  std::uint8_t ttl = 64;
  std::uint8_t protocol = ip_proto::kUdp;
  std::uint16_t checksum = 0;
  std::uint32_t src = 0;  ///< host order
  std::uint32_t dst = 0;  ///< host order

  std::size_t header_length() const { return std::size_t{ihl} * 4; }

  /// Decodes the fixed 20 bytes (version and options are not checked).
  static Ipv4Hdr parse(const std::uint8_t* p);
  /// Writes a 20-byte header with its checksum computed, or left 0 for a
  /// NIC that fills it in (`checksum` false).
  void write(std::uint8_t* p, bool checksum = true) const;
};

/// The Internet checksum (RFC 1071) over `len` bytes; 0 when a header with
/// its checksum in place is valid. Inline: with a constant length (an IPv4
/// header, on every packet sent and received) the loop unrolls.
inline std::uint16_t inet_checksum(const std::uint8_t* p, std::size_t len,
                                   std::uint32_t sum = 0) {
  // Big-endian 32-bit words summed into 64 bits fold to the same ones'
  // complement sum as 16-bit words (2^16 = 1 modulo 0xFFFF): an IPv4
  // header is five additions, not ten.
  std::uint64_t s = sum;
  for (; len >= 4; p += 4, len -= 4) s += load_be32(p);
  if (len >= 2) {
    s += load_be16(p);
    p += 2;
    len -= 2;
  }
  if (len) s += std::uint32_t{p[0]} << 8;
  s = (s & 0xFFFFFFFF) + (s >> 32);
  s = (s & 0xFFFFFFFF) + (s >> 32);
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(~s);
}

/// The UDP checksum of a datagram over IPv6 (RFC 8200 8.1), the datagram
/// given as a chain of segments from the UDP header (checksum field zero)
/// to its end. Never 0: a computed 0 is sent as 0xFFFF (RFC 768).
std::uint16_t udp6_checksum(const IpAddr& src, const IpAddr& dst,
                            std::span<const ConstBytes> datagram);

/// The checksum of an upper-layer packet over IPv6 with next header
/// `proto` (RFC 8200 8.1): UDP, or ICMPv6 (RFC 4443), whose checksum is
/// sent as computed.
std::uint16_t ip6_checksum(const IpAddr& src, const IpAddr& dst, std::uint8_t proto,
                           std::span<const ConstBytes> packet);

/// The IPv6 fixed header (40 bytes).
struct Ipv6Hdr {
  static constexpr std::size_t kSize = 40;

  std::uint8_t traffic_class = 0;  ///< DSCP << 2 | ECN
  std::uint32_t flow_label = 0;    ///< 20 bits
  std::uint16_t payload_length = 0;
  std::uint8_t next_header = ip_proto::kUdp;
  std::uint8_t hop_limit = 64;
  IpAddr src;
  IpAddr dst;

  static Ipv6Hdr parse(const std::uint8_t* p);
  void write(std::uint8_t* p) const;
};

}  // namespace uroce::wire
