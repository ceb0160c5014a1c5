/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/icrc.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "wire/crc32.h"
#include "wire/ip.h"
#include "wire/opcode.h"
#include "wire/udp.h"

namespace uroce::wire {
namespace {

constexpr std::size_t kLrhStandIn = 8;
constexpr std::size_t kMaskedV4 = Ipv4Hdr::kMinSize + UdpHdr::kSize + kBthSize;
constexpr std::size_t kMaskedV6 = Ipv6Hdr::kSize + UdpHdr::kSize + kBthSize;

// Packets up to this size (ACKs, CNPs, small sends) are copied whole into
// the masking buffer and hashed in one CRC call: a CRC call's latency, not
// its throughput, is what a short packet pays, and the masked copy costs
// less than a second call.
constexpr std::size_t kGatherWhole = 256;

// Sets to ones the variant fields of the IP + UDP + BTH headers in `h`
// (which holds the first `len` bytes of the packet).
void mask_variant_fields(std::uint8_t* h, std::size_t len, bool ipv6) {
  auto ones = [&](std::size_t off, std::size_t n) {
    for (std::size_t i = off; i < off + n && i < len; ++i) h[i] = 0xFF;
  };
  std::size_t udp;
  if (ipv6) {
    // Byte 0 keeps the version nibble; traffic class and flow label follow.
    if (len > 0) h[0] |= 0x0F;
    ones(1, 3);
    ones(7, 1);  // hop limit
    udp = Ipv6Hdr::kSize;
  } else {
    ones(1, 1);   // TOS: DSCP and ECN
    ones(8, 1);   // TTL
    ones(10, 2);  // header checksum
    udp = Ipv4Hdr::kMinSize;
  }
  ones(udp + 6, 2);                  // UDP checksum
  ones(udp + UdpHdr::kSize + 4, 1);  // BTH FECN, BECN, resv6
}

}  // namespace

std::uint32_t icrc_compute(std::span<const ConstBytes> segments) {
  // Gather the header bytes that need masking (or the whole of a short
  // packet) into a local buffer behind the LRH stand-in; they may straddle
  // segments.
  std::array<std::uint8_t, kLrhStandIn + kGatherWhole> head;
  std::memset(head.data(), 0xFF, kLrhStandIn);

  bool ipv6 = false;
  bool version_seen = false;
  std::size_t total = 0;
  for (const ConstBytes& s : segments) {
    if (!version_seen && !s.empty()) {
      ipv6 = (s[0] >> 4) == 6;
      version_seen = true;
    }
    total += s.size();
  }
  const std::size_t masked = total <= kGatherWhole ? total : ipv6 ? kMaskedV6 : kMaskedV4;

  std::size_t got = 0;
  std::size_t seg = 0;
  std::size_t seg_off = 0;
  for (; seg < segments.size() && got < masked; ++seg) {
    const std::size_t n = std::min(masked - got, segments[seg].size());
    std::memcpy(head.data() + kLrhStandIn + got, segments[seg].data(), n);
    got += n;
    if (n < segments[seg].size()) {
      seg_off = n;  // the rest of this segment follows the masked headers
      break;
    }
  }
  mask_variant_fields(head.data() + kLrhStandIn, got, ipv6);

  std::uint32_t crc = crc32(0, ConstBytes(head.data(), kLrhStandIn + got));
  if (seg < segments.size()) {
    crc = crc32(crc, segments[seg].subspan(seg_off));
    for (++seg; seg < segments.size(); ++seg) crc = crc32(crc, segments[seg]);
  }
  return crc;
}

}  // namespace uroce::wire
