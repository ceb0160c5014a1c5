/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The engine of a device daemon (lib/daemon) serves the programs of its
// host: it has no QPs of its own, and what the wire brings for theirs it
// hands to a Forwarder, which puts each frame in the ring of the program
// that owns the QP. The Forwarder also brings the programs' frames to the
// engine's transmit path once per iteration, so that they leave through
// the same backlog, self-delivery and fault decorator as the engine's own.

#include <cstdint>

#include "engine/frame_path.h"
#include "wire/bytes.h"
#include "wire/roce_parser.h"

namespace uroce::engine {

class Forwarder {
 public:
  /// A RoCEv2 frame to one of the device's addresses that passed every
  /// check of the receive path (ICRC, lengths, version), parsed as `pkt`,
  /// for a QPN no QP of the engine has. False when nobody owns the QPN.
  virtual bool forward_roce(const wire::RocePacket& pkt, wire::ConstBytes frame) = 0;
  /// A frame every program of the device hears: a datagram to a multicast
  /// group (each program's engine knows its own groups), MAC control
  /// (PAUSE and PFC pause every program's QPs), ARP and neighbour
  /// discovery (each program's engine learns its peers' MACs from them).
  virtual void forward_all(wire::ConstBytes frame) = 0;
  /// Called once per iteration, holding the engine: takes what the
  /// programs sent and hands it to Engine::send_frames. Returns how many
  /// frames it took.
  virtual std::uint32_t pull(Nanos now) = 0;

 protected:
  ~Forwarder() = default;
};

}  // namespace uroce::engine
