/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/icrc.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "wire/crc32.h"
#include "wire/crc32_linear.h"
#include "wire/ip.h"
#include "wire/opcode.h"
#include "wire/udp.h"

namespace uroce::wire {
namespace {

constexpr std::size_t kLrhStandIn = 8;
constexpr std::size_t kMaskedV4 = Ipv4Hdr::kMinSize + UdpHdr::kSize + kBthSize;
constexpr std::size_t kMaskedV6 = Ipv6Hdr::kSize + UdpHdr::kSize + kBthSize;

// The CRC-32 (zlib convention) of the 8 bytes of ones that stand in for
// the LRH: every ICRC starts from it.
constexpr std::uint32_t kAfterLrhStandIn = [] {
  std::uint32_t r = 0xFFFFFFFF;
  for (std::size_t i = 0; i < kLrhStandIn; ++i)
    r = (r >> 8) ^ crc32_linear::kByte[(r ^ 0xFF) & 0xFF];
  return ~r;
}();
static_assert(kAfterLrhStandIn == 0x2144DF1C);  // zlib's crc32(0, 8 x 0xFF)

// The bytes of the IP + UDP + BTH headers that the ICRC sees as ones, and
// which of their bits.
struct MaskedByte {
  std::size_t offset;
  std::uint8_t bits;
};
constexpr std::array<MaskedByte, 7> kMaskedV4Bytes{{
    {1, 0xFF},                                      // TOS: DSCP and ECN
    {8, 0xFF},                                      // TTL
    {10, 0xFF},                                     // header checksum
    {11, 0xFF},                                     //
    {Ipv4Hdr::kMinSize + 6, 0xFF},                  // UDP checksum
    {Ipv4Hdr::kMinSize + 7, 0xFF},                  //
    {Ipv4Hdr::kMinSize + UdpHdr::kSize + 4, 0xFF},  // BTH FECN, BECN, resv6
}};
constexpr std::array<MaskedByte, 8> kMaskedV6Bytes{{
    {0, 0x0F},                                   // traffic class, high nibble
    {1, 0xFF},                                   // traffic class, flow label
    {2, 0xFF},                                   //
    {3, 0xFF},                                   //
    {7, 0xFF},                                   // hop limit
    {Ipv6Hdr::kSize + 6, 0xFF},                  // UDP checksum
    {Ipv6Hdr::kSize + 7, 0xFF},                  //
    {Ipv6Hdr::kSize + UdpHdr::kSize + 4, 0xFF},  // BTH FECN, BECN, resv6
}};

// The fast path, for a packet in one buffer (how both the frame builder
// and the parser hand it over): one CRC call over the packet as it is,
// then the difference the masked bytes make, by linearity
// (crc32_linear.h). Copying the headers to mask them costs more than that
// whole correction: the copy's byte stores stall the CRC's wide loads
// that read them back.
//
// A masked byte's difference is its masked bits inverted. kDeltaV4[i][d]
// is crc32_linear of difference d at the i-th masked byte, followed by
// the rest of the masked headers.
template <std::size_t N>
constexpr auto delta_tables(const std::array<MaskedByte, N>& bytes, std::size_t headers) {
  std::array<std::array<std::uint32_t, 256>, N> t{};
  for (std::size_t i = 0; i < N; ++i) t[i] = crc32_linear::byte_at(headers - 1 - bytes[i].offset);
  return t;
}
constexpr auto kDeltaV4 = delta_tables(kMaskedV4Bytes, kMaskedV4);
constexpr auto kDeltaV6 = delta_tables(kMaskedV6Bytes, kMaskedV6);

// Unrolled over the masked bytes, whose offsets and masks are then
// constants: the loop took twice the instructions.
template <const auto& kBytes, const auto& kTables, std::size_t... I>
std::uint32_t headers_delta(const std::uint8_t* p, std::index_sequence<I...>) {
  return (kTables[I][static_cast<std::uint8_t>(~p[kBytes[I].offset] & kBytes[I].bits)] ^ ...);
}

std::uint32_t icrc_contiguous(ConstBytes packet, bool ipv6) {
  const std::size_t headers = ipv6 ? kMaskedV6 : kMaskedV4;
  const std::uint32_t delta =
      ipv6 ? headers_delta<kMaskedV6Bytes, kDeltaV6>(
                 packet.data(), std::make_index_sequence<kMaskedV6Bytes.size()>())
           : headers_delta<kMaskedV4Bytes, kDeltaV4>(
                 packet.data(), std::make_index_sequence<kMaskedV4Bytes.size()>());
  return crc32(kAfterLrhStandIn, packet) ^ crc32_linear::shift(delta, packet.size() - headers);
}

// The general path, for a chain of segments and for packets too short to
// hold the headers: the masked headers are gathered into a buffer (they
// may straddle segments) and masked there.
template <std::size_t N>
void mask(std::uint8_t* h, std::size_t len, const std::array<MaskedByte, N>& bytes) {
  for (const MaskedByte& b : bytes)
    if (b.offset < len) h[b.offset] |= b.bits;
}

std::uint32_t icrc_gathered(std::span<const ConstBytes> segments) {
  bool ipv6 = false;
  for (const ConstBytes& s : segments) {
    if (!s.empty()) {
      ipv6 = (s[0] >> 4) == 6;
      break;
    }
  }
  std::array<std::uint8_t, kMaskedV6> head;
  const std::size_t headers = ipv6 ? kMaskedV6 : kMaskedV4;
  std::size_t got = 0;
  std::size_t seg = 0;
  std::size_t seg_off = 0;
  for (; seg < segments.size() && got < headers; ++seg) {
    const std::size_t n = std::min(headers - got, segments[seg].size());
    std::memcpy(head.data() + got, segments[seg].data(), n);
    got += n;
    if (n < segments[seg].size()) {
      seg_off = n;  // the rest of this segment follows the masked headers
      break;
    }
  }
  if (ipv6)
    mask(head.data(), got, kMaskedV6Bytes);
  else
    mask(head.data(), got, kMaskedV4Bytes);

  std::uint32_t crc = crc32(kAfterLrhStandIn, ConstBytes(head.data(), got));
  if (seg < segments.size()) {
    crc = crc32(crc, segments[seg].subspan(seg_off));
    for (++seg; seg < segments.size(); ++seg) crc = crc32(crc, segments[seg]);
  }
  return crc;
}

}  // namespace

std::uint32_t icrc_compute(std::span<const ConstBytes> segments) {
  if (segments.size() == 1 && !segments[0].empty()) {
    const ConstBytes s = segments[0];
    const bool ipv6 = (s[0] >> 4) == 6;
    const std::size_t headers = ipv6 ? kMaskedV6 : kMaskedV4;
    if (s.size() >= headers && s.size() - headers <= crc32_linear::kMaxShift)
      return icrc_contiguous(s, ipv6);
  }
  return icrc_gathered(segments);
}

}  // namespace uroce::wire
