/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Seeded impairments of one port in one direction, what netem does where
// the kernel has it: loss, duplication, reordering (a packet held back
// behind the next one), delay (fixed plus uniform jitter, order kept) and
// corruption (one bit flipped past the UDP header, so that the ICRC or a
// checksum fails).

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "pfc/counters.h"
#include "switch/frame.h"

namespace uroce::sw {

struct ImpairmentConfig {
  double loss = 0;
  double duplicate = 0;
  double reorder = 0;
  double corrupt = 0;
  Nanos delay_ns = 0;
  Nanos jitter_ns = 0;
  bool any() const {
    return loss > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delay_ns > 0 || jitter_ns > 0;
  }
};

struct ImpairmentCounters {
  counters::Counter lost, duplicated, reordered, corrupted, delayed;
};

class Impairment {
 public:
  Impairment(const ImpairmentConfig& cfg, std::uint64_t seed, ImpairmentCounters& counters)
      : cfg_(cfg), rng_(seed), counters_(counters) {}

  bool active() const { return cfg_.any(); }

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
  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  const ImpairmentConfig cfg_;
  std::mt19937_64 rng_;
  ImpairmentCounters& counters_;
  std::deque<PacketPtr> delayed_;  ///< in order of due time
  PacketPtr held_;                 ///< reordered: goes out after the next one
  Nanos held_until_ = 0;
  Nanos last_due_ = 0;
};

}  // namespace uroce::sw
