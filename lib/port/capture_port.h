/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A Port that shows a tap every frame crossing the port it wraps: each one
// received, each one the inner port is handed to transmit. It is how the
// device daemon captures (uroce-stat capture). With no tap set it costs
// one branch per burst; with one, the tap reads each frame in place (it
// copies what it keeps). Frames the device sends to itself never cross
// the port: the engine's self-delivery shows those (show()).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "port/decorator.h"
#include "port/port.h"

namespace uroce::port {

/// Which way a captured frame went.
enum class Direction : std::uint8_t {
  kInbound = 1,   ///< received from the wire
  kOutbound = 2,  ///< sent to the wire
  kLoopback = 3,  ///< sent by the device to itself, never on the wire
};

class CapturePort final : public Decorator {
 public:
  using Tap = std::function<void(Direction, wire::ConstBytes)>;

  explicit CapturePort(std::unique_ptr<Port> inner) : Decorator(std::move(inner)) {}
  CapturePort(const CapturePort&) = delete;
  CapturePort& operator=(const CapturePort&) = delete;

  /// Sets the tap (empty: nobody captures). The port's thread only.
  void set_tap(Tap tap);
  bool capturing() const { return static_cast<bool>(tap_); }
  /// Shows the tap a frame that did not cross the port (a loopback).
  void show(Direction d, wire::ConstBytes frame) {
    if (tap_) tap_(d, frame);
  }

  std::uint16_t rx_burst(RxFrame* out, std::uint16_t max) override;
  std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) override;
  void tx_free(TxFrame& frame) override;

 private:
  Tap tap_;
  /// Frames shown but not taken by the inner port: their sender retries
  /// them (or frees them), and a retry is not a second frame on the wire.
  std::vector<const std::uint8_t*> shown_;
};

}  // namespace uroce::port
