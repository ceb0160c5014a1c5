/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The IB path MTU enumeration (IBA 9.7.6; rdma-core's enum ibv_mtu uses the
// same codes 1..5).

#include <cstdint>
#include <optional>

namespace uroce::wire {

enum class Mtu : std::uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };

constexpr std::uint32_t mtu_bytes(Mtu mtu) { return 128u << static_cast<unsigned>(mtu); }

/// The Mtu of an enum code (IBV_MTU_*), or nullopt if the code is invalid.
constexpr std::optional<Mtu> mtu_from_code(unsigned code) {
  if (code < 1 || code > 5) return std::nullopt;
  return static_cast<Mtu>(code);
}

/// Room for every header a RoCEv2 packet may carry around its payload:
/// Ethernet + VLAN + IPv6 + UDP + BTH + the largest extension headers +
/// ICRC. rxe uses the same budget (RXE_MAX_HDR_LENGTH).
inline constexpr std::uint32_t kMaxRoceOverhead = 80;

/// The largest IB MTU whose packets fit an Ethernet link MTU (rxe's
/// eth_mtu_int_to_enum): 1500 gives 1024, 9000 gives 4096. nullopt when even
/// 256 does not fit.
constexpr std::optional<Mtu> mtu_for_link(std::uint32_t link_mtu) {
  if (link_mtu < kMaxRoceOverhead + 256) return std::nullopt;
  const std::uint32_t room = link_mtu - kMaxRoceOverhead;
  for (unsigned code = 5; code >= 1; --code) {
    if (mtu_bytes(static_cast<Mtu>(code)) <= room) return static_cast<Mtu>(code);
  }
  return std::nullopt;
}

static_assert(mtu_bytes(Mtu::k256) == 256 && mtu_bytes(Mtu::k4096) == 4096);
static_assert(mtu_for_link(1500) == Mtu::k1024 && mtu_for_link(9000) == Mtu::k4096);
static_assert(!mtu_for_link(335).has_value() && mtu_for_link(336) == Mtu::k256);

}  // namespace uroce::wire
