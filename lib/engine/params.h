/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The engine's sizes, in one place and tied to the port's by static_asserts
// (rxe's rxe_param.h, eRPC's tweakme.h). What the port and the engine share
// (bursts, batches, the pool's spare mbufs) is in port/params.h.

#include <cstddef>
#include <cstdint>

#include "port/params.h"

namespace uroce::engine {

/// Frames the engine asks the port for in one burst, unless configured
/// (EngineConfig::rx_burst); never more than port::kRxBurst.
inline constexpr std::uint16_t kDefaultRxBurst = 32;

/// Bursts one iteration takes from the port into the receive buffer.
inline constexpr unsigned kRxBufferBursts = 8;

/// Frames the receive buffer holds at most, whatever their size: each
/// keeps its mbuf.
inline constexpr std::size_t kMaxBufferedFrames = 2048;

/// Bytes the slow receiver's rate limit lets out at once.
inline constexpr double kRxTokenBurst = 32768;

/// Frames the port could not take yet, waiting in order; past this the
/// engine drops, as a congested link does.
inline constexpr std::size_t kMaxBacklog = 512;

/// Frames to the device itself waiting to be received; past this they
/// drop, as on a congested link (the transport's retries recover).
inline constexpr std::size_t kMaxLoopback = 4096;

/// Buffers of looped-back frames kept for reuse.
inline constexpr std::size_t kSpareFrames = 256;

/// CNPs of paused priorities that wait for the pause to end, at most
/// (the latest per peer QP).
inline constexpr std::size_t kMaxHeldCnps = 256;

/// How often the engine looks at every QP for work no event announced
/// (Engine::rescan): a net, never the way work is found.
inline constexpr std::uint64_t kTxRescanNs = 10'000'000;

/// The timer wheel: 1 us ticks, 4096 slots, one turn 4.1 ms. Deadlines
/// further out wait in their slot for later turns.
inline constexpr std::uint64_t kTimerTickNs = 1000;
inline constexpr std::size_t kTimerSlots = 4096;

/// Frames handed to one lcore's engine by the device's others (a device
/// on several lcores, engine/handoff.h) that may wait for it at once;
/// past this they drop, as on a congested link.
inline constexpr std::uint32_t kMaxHandedFrames = 1024;

static_assert(kDefaultRxBurst <= port::kRxBurst);
static_assert(kMaxBufferedFrames >= kRxBufferBursts * port::kRxBurst,
              "the receive buffer takes an iteration's bursts");

// Mbufs the engine and FaultPort hold at once beyond the port's rings: the
// receive buffer, the transmit backlog and the Sink's batch, FaultPort's
// queue and its frames held back in each direction, and the frames other
// lcores handed it.
static_assert(kMaxBufferedFrames + kMaxBacklog + port::kTxBatch + port::kFaultTxQueue +
                      2 * port::kMaxHeld + kMaxHandedFrames <=
                  port::kPoolSpare,
              "the port's pool has a buffer for every frame the engine may hold");

}  // namespace uroce::engine
