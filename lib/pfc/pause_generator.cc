/* SPDX-License-Identifier: BSD-3-Clause */
#include "pfc/pause_generator.h"

namespace uroce::pfc {

PauseGenerator::PauseGenerator(const XoffConfig& cfg, Counters& counters)
    : cfg_(cfg), refresh_ns_(quanta_to_ns(cfg.quanta, cfg.speed_mbps) / 2), counters_(counters) {}

std::optional<PfcRequest> PauseGenerator::update(
    const std::array<std::uint64_t, wire::kNumPriorities>& backlog, Nanos now) {
  PfcRequest req;
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    const auto bit = static_cast<std::uint8_t>(1u << p);
    if (!(cfg_.lossless & bit)) continue;
    if (xoff_ & bit) {
      if (backlog[p] <= cfg_.xon_bytes) {
        req.class_enable |= bit;  // time 0: XON
        xoff_ &= static_cast<std::uint8_t>(~bit);
        counters_.inc(PrioCounter::kTxResume, p);
        continue;
      }
      // Still above xon: the same XOFF again before the partner's timer
      // runs out, so the pause never lapses between frames.
      if (now < refresh_at_[p]) continue;
    } else if (backlog[p] < cfg_.xoff_bytes) {
      continue;
    }
    req.class_enable |= bit;
    req.class_time[p] = cfg_.quanta;
    xoff_ |= bit;
    refresh_at_[p] = now + refresh_ns_;
    counters_.inc(PrioCounter::kTxPause, p);
  }
  if (req.class_enable == 0) return std::nullopt;
  return req;
}

}  // namespace uroce::pfc
