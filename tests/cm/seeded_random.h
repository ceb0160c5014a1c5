/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Deterministic comm IDs, PSNs and ports for tests, and time units.

#include <cstdint>
#include <random>

#include "cm/types.h"

namespace uroce::test {

inline constexpr cm::Nanos kMs = 1'000'000;
inline constexpr cm::Nanos kSec = 1'000 * kMs;

/// A seeded RandomSource.
class SeededRandom : public cm::RandomSource {
 public:
  explicit SeededRandom(std::uint64_t seed) : rng_(seed) {}
  std::uint32_t u32() override { return static_cast<std::uint32_t>(rng_()); }

 private:
  std::mt19937_64 rng_;
};

}  // namespace uroce::test
