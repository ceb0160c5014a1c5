/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// MAC Control frames (EtherType 0x8808): 802.3x PAUSE and 802.1Qbb
// Priority-based Flow Control (IEEE 802.3 Annex 31B, 802.1Qbb). A pause time counts
// quanta of 512 bit times at the link's speed.

#include <array>
#include <cstdint>

#include "wire/bytes.h"
#include "wire/ethernet.h"

namespace uroce::wire {

/// The reserved multicast address both frames go to (802.1D Table 7-10).
inline constexpr MacAddr kMacControlDst = {{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}};

namespace mac_control_opcode {
inline constexpr std::uint16_t kPause = 0x0001;
inline constexpr std::uint16_t kPfc = 0x0101;  ///< Class Based Flow Control
}  // namespace mac_control_opcode

inline constexpr unsigned kNumPriorities = 8;

/// A decoded PAUSE or PFC frame.
struct MacControlFrame {
  MacAddr src;
  std::uint16_t opcode = 0;
  /// PAUSE: the pause time for all traffic.
  std::uint16_t pause_time = 0;
  /// PFC: bit n set means class_time[n] applies to priority n.
  std::uint8_t class_enable = 0;
  std::array<std::uint16_t, kNumPriorities> class_time{};
};

/// Why a MAC control frame was refused.
enum class MacControlError : std::uint8_t {
  kNone,
  kShortFrame,
  kNotMacControl,   ///< EtherType is not 0x8808
  kBadDestination,  ///< not 01:80:C2:00:00:01
  kUnknownOpcode,   ///< neither PAUSE nor PFC
  kBadClassEnable,  ///< PFC class-enable vector with its high octet set
};

/// Writes a PFC frame (60 bytes) into `out`; returns its length or 0 when
/// `out` is too small.
std::size_t build_pfc_frame(Bytes out, const MacAddr& src, std::uint8_t class_enable,
                            const std::array<std::uint16_t, kNumPriorities>& class_time);

/// Writes an 802.3x PAUSE frame (60 bytes) into `out`; returns its length
/// or 0 when `out` is too small.
std::size_t build_pause_frame(Bytes out, const MacAddr& src, std::uint16_t pause_time);

/// Decodes a PAUSE or PFC frame.
[[nodiscard]] MacControlError parse_mac_control_frame(ConstBytes frame, MacControlFrame& out);

}  // namespace uroce::wire
