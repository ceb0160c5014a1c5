/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The AETH syndrome byte (IBA 9.7.5.1.1): bit 7 reserved, bits 6:5 the type
// (ACK, RNR NAK, NAK), bits 4:0 a value whose meaning depends on the type:
// a credit count code, an RNR timer code, or a NAK code.

#include <array>
#include <cstdint>
#include <optional>

namespace uroce::wire {

enum class AethType : std::uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

/// NAK codes (IBA Table 45); 5..31 are reserved.
enum class NakCode : std::uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

/// Credit code 31: "invalid" credit count, meaning the responder does not
/// advertise end-to-end credits. rxe always sends it (AETH_ACK_UNLIMITED).
inline constexpr std::uint8_t kCreditsUnlimited = 0x1F;

/// A decoded syndrome.
struct AethSyndrome {
  AethType type = AethType::kAck;
  std::uint8_t value = kCreditsUnlimited;  ///< credits, RNR timer or NAK code

  static constexpr AethSyndrome ack(std::uint8_t credit_code = kCreditsUnlimited) {
    return {AethType::kAck, credit_code};
  }
  static constexpr AethSyndrome rnr_nak(std::uint8_t timer_code) {
    return {AethType::kRnrNak, timer_code};
  }
  static constexpr AethSyndrome nak(NakCode code) {
    return {AethType::kNak, static_cast<std::uint8_t>(code)};
  }

  static constexpr AethSyndrome decode(std::uint8_t byte) {
    return {static_cast<AethType>((byte >> 5) & 3), static_cast<std::uint8_t>(byte & 0x1F)};
  }
  constexpr std::uint8_t encode() const {
    return static_cast<std::uint8_t>(static_cast<unsigned>(type) << 5 | (value & 0x1F));
  }

  constexpr NakCode nak_code() const { return static_cast<NakCode>(value); }
  constexpr bool operator==(const AethSyndrome&) const = default;
};

/// End-to-end credit counts of the 31 valid credit codes (IBA Table 44).
inline constexpr std::array<std::uint16_t, 31> kCreditCounts = {
    0,   1,   2,   3,   4,    6,    8,    12,   16,   24,   32,   48,    64,    96,    128,  192,
    256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};

/// Credits a credit code grants; nullopt for code 31 (no credits advertised).
constexpr std::optional<std::uint32_t> credit_count(std::uint8_t code) {
  if (code >= kCreditCounts.size()) return std::nullopt;
  return kCreditCounts[code];
}

/// The largest credit code granting at most `credits` credits.
constexpr std::uint8_t credit_code_for(std::uint32_t credits) {
  std::uint8_t code = 0;
  while (code + 1u < kCreditCounts.size() && kCreditCounts[code + 1] <= credits) ++code;
  return code;
}

/// RNR NAK timer values in microseconds (IBA Table 45, "RNR NAK timer
/// field encodings"). Code 0 is the longest wait, 655.36 ms. Note rxe's
/// table has 61410 for code 25; the spec says 61.44 ms.
inline constexpr std::array<std::uint32_t, 32> kRnrTimerUsec = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

constexpr std::uint32_t rnr_timer_usec(std::uint8_t code) { return kRnrTimerUsec[code & 0x1F]; }

static_assert(AethSyndrome::decode(0x1F) == AethSyndrome::ack());
static_assert(AethSyndrome::nak(NakCode::kPsnSequenceError).encode() == 0x60);
static_assert(AethSyndrome::nak(NakCode::kRemoteAccessError).encode() == 0x62);
static_assert(AethSyndrome::rnr_nak(14).encode() == 0x2E);
static_assert(credit_code_for(100) == 13 && credit_code_for(32768) == 30);
static_assert(rnr_timer_usec(25) == 61440 && rnr_timer_usec(0) == 655360);

}  // namespace uroce::wire
