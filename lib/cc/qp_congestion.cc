/* SPDX-License-Identifier: BSD-3-Clause */
#include "cc/qp_congestion.h"

#include <algorithm>

namespace uroce::cc {

namespace {
// The pacer's bucket holds 16 KiB (four 4096-byte packets) or 50 us of the
// rate, whichever is more: slack for a poll loop that comes round late,
// but not the burst that a QP held back for milliseconds would otherwise
// pour into the very queue its rate protects (64 KiB here doubled the
// drops of the testbed's incast).
double bucket_bytes(std::uint64_t rate_bps) {
  return std::max(16384.0, static_cast<double>(rate_bps) / 8 * 50e-6);
}
}  // namespace

QpCongestion::QpCongestion(const DcqcnParams& p, std::uint64_t line_rate_bps, bool rp_enabled,
                           bool np_enabled, NotificationPoint& np, Counters& counters,
                           std::function<void()> send_cnp)
    : rp_(p, line_rate_bps),
      rp_enabled_(rp_enabled),
      np_enabled_(np_enabled),
      np_(np),
      counters_(counters),
      send_cnp_(std::move(send_cnp)),
      rate_(rp_.rate_bps()),
      target_(rp_.target_bps()),
      alpha_(rp_.alpha()) {}

void QpCongestion::publish() {
  rate_.store(rp_.rate_bps(), std::memory_order_relaxed);
  target_.store(rp_.target_bps(), std::memory_order_relaxed);
  alpha_.store(rp_.alpha(), std::memory_order_relaxed);
}

bool QpCongestion::admit(std::uint32_t bytes, Nanos now, Nanos* retry_at) {
  if (!rp_.limited()) return true;  // the common case: one branch
  rp_.advance(now);
  if (!rp_.limited()) {
    publish();
    return true;
  }
  const double rate = static_cast<double>(rp_.rate_bps());
  if (tokens_at_ != 0 && now > tokens_at_)
    tokens_ = std::min(bucket_bytes(rp_.rate_bps()),
                       tokens_ + static_cast<double>(now - tokens_at_) * rate / 8e9);
  tokens_at_ = now;
  if (tokens_ < 0) {
    *retry_at = now + static_cast<Nanos>(-tokens_ * 8e9 / rate) + 1;
    return false;
  }
  // The bucket may go into debt by one packet: the next waits for it.
  tokens_ -= bytes;
  rp_.on_sent(bytes, now);
  publish();
  return true;
}

void QpCongestion::on_ce_marked(std::uint32_t qpn, const wire::RocePacket&, Nanos now) {
  if (!np_enabled_) return;
  // An RC or UC QP has one peer: keying the limiter by our QPN is keying
  // it by the sender's.
  if (np_.on_ce(qpn, now)) {
    counters_.inc(Counter::kNpCnpSent);
    send_cnp_();
  }
}

void QpCongestion::on_cnp(std::uint32_t, Nanos now) {
  if (!rp_enabled_) return;
  const bool was_limited = rp_.limited();
  if (rp_.on_cnp(now)) {
    counters_.inc(Counter::kRpCnpHandled);
  } else {
    counters_.inc(Counter::kRpCnpIgnored);
  }
  if (!was_limited) {
    // Pacing starts now, with an empty bucket.
    tokens_ = 0;
    tokens_at_ = now;
  }
  publish();
}

}  // namespace uroce::cc
