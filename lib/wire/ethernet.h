/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Ethernet II and 802.1Q headers.

#include <array>
#include <cstdint>
#include <string>

#include "wire/bytes.h"

namespace uroce::wire {

namespace ether_type {
inline constexpr std::uint16_t kIpv4 = 0x0800;
inline constexpr std::uint16_t kArp = 0x0806;
inline constexpr std::uint16_t kVlan = 0x8100;  ///< 802.1Q tag (TPID)
inline constexpr std::uint16_t kIpv6 = 0x86DD;
inline constexpr std::uint16_t kMacControl = 0x8808;  ///< PAUSE and PFC
}  // namespace ether_type

/// The shortest Ethernet frame without its FCS; shorter ones are padded.
inline constexpr std::size_t kMinFrameSize = 60;

/// A 48-bit MAC address in wire order.
struct MacAddr {
  std::array<std::uint8_t, 6> bytes{};

  static constexpr MacAddr broadcast() { return {{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}}; }
  constexpr bool is_multicast() const { return bytes[0] & 1; }
  constexpr bool operator==(const MacAddr&) const = default;
  std::string to_string() const;
};

/// The Ethernet II header (14 bytes).
struct EthHdr {
  static constexpr std::size_t kSize = 14;

  MacAddr dst;
  MacAddr src;
  std::uint16_t ether_type = 0;

  static EthHdr parse(const std::uint8_t* p);
  void write(std::uint8_t* p) const;
};

/// An 802.1Q tag (4 bytes: TPID 0x8100, then PCP/DEI/VID); `ether_type` is
/// the type of what follows the tag. VID 0 is a priority tag: it carries
/// only the PCP, which is how RoCE marks its PFC priority on untagged links.
struct VlanTag {
  static constexpr std::size_t kSize = 4;

  std::uint8_t pcp = 0;  ///< 802.1p priority, 0..7
  bool dei = false;
  std::uint16_t vid = 0;  ///< 0..4095
  std::uint16_t ether_type = 0;

  /// Parses the 4 bytes after the TPID has been consumed: TCI and type.
  static VlanTag parse(const std::uint8_t* tci);
  /// Writes TCI and inner type (the TPID belongs to the Ethernet header).
  void write(std::uint8_t* tci) const;
};

}  // namespace uroce::wire
