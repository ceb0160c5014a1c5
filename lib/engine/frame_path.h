/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The engine's two frame paths, as the host side's parts see them (the
// host stack, the receive buffer, self-delivery): what they receive goes
// through the engine's dispatch, what they send through its transmit path.

#include <cstdint>

#include "port/port.h"
#include "wire/bytes.h"

namespace uroce::engine {

/// The engine's clock, in nanoseconds (transport::Nanos).
using Nanos = std::uint64_t;

class FramePath {
 public:
  /// Classifies a received frame and hands it on: to the host stack, to
  /// PFC, or to the QP its BTH names.
  virtual void receive(wire::ConstBytes frame, Nanos now) = 0;
  /// Sends frames built in the port's buffers, which are the path's from
  /// then on: to the device itself, or to the port behind what waits.
  virtual void transmit(port::TxFrame* frames, std::uint16_t n) = 0;

 protected:
  ~FramePath() = default;
};

}  // namespace uroce::engine
