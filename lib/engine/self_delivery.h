/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Frames the device sends to one of its own addresses never reach the
// wire: they come back in through the engine's receive path, every check
// included, as an RDMA NIC loops back traffic between two of its own QPs
// (rxe: rxe_net.c, rxe_loopback). What they cause (ACKs, responses) waits
// for the next iteration, as it would on a wire. Part of the engine's host
// side; engine thread only.

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "engine/counters.h"
#include "engine/frame_path.h"
#include "engine/host_stack.h"
#include "port/port.h"

namespace uroce::engine {

class SelfDelivery {
 public:
  /// `tap`, when set, is shown each frame looped back (not the copies of
  /// frames that also reach the wire).
  using Tap = std::function<void(wire::ConstBytes)>;
  SelfDelivery(port::Port& port, const HostStack& host, FramePath& path, EngineCounters& counters,
               const Tap& tap)
      : port_(port), host_(host), path_(path), counters_(counters), tap_(tap) {}

  /// Whether a frame is addressed to this device itself: our MAC and one of
  /// our addresses. Another program on the same port (same MAC, an address
  /// of its own) is reached through the port.
  bool to_self(const port::TxFrame& f) const;
  /// Takes a frame to ourselves off the transmit path: copied, its buffer
  /// back to the port.
  void loop_back(port::TxFrame& f);
  /// Keeps a copy of a frame that also goes to the wire (a datagram to a
  /// multicast group the device's own QPs joined).
  void copy_back(const port::TxFrame& f);
  /// Receives the frames looped back before this call; returns how many.
  std::uint32_t run(Nanos now);

 private:
  port::Port& port_;
  const HostStack& host_;
  FramePath& path_;
  EngineCounters& counters_;
  const Tap& tap_;
  std::deque<std::vector<std::uint8_t>> queue_;   ///< frames to ourselves, to receive
  std::deque<std::vector<std::uint8_t>> batch_;   ///< the ones being received
  std::vector<std::vector<std::uint8_t>> spare_;  ///< their buffers, for reuse
};

}  // namespace uroce::engine
