/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Packet Sequence Numbers: 24-bit serial numbers (IBA 9.7.1). Comparison is
// modulo 2^24 around the midpoint, as rxe's psn_compare does: a PSN at
// distance [1, 2^23) ahead is "after", at distance exactly 2^23 it counts
// as "before" (so a responder treats it as a duplicate, not as OOS).

#include <cstdint>

namespace uroce::wire {

inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;

/// 24-bit PSN with wrapping arithmetic.
class Psn {
 public:
  constexpr Psn() = default;
  constexpr explicit Psn(std::uint32_t v) : v_(v & kPsnMask) {}

  constexpr std::uint32_t value() const { return v_; }

  /// The PSN n packets later (n may be negative), wrapping at 2^24.
  constexpr Psn operator+(std::int32_t n) const { return Psn(v_ + static_cast<std::uint32_t>(n)); }
  constexpr Psn operator-(std::int32_t n) const { return Psn(v_ - static_cast<std::uint32_t>(n)); }
  constexpr Psn& operator+=(std::int32_t n) { return *this = *this + n; }
  constexpr Psn& operator++() { return *this += 1; }

  /// Signed distance this - other in [-2^23, 2^23).
  constexpr std::int32_t operator-(Psn other) const {
    // Shift the 24-bit difference into the top of a 32-bit word, then back
    // down arithmetically: sign-extends bit 23.
    return static_cast<std::int32_t>((v_ - other.v_) << 8) >> 8;
  }

  constexpr bool operator==(const Psn&) const = default;

  constexpr bool before(Psn other) const { return *this - other < 0; }
  constexpr bool after(Psn other) const { return *this - other > 0; }

 private:
  std::uint32_t v_ = 0;
};

static_assert(Psn(0xFFFFFF) + 1 == Psn(0));
static_assert(Psn(0) - Psn(0xFFFFFF) == 1);
static_assert(Psn(0) - Psn(0x800000) == -0x800000);  // exactly 2^23: "before"
static_assert(Psn(0x7FFFFF).after(Psn(0)));
static_assert(Psn(0x800000).before(Psn(0)));

}  // namespace uroce::wire
