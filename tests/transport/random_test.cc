/* SPDX-License-Identifier: BSD-3-Clause */
// QPNs and PSNs from the secure generator (random.cc). Unpredictable means
// here what an off-path attacker could exploit if it failed: values that
// repeat, that follow from the previous one by a small step or a few
// flipped bits (a counter, a Gray code, a bit-reversed counter), or whose
// bits lean one way. Each bound is set so that a true random source fails
// it with a probability below 1e-6, and each of those generators fails
// it at once.

#include "transport/random.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace uroce::transport {
namespace {

constexpr int kDraws = 4096;
constexpr std::uint32_t kMask = 0xFFFFFF;

// The inverse of an odd number modulo 2^32 (Newton's iteration, each
// step doubling the correct low bits).
std::uint32_t inverse(std::uint32_t d) {
  std::uint32_t x = d;
  for (int i = 0; i < 5; ++i) x *= 2 - d * x;
  return x;
}

std::vector<std::uint32_t> draw(const std::function<std::uint32_t()>& next) {
  std::vector<std::uint32_t> v(kDraws);
  for (auto& x : v) x = next();
  return v;
}

// What makes a sequence of 24-bit values predictable; empty if nothing.
std::vector<std::string> predictability(const std::vector<std::uint32_t>& v) {
  std::vector<std::string> found;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) found.push_back(what);
  };
  // Distinct: 4096 draws from 2^24 collide about 0.5 times; 7 or more
  // collisions happen with probability about 1e-6.
  const std::set<std::uint32_t> seen(v.begin(), v.end());
  check(seen.size() >= v.size() - 6, "values repeat");

  // Each bit is set in half the draws: 2048 +- 32 (one standard
  // deviation); 8 deviations (256) is beyond 1e-15 per bit.
  for (int bit = 0; bit < 24; ++bit) {
    int ones = 0;
    for (std::uint32_t x : v) ones += (x >> bit) & 1;
    check(std::abs(ones - kDraws / 2) <= 256,
          "bit " + std::to_string(bit) + " set in " + std::to_string(ones));
  }

  // Consecutive values in a simple relation. For random values, a next
  // value within 1024 of the last (mod 2^24), or differing in at most 3 of
  // the 24 bits, each has a probability near 1.3e-4 per pair: about 0.5
  // pairs in 4095; more than 6 is below 1e-6.
  int near = 0, few_bits = 0;
  std::set<std::uint32_t> steps, xors;
  int repeated_step = 0, repeated_xor = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    const std::uint32_t step = (v[i] - v[i - 1]) & kMask;
    const std::uint32_t flip = v[i] ^ v[i - 1];
    near += step < 1024 || step > kMask - 1024;
    few_bits += std::popcount(flip) <= 3;
    // A constant step or a constant XOR (a counter with any stride, a
    // linear sequence) repeats its step; random steps repeat about 0.5
    // times in 4095.
    repeated_step += !steps.insert(step).second;
    repeated_xor += !xors.insert(flip).second;
  }
  check(near <= 6, "values follow each other closely");
  check(few_bits <= 6, "consecutive values differ in few bits");
  check(repeated_step <= 6, "the same step recurs");
  check(repeated_xor <= 6, "the same XOR recurs");

  // An affine recurrence x' = a x + c (mod 2^24), a linear congruential
  // generator, has steps d' = a d: wherever a step d is odd, d' / d gives
  // the same a every time. Random steps give about 2048 such ratios,
  // which repeat about 0.1 times.
  std::set<std::uint32_t> ratios;
  int repeated_ratio = 0;
  for (std::size_t i = 2; i < v.size(); ++i) {
    const std::uint32_t d = (v[i - 1] - v[i - 2]) & kMask;
    const std::uint32_t next = (v[i] - v[i - 1]) & kMask;
    if ((d & 1) == 0) continue;
    repeated_ratio += !ratios.insert((next * inverse(d)) & kMask).second;
  }
  check(repeated_ratio <= 6, "an affine recurrence");
  return found;
}

void expect_unpredictable(const std::vector<std::uint32_t>& v, const char* what) {
  for (const std::string& f : predictability(v)) ADD_FAILURE() << what << ": " << f;
}

TEST(SecureRandom, QpnsAndPsnsAreInRange) {
  for (int i = 0; i < kDraws; ++i) {
    const std::uint32_t q = secure_random_qpn();
    EXPECT_GT(q, 1u) << "QPN 0 and 1 are SMI and GSI";
    EXPECT_LT(q, kMask) << "0xFFFFFF is the multicast QPN";
    EXPECT_LE(secure_random_psn(), kMask);
  }
}

TEST(SecureRandom, QpnsAreUnpredictable) { expect_unpredictable(draw(secure_random_qpn), "QPN"); }

TEST(SecureRandom, PsnsAreUnpredictable) { expect_unpredictable(draw(secure_random_psn), "PSN"); }

TEST(SecureRandom, KeyBytesAreUnpredictable) {
  // An R_Key's low byte (mr_table.cc) and the rest of a 32-bit draw.
  expect_unpredictable(draw([] { return secure_random_u32() & kMask; }), "u32 low 24 bits");
  expect_unpredictable(draw([] { return secure_random_u32() >> 8; }), "u32 high 24 bits");
}

// The checks themselves: each generator an attacker could predict fails.
TEST(SecureRandom, TheChecksCatchPredictableGenerators) {
  std::uint32_t n = 0x123456;
  const std::vector<std::pair<const char*, std::function<std::uint32_t()>>> bad = {
      {"counter", [&] { return n++ & kMask; }},
      {"stride 7919", [&] { return (n += 7919) & kMask; }},
      {"Gray code",
       [&] {
         ++n;
         return (n ^ (n >> 1)) & kMask;
       }},
      {"bit-reversed counter",
       [&] {
         std::uint32_t r = 0;
         for (int b = 0; b < 24; ++b) r |= ((n >> b) & 1) << (23 - b);
         ++n;
         return r;
       }},
      {"LCG mod 2^24", [&] { return n = (n * 1103515245u + 12345u) & kMask; }},
      {"xorshift low bits",
       [&] {
         n ^= n << 13;
         n ^= n >> 17;
         n ^= n << 5;
         return n & 0xFF;  // only 8 of 24 bits vary
       }},
  };
  for (const auto& [name, next] : bad) {
    EXPECT_FALSE(predictability(draw(next)).empty()) << name << " passed as unpredictable";
  }
}

}  // namespace
}  // namespace uroce::transport
