/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Every limit of a uroce device in one place, as rxe's rxe_param.h: the
// transport's (transport/limits.h) and the device's own. DeviceAttr is
// filled from here alone (make_device_attr), as rxe_init_device_param
// fills rxe->attr.

#include <cstdint>

#include "transport/limits.h"

namespace uroce::verbs {

// The transport's, under the verbs layer's names.
inline constexpr std::uint32_t kMaxSge = transport::kMaxSge;
inline constexpr std::uint32_t kMaxInlineData = transport::kMaxInlineData;
inline constexpr std::uint32_t kMaxQpWr = transport::kMaxQpWr;
inline constexpr std::uint32_t kMaxMessageSize = transport::kMaxMessageSize;

/// QPs, CQs, PDs, SRQs and AHs a device holds at most, each.
inline constexpr std::uint32_t kMaxQp = 1u << 16;
inline constexpr std::uint32_t kMaxCqe = 1u << 20;
/// Slots of the memory region table, shared with memory windows. A key is
/// a slot index in its upper 24 bits and 8 random bits (mr_table.h); slot
/// 0 is never handed out.
inline constexpr std::uint32_t kMaxMrSlots = 1u << 14;
inline constexpr std::uint32_t kMaxMr = kMaxMrSlots - 1;
/// Entries of the port's GID table: the link-local GID, one per address,
/// the rest unused (zero from ibv_query_gid, ENODATA from ibv_query_gid_ex),
/// as a NIC's table has room to spare.
inline constexpr std::uint32_t kGidTableLen = 16;
/// P_Keys: the default partition only.
inline constexpr std::uint32_t kMaxPkeys = 1;
/// Completion vectors (one engine thread serves every CQ).
inline constexpr int kNumCompVectors = 1;
/// Multicast groups, QPs attached to one group, and attachments over all
/// groups, as rxe's (RXE_MAX_MCAST_GRP, RXE_MAX_MCAST_QP_ATTACH,
/// RXE_MAX_TOT_MCAST_QP_ATTACH).
inline constexpr std::uint32_t kMaxMcastGrp = 8192;
inline constexpr std::uint32_t kMaxMcastQpAttach = 56;
inline constexpr std::uint32_t kMaxTotalMcastQpAttach = 0x70000;
/// IBA 14.2.5.2: the ACK delay the responder adds, as 4.096 us * 2^n.
inline constexpr std::uint8_t kLocalCaAckDelay = 15;

static_assert(kMaxMrSlots <= (1u << 24), "a key keeps 24 bits for its slot");
static_assert(kMaxQp < (1u << 24), "QPNs are 24 bits, QP 0 and 1 are reserved");
static_assert(kMaxMcastQpAttach <= kMaxTotalMcastQpAttach, "one group's QPs count in the total");
static_assert(transport::kMaxQpWr <= kMaxCqe, "a full send queue must fit one CQ");

/// Device attributes (ibv_device_attr's subset uroce reports).
struct DeviceAttr {
  std::uint64_t node_guid = 0;  ///< EUI-64 of the port's MAC
  /// uroce has no IEEE OUI and claims no vendor's: 0xFFFFFF, as rxe
  /// reports, since 0 reads as "no device" to some tools and tests.
  std::uint32_t vendor_id = 0xFFFFFF;
  std::uint32_t vendor_part_id = 0;
  std::uint64_t max_mr_size = transport::kMaxMessageSize;
  std::uint32_t max_qp = kMaxQp;
  std::uint32_t max_qp_wr = transport::kMaxQpWr;
  std::uint32_t max_sge = transport::kMaxSge;
  std::uint32_t max_cqe = kMaxCqe;
  std::uint32_t max_mr = kMaxMr;
  std::uint32_t max_qp_rd_atom = transport::kMaxRdAtomic;
  std::uint32_t max_qp_init_rd_atom = transport::kMaxRdAtomic;
  std::uint32_t max_inline_data = transport::kMaxInlineData;
  std::uint64_t max_dm_size = transport::kMaxDmSize;  ///< device memory, all allocations together
  std::uint32_t max_mcast_grp = kMaxMcastGrp;
  std::uint32_t max_mcast_qp_attach = kMaxMcastQpAttach;
  std::uint32_t max_total_mcast_qp_attach = kMaxTotalMcastQpAttach;
};

}  // namespace uroce::verbs
