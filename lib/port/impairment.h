/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// One seeded impairment model, what netem does where the kernel has it:
// loss, duplication, reordering, corruption, delay with jitter. It decides
// what happens to each frame and flips the bits; holding frames back and
// letting them go is its user's, who knows its own buffers and clock:
// FaultPort (a Port decorator, the `[fault]` test feature), lib/switch's
// per-port impairments (with a delay line) and the transport's simulator
// (with virtual time). Kernels without netem cannot impair a veth, so
// uroce impairs itself. A seed gives one sequence of decisions, the same
// with every standard library.

#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>

#include "counters/counter_set.h"
#include "wire/bytes.h"

namespace uroce::port {

using Nanos = std::uint64_t;

/// What happens to frames in one direction of one link.
struct ImpairmentConfig {
  double drop = 0;       ///< probability a frame is lost
  double duplicate = 0;  ///< probability it arrives twice
  double reorder = 0;    ///< probability it is held back behind later frames
  double corrupt = 0;    ///< probability one bit flips (the ICRC or a checksum catches it)
  /// A fixed delay, and a uniform jitter on top (0 to jitter_ns), for users
  /// with a clock (the switch, the simulator).
  Nanos delay_ns = 0;
  Nanos jitter_ns = 0;

  bool any() const {
    return drop > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delay_ns > 0 || jitter_ns > 0;
  }
};

/// What becomes of one frame. A dropped frame is only dropped; otherwise
/// the rest combine.
struct ImpairmentDecision {
  bool drop = false;
  bool duplicate = false;
  bool reorder = false;
  bool corrupt = false;
};

/// What an impairment did, counted by its user.
enum class ImpairmentCounter : std::uint8_t {
  kDropped,
  kDuplicated,
  kReordered,
  kCorrupted,
  kDelayed,
  kCount,
};

constexpr std::string_view name(ImpairmentCounter c) {
  switch (c) {
    case ImpairmentCounter::kDropped:
      return "dropped";
    case ImpairmentCounter::kDuplicated:
      return "duplicated";
    case ImpairmentCounter::kReordered:
      return "reordered";
    case ImpairmentCounter::kCorrupted:
      return "corrupted";
    case ImpairmentCounter::kDelayed:
      return "delayed";
    case ImpairmentCounter::kCount:
      break;
  }
  return {};
}

using ImpairmentCounters = counters::CounterSet<ImpairmentCounter>;

/// Where a corruption may flip a bit of a frame: every byte from `from` on
/// but `masked`.
struct Corruptible {
  std::size_t from = 0;
  std::size_t masked = SIZE_MAX;  ///< SIZE_MAX: none
};

/// Past the UDP header of an IP frame (past the Ethernet header of any
/// other), but for the BTH's FECN/BECN byte of a RoCEv2 frame.
Corruptible corruptible(wire::ConstBytes frame);

class Impairment {
 public:
  Impairment(const ImpairmentConfig& cfg, std::uint64_t seed) : cfg_(cfg), rng_(seed) {}

  const ImpairmentConfig& config() const { return cfg_; }
  bool active() const { return cfg_.any(); }

  /// The fate of the next frame. Every rate is drawn for every frame, so
  /// one seed gives the same decisions whatever the user does with them.
  ImpairmentDecision decide();

  /// Flips one bit of `frame`, uniformly among the corruptible(frame)
  /// ones; false (nothing flipped) when there are none.
  bool corrupt(wire::Bytes frame);

  /// The delay of the next frame: delay_ns plus a uniform 0 to jitter_ns.
  Nanos delay();

  /// A uniform integer from 0 to n.
  std::uint64_t uniform(std::uint64_t n) { return rng_() % (n + 1); }

 private:
  /// True with probability p. The double is made from the generator's
  /// bits here, not by std::uniform_real_distribution, whose algorithm
  /// each standard library chooses: mt19937_64's output is the standard's.
  bool chance(double p) { return static_cast<double>(rng_() >> 11) * 0x1.0p-53 < p; }

  ImpairmentConfig cfg_;
  std::mt19937_64 rng_;
};

}  // namespace uroce::port
