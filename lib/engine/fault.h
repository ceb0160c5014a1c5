/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Seeded fault injection at the port, a documented test feature (the
// `[fault]` table of the configuration): frames dropped, duplicated,
// reordered or corrupted on receive and on transmit. Kernels without netem
// cannot impair a veth, so uroce impairs itself.

#include <cstdint>
#include <random>

namespace uroce::engine {

/// Probabilities per frame, one set per direction.
struct FaultRates {
  double drop = 0;
  double duplicate = 0;
  double reorder = 0;  ///< held back behind the next few frames
  double corrupt = 0;  ///< one bit flipped (the ICRC or a checksum catches it)
  bool any() const { return drop > 0 || duplicate > 0 || reorder > 0 || corrupt > 0; }
};

struct FaultConfig {
  FaultRates rx;
  FaultRates tx;
  std::uint64_t seed = 1;
  bool enabled() const { return rx.any() || tx.any(); }
};

/// What to do with one frame.
struct FaultDecision {
  bool drop = false;
  bool duplicate = false;
  bool reorder = false;
  bool corrupt = false;
};

class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}

  bool enabled() const { return cfg_.enabled(); }
  FaultDecision rx() { return decide(cfg_.rx); }
  FaultDecision tx() { return decide(cfg_.tx); }
  /// A bit to flip in a frame of `len` bytes, past the Ethernet header.
  std::size_t pick_bit(std::size_t len) { return 14 * 8 + rng_() % ((len - 14) * 8); }

 private:
  FaultDecision decide(const FaultRates& r) {
    FaultDecision d;
    if (!r.any()) return d;
    std::uniform_real_distribution<double> u(0, 1);
    d.drop = u(rng_) < r.drop;
    d.duplicate = u(rng_) < r.duplicate;
    d.reorder = u(rng_) < r.reorder;
    d.corrupt = u(rng_) < r.corrupt;
    return d;
  }

  FaultConfig cfg_;
  std::mt19937_64 rng_;
};

}  // namespace uroce::engine
