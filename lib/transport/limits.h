/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Every limit of the transport in one place (as rxe's rxe_param.h). The
// verbs layer reports these as device attributes.

#include <cstdint>

namespace uroce::transport {

inline constexpr std::uint32_t kMaxSge = 32;                ///< per send or receive WR
inline constexpr std::uint32_t kMaxInlineData = 256;        ///< bytes copied into a send WQE
inline constexpr std::uint32_t kMaxQpWr = 16384;            ///< send or receive queue depth
inline constexpr std::uint32_t kMaxRdAtomic = 128;          ///< max_rd_atomic / max_dest_rd_atomic
inline constexpr std::uint32_t kMaxMessageSize = 1u << 31;  ///< IBA C9-94: RETH DMA length

/// Device memory (ibv_alloc_dm) a device offers, all allocations together:
/// host memory standing in for a NIC's on-chip memory, so kept small.
inline constexpr std::uint64_t kMaxDmSize = 256 * 1024;
/// The largest alignment ibv_alloc_dm may ask for (log_align_req): a page.
inline constexpr std::uint32_t kMaxDmLogAlign = 12;

/// Packets a requester may have sent and not seen acknowledged; go-back-N
/// resends all of them after a loss, so this bounds the cost of one loss.
inline constexpr std::uint32_t kMaxUnackedPsns = 256;

/// A requester sets AckReq at least this often inside long messages, so
/// the responder acknowledges, and the send window keeps moving.
inline constexpr std::uint32_t kAckReqEveryPackets = 64;

/// The responder acknowledges at least every this many packets even when
/// no AckReq asks for it (ACK coalescing bound).
inline constexpr std::uint32_t kAckCoalesceMax = 16;

/// A shared XRC target QP waits this long for a request another process
/// receives before one it received itself, ahead of it, then NAKs a
/// sequence error as after a loss; it looks again every kSharedPollNs.
/// (Another program's engine gets to a frame within microseconds while it
/// runs; a loss is what takes longer.)
inline constexpr std::uint64_t kSharedWaitNs = 1'000'000;
inline constexpr std::uint64_t kSharedPollNs = 2'000;

/// UD receives carry a 40-byte GRH ahead of the payload (IBA 11.4.1.1).
inline constexpr std::uint32_t kGrhSize = 40;

static_assert(kMaxUnackedPsns < (1u << 23), "must stay far inside the PSN half-space");
static_assert(kAckReqEveryPackets <= kMaxUnackedPsns / 2,
              "AckReq must come well before the window closes");

}  // namespace uroce::transport
