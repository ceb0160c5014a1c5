/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Two Ports joined back to back in memory: what one transmits, the
// other receives, in order. For engine tests that need no DPDK; they still
// run the whole engine (classification, ARP, QPs, frames on the wire).
// A pipe of several queues joins each queue to the peer's of the same
// number, as net_memif does: a frame arrives on the queue it was sent on.

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "port/port.h"

namespace uroce::test {

class PipePort : public port::Port {
 public:
  /// `speed_mbps` is what the port reports (pause quanta are timed by it).
  /// `queues`: queue 0 (this port) and the ones open_queue opens.
  explicit PipePort(wire::MacAddr mac, std::uint32_t speed_mbps = 10000, std::uint16_t queues = 1)
      : mac_(mac), speed_mbps_(speed_mbps) {
    for (std::uint16_t q = 1; q < queues; ++q)
      queues_.push_back(std::make_unique<PipePort>(mac, speed_mbps));
  }
  /// Joins a and b, and each of their queues to the other's of its number.
  static void join(PipePort& a, PipePort& b) {
    a.peer_ = &b;
    b.peer_ = &a;
    for (std::size_t q = 0; q < a.queues_.size() && q < b.queues_.size(); ++q)
      join(*a.queues_[q], *b.queues_[q]);
  }
  std::unique_ptr<port::Port> open_queue(std::uint16_t q) override;
  /// Queue q (1 and up) itself, for inspection.
  PipePort& queue(std::uint16_t q) { return *queues_.at(q - 1u); }
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
  std::vector<std::unique_ptr<PipePort>> queues_;  ///< queues 1 and up
};

}  // namespace uroce::test
