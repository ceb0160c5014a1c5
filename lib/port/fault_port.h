/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A Port that impairs the port it wraps, from a seed: the `[fault]` test
// feature. Frames received and frames transmitted are dropped,
// duplicated, held back behind later ones or have a bit flipped, each
// direction by its own lib/port model. Its user sees a Port, as eRPC keeps
// fault injection apart from its datapath (rpc_fault_inject.cc).
//
// A frame held back leaves behind the next one in its direction; when
// none comes before the port's next poll (rx_burst), it leaves then. A
// port has no clock, so delay and jitter are not applied here (the lab
// switch and the simulator apply them). Frames the device sends to itself
// never reach the port, as in a NIC: they are not impaired.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "port/impairment.h"
#include "port/params.h"
#include "port/decorator.h"
#include "port/port.h"

namespace uroce::port {

struct FaultConfig {
  ImpairmentConfig rx;  ///< frames received (delay and jitter do not apply)
  ImpairmentConfig tx;  ///< frames transmitted (likewise)
  std::uint64_t seed = 1;
  bool enabled() const { return rx.any() || tx.any(); }
};

class FaultPort final : public Decorator {
 public:
  FaultPort(std::unique_ptr<Port> inner, const FaultConfig& cfg);
  /// Frames still held go back to the inner port.
  ~FaultPort() override;
  FaultPort(const FaultPort&) = delete;
  FaultPort& operator=(const FaultPort&) = delete;

  std::uint16_t rx_burst(RxFrame* out, std::uint16_t max) override;
  /// It takes at most half a burst from the inner port (room for
  /// duplicates and held frames).
  bool short_bursts() const override { return true; }
  void rx_release(RxFrame* frames, std::uint16_t n) override;
  /// Takes every frame it has room for: what the inner port cannot take
  /// yet waits in FaultPort's queue, in order, and goes first next time.
  std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) override;

  /// What the impairments did, both directions together.
  const ImpairmentCounters& counters() const { return counters_; }
  /// Frames held back now (received and to transmit).
  std::size_t held() const { return rx_held_n_ + tx_held_n_; }
  /// Frames taken for transmission that the inner port has not taken yet.
  std::size_t queued() const { return tx_queue_n_; }

 private:
  /// A received frame in FaultPort's memory: a duplicate, or a corrupted
  /// copy (the inner port's frame is read-only and released once).
  struct Copy {
    std::vector<std::uint8_t> bytes;
  };
  bool own(const void* handle) const;
  /// A copy of `f` in a buffer of FaultPort's; false when none is free.
  bool copy(const RxFrame& f, RxFrame& out);
  void release_tx_held();
  /// Hands the queue to the inner port; true when it took all of it.
  bool flush_tx();

  Impairment rx_, tx_;
  ImpairmentCounters counters_;

  std::array<RxFrame, kMaxHeld> rx_held_;
  std::uint16_t rx_held_n_ = 0;
  std::vector<Copy> copies_;                ///< kFaultCopies buffers, allocated once
  std::vector<std::uint16_t> free_copies_;  ///< indices into copies_

  std::array<TxFrame, kFaultTxQueue> tx_queue_;
  std::uint16_t tx_queue_n_ = 0;
  std::array<TxFrame, kMaxHeld> tx_held_;
  std::uint16_t tx_held_n_ = 0;
  bool sent_since_poll_ = false;  ///< tx_burst was called since the last rx_burst
};

/// `port` itself when `cfg` impairs nothing; otherwise `port` wrapped in a
/// FaultPort.
std::unique_ptr<Port> with_faults(std::unique_ptr<Port> port, const FaultConfig& cfg);

/// Calls fn(name, value) for the `[fault]` counters (fault_dropped,
/// fault_duplicated, fault_reordered, fault_corrupted): `port`'s when it
/// is a FaultPort, zeros otherwise, so that the lines of uroce-stat do not
/// depend on the configuration.
template <typename F>
void for_each_fault_counter(const Port& p, F&& fn) {
  const auto* faults = dynamic_cast<const FaultPort*>(&p);
  std::string label;
  for (ImpairmentCounter c : {ImpairmentCounter::kDropped, ImpairmentCounter::kDuplicated,
                              ImpairmentCounter::kReordered, ImpairmentCounter::kCorrupted}) {
    label.assign("fault_").append(name(c));
    fn(std::string_view(label), faults ? faults->counters().get(c) : std::uint64_t{0});
  }
}

}  // namespace uroce::port
