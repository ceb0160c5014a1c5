/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/crc32_linear.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace uroce::wire::crc32_linear {
namespace {

// x^(8n) mod P for n = 0 .. kMaxShift (37 KB): a packet's ICRC shifts by
// one of a few lengths, so the entries in use stay in cache.
constexpr std::array<std::uint32_t, kMaxShift + 1> kXPow8n = [] {
  std::array<std::uint32_t, kMaxShift + 1> t{};
  t[0] = 0x80000000;  // x^0
  for (std::size_t n = 1; n <= kMaxShift; ++n) t[n] = feed_zeros(t[n - 1], 1);
  return t;
}();

// zlib's multmodp: one bit of `a` at a time.
std::uint32_t multiply_bitwise(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

#if defined(__x86_64__)
// r * x^32 mod P by slices: kTimesX32[j][b] is byte b of the register, at
// byte j, fed four zero bytes. Four independent lookups where feeding the
// zeros one by one is four dependent ones.
constexpr std::array<std::array<std::uint32_t, 256>, 4> kTimesX32 = [] {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  for (unsigned j = 0; j < 4; ++j)
    for (std::uint32_t b = 0; b < 256; ++b) t[j][b] = feed_zeros(b << (8 * j), 4);
  return t;
}();

std::uint32_t times_x32(std::uint32_t r) {
  return kTimesX32[0][r & 0xFF] ^ kTimesX32[1][(r >> 8) & 0xFF] ^ kTimesX32[2][(r >> 16) & 0xFF] ^
         kTimesX32[3][r >> 24];
}

const bool kCpuHasPclmul = __builtin_cpu_supports("pclmul");

// The carry-less product of two reflected 32-bit values, shifted left by
// one, is a reflected 64-bit polynomial: its high half holds x^31..x^0,
// its low half x^63..x^32, that is (low half) * x^32.
__attribute__((target("pclmul"))) std::uint32_t multiply_clmul(std::uint32_t a, std::uint32_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                         _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  const std::uint64_t v = static_cast<std::uint64_t>(_mm_cvtsi128_si64(p)) << 1;
  return static_cast<std::uint32_t>(v >> 32) ^ times_x32(static_cast<std::uint32_t>(v));
}
#endif

}  // namespace

std::uint32_t multiply(std::uint32_t a, std::uint32_t b) {
#if defined(__x86_64__)
  if (kCpuHasPclmul) return multiply_clmul(a, b);
#endif
  return multiply_bitwise(a, b);
}

std::uint32_t shift(std::uint32_t r, std::size_t n) { return multiply(r, kXPow8n[n]); }

}  // namespace uroce::wire::crc32_linear
