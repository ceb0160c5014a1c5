/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Two Ports joined back to back in memory: what one transmits, the
// other receives, in order. For engine tests that need no DPDK; they still
// run the whole engine (classification, ARP, QPs, frames on the wire).

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "port/port.h"

namespace uroce::test {

class PipePort : public port::Port {
 public:
  /// `speed_mbps` is what the port reports (pause quanta are timed by it).
  explicit PipePort(wire::MacAddr mac, std::uint32_t speed_mbps = 10000)
      : mac_(mac), speed_mbps_(speed_mbps) {}
  /// Joins a and b.
  static void join(PipePort& a, PipePort& b) {
    a.peer_ = &b;
    b.peer_ = &a;
  }
  /// Puts a frame on this port's receive side, as if the wire delivered it.
  void inject(std::vector<std::uint8_t> frame) {
    std::lock_guard lock(mu_);
    rx_.push_back(std::move(frame));
  }

  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override;
  void rx_release(port::RxFrame* frames, std::uint16_t n) override;
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override;
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override;
  void tx_free(port::TxFrame& frame) override;
  wire::MacAddr mac() const override { return mac_; }
  std::uint32_t mtu() const override { return 1500; }
  bool link_up() const override { return true; }
  std::uint32_t speed_mbps() const override { return speed_mbps_; }

  std::vector<std::vector<std::uint8_t>> sent;  ///< every frame transmitted, for inspection
  bool keep_sent = false;

 private:
  wire::MacAddr mac_;
  PipePort* peer_ = nullptr;
  std::uint32_t speed_mbps_;
  std::mutex mu_;
  std::deque<std::vector<std::uint8_t>> rx_;
  std::vector<std::unique_ptr<std::vector<std::uint8_t>>> in_use_;
};

}  // namespace uroce::test
