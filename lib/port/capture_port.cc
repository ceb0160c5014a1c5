/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/capture_port.h"

#include <algorithm>

namespace uroce::port {

void CapturePort::set_tap(Tap tap) {
  tap_ = std::move(tap);
  shown_.clear();
}

std::uint16_t CapturePort::rx_burst(RxFrame* out, std::uint16_t max) {
  const std::uint16_t n = inner_->rx_burst(out, max);
  if (tap_) {
    for (std::uint16_t i = 0; i < n; ++i) tap_(Direction::kInbound, out[i].data);
  }
  return n;
}

std::uint16_t CapturePort::tx_burst(TxFrame* frames, std::uint16_t n) {
  if (!tap_) return inner_->tx_burst(frames, n);
  // Shown before the inner port takes them: once taken, they are its.
  for (std::uint16_t i = 0; i < n; ++i) {
    const std::uint8_t* id = frames[i].room.data();
    if (std::find(shown_.begin(), shown_.end(), id) != shown_.end()) continue;
    tap_(Direction::kOutbound, wire::ConstBytes(id, frames[i].length));
  }
  const std::uint16_t taken = inner_->tx_burst(frames, n);
  shown_.clear();
  for (std::uint16_t i = taken; i < n; ++i) shown_.push_back(frames[i].room.data());
  return taken;
}

void CapturePort::tx_free(TxFrame& frame) {
  if (!shown_.empty()) std::erase(shown_, frame.room.data());
  inner_->tx_free(frame);
}

}  // namespace uroce::port
