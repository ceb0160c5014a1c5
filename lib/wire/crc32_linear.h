/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// CRC-32 (IEEE, reflected) as the linear map it is. With zlib's
// convention, crc32(s, M ^ D) == crc32(s, M) ^ crc32_linear(D) for any M
// and D of one length, where crc32_linear(D) is the register after D fed
// from zero, without the final inversion. So a CRC over bytes that differ
// from the buffer's in a few known places (the ICRC's masked header
// fields) is one CRC call over the buffer as it is, plus a correction
// that costs a handful of table lookups, whatever the length.
//
// The register is reflected: bit 31 is the coefficient of x^0, bit 0 that
// of x^31 (zlib's crc32.c, multmodp).

#include <array>
#include <cstddef>
#include <cstdint>

namespace uroce::wire::crc32_linear {

inline constexpr std::uint32_t kPoly = 0xEDB88320;

/// kByte[b]: the register after byte b fed from zero. Feeding byte b to
/// register r gives (r >> 8) ^ kByte[(r ^ b) & 0xFF].
inline constexpr std::array<std::uint32_t, 256> kByte = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? kPoly ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();

/// r * x^(8n) mod P: the register after n zero bytes more. O(n).
constexpr std::uint32_t feed_zeros(std::uint32_t r, std::size_t n) {
  for (; n > 0; --n) r = (r >> 8) ^ kByte[r & 0xFF];
  return r;
}

/// at[v]: crc32_linear of byte v followed by `zeros` zero bytes, for every
/// v. Built from the eight one-bit bytes, by linearity.
constexpr std::array<std::uint32_t, 256> byte_at(std::size_t zeros) {
  std::array<std::uint32_t, 8> bit{};
  for (int b = 0; b < 8; ++b) bit[b] = feed_zeros(kByte[1u << b], zeros);
  std::array<std::uint32_t, 256> at{};
  for (std::uint32_t v = 1; v < 256; ++v) {
    const int low = __builtin_ctz(v);
    at[v] = at[v & (v - 1)] ^ bit[low];
  }
  return at;
}

/// The longest run of zeros `shift` takes from its table: a jumbo frame.
inline constexpr std::size_t kMaxShift = 9216;

/// r * x^(8n) mod P for n <= kMaxShift: r followed by n zero bytes, in
/// constant time (a table of x^(8n) and one carry-less multiplication).
std::uint32_t shift(std::uint32_t r, std::size_t n);

/// a * b mod P, both reflected.
std::uint32_t multiply(std::uint32_t a, std::uint32_t b);

}  // namespace uroce::wire::crc32_linear
