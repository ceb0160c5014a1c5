/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The impairments of one switch port in one direction: lib/port's seeded
// model decides (loss, duplication, reordering, corruption, delay and
// jitter); here a packet held back for reordering goes out behind the next
// one (or after a hold limit), and a delay line keeps the order.

#include <cstdint>
#include <deque>
#include <vector>

#include "port/impairment.h"
#include "switch/frame.h"

namespace uroce::sw {

using ImpairmentConfig = port::ImpairmentConfig;

class Impairment {
 public:
  Impairment(const ImpairmentConfig& cfg, std::uint64_t seed, port::ImpairmentCounters& counters)
      : model_(cfg, seed), counters_(counters) {}

  bool active() const { return model_.active(); }

  /// Takes a packet; what may leave now is appended to `out`, in order.
  void push(PacketPtr p, Nanos now, PacketPool& pool, std::vector<PacketPtr>& out);
  /// Appends the packets whose time has come to `out`.
  void release(Nanos now, std::vector<PacketPtr>& out);
  /// Whether packets are held (delayed or held back).
  bool holding() const { return held_ || !delayed_.empty(); }
  /// Drops everything held (the link went down).
  void clear(PacketPool& pool);

 private:
  void emit(PacketPtr p, Nanos now, std::vector<PacketPtr>& out);

  port::Impairment model_;
  port::ImpairmentCounters& counters_;
  std::deque<PacketPtr> delayed_;  ///< in order of due time
  PacketPtr held_;                 ///< reordered: goes out after the next one
  Nanos held_until_ = 0;
  Nanos last_due_ = 0;
};

}  // namespace uroce::sw
