/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The RoCEv2 Invariant CRC (IBA Annex A17.3.3; Linux rxe_icrc.c): a CRC-32
// over 8 bytes of 0xFF (standing in for the IB LRH), then the packet from
// the IP header to the end of the pad, with the fields routers may change
// replaced by ones: IPv4 TOS, TTL and header checksum; IPv6 traffic class,
// flow label and hop limit; the UDP checksum; BTH byte 4 (FECN, BECN).
// It is stored after the pad, least significant byte first.

#include <cstdint>
#include <span>

#include "wire/bytes.h"

namespace uroce::wire {

/// ICRC of a packet given as a chain of segments (a packet may span
/// several buffers, e.g. headers in one and payload in another). The chain
/// starts at the first byte of the IP header and ends with the last pad
/// byte: the 4 ICRC bytes are not part of it. The IP version comes from the
/// first byte; IPv4 headers are taken to be 20 bytes, as RoCEv2 carries no
/// options. Chains shorter than IP + UDP + BTH are hashed as they are.
std::uint32_t icrc_compute(std::span<const ConstBytes> segments);

/// ICRC of a contiguous packet from IP header to pad.
inline std::uint32_t icrc_compute(ConstBytes l3_to_pad) {
  return icrc_compute(std::span<const ConstBytes>(&l3_to_pad, 1));
}

/// Reads and writes the ICRC trailer (little-endian on the wire).
constexpr std::uint32_t icrc_load(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
         std::uint32_t{p[3]} << 24;
}
constexpr void icrc_store(std::uint8_t* p, std::uint32_t icrc) {
  p[0] = static_cast<std::uint8_t>(icrc);
  p[1] = static_cast<std::uint8_t>(icrc >> 8);
  p[2] = static_cast<std::uint8_t>(icrc >> 16);
  p[3] = static_cast<std::uint8_t>(icrc >> 24);
}

}  // namespace uroce::wire
