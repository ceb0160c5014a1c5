/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The sizes a port and its users share, in one place and tied together by
// static_asserts (rxe's rxe_param.h, eRPC's tweakme.h): the arrays bursts
// land in, the batches users hand over, and the buffers a DPDK port's pool
// must have for what its users hold at once. lib/engine/params.h holds the
// engine's own.

#include <cstdint>

namespace uroce::port {

/// Most frames one rx_burst returns: the arrays users receive into, and
/// DpdkPort's own.
inline constexpr std::uint16_t kRxBurst = 64;

/// Frames the engine builds before it hands them to the port at once.
inline constexpr std::uint16_t kTxBatch = 32;

/// Frames the fault decorator (FaultPort) holds back for reordering, at
/// most, in each direction.
inline constexpr std::uint16_t kMaxHeld = 16;

/// FaultPort's transmit queue: a whole batch with every frame duplicated,
/// and the held frames that go out behind it.
inline constexpr std::uint16_t kFaultTxQueue = 2 * kTxBatch + kMaxHeld;

/// Received frames are the port's, read-only and released once: FaultPort
/// duplicates and corrupts them in buffers of its own, this many.
inline constexpr std::uint16_t kFaultCopies = 256;

/// Most frames one tx_burst takes (DpdkPort's array): FaultPort's whole
/// queue at once.
inline constexpr std::uint16_t kMaxTxBurst = kFaultTxQueue;

/// Mbufs a DPDK port's pool has beyond its rings: what its users hold at
/// once (the engine's receive buffer and transmit backlog, FaultPort's
/// queue and held frames). lib/engine/params.h checks the sum.
inline constexpr std::uint32_t kPoolSpare = 4096;

static_assert(kTxBatch <= kMaxTxBurst, "a batch goes to the port in one burst");
static_assert(2 * kMaxHeld < kRxBurst, "FaultPort's held frames leave room in a receive burst");

}  // namespace uroce::port
