/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// DCQCN for one QP, plugged into the transport: the transport asks its
// gate before each request packet (the reaction point's pacer, a token
// bucket at the current rate that costs one branch while the QP is not
// limited), and reports CE marks and CNPs to its observer. CE marks go
// to the device's notification point, which may answer with a CNP.
//
// Everything here runs on the engine's thread; what the stats read is
// published through relaxed atomics.

#include <atomic>
#include <cstdint>
#include <functional>

#include "cc/notification_point.h"
#include "cc/reaction_point.h"
#include "counters/counter_set.h"
#include "transport/tx.h"

namespace uroce::cc {

/// The device's DCQCN counters, under mlx5's names.
enum class Counter : std::uint8_t {
  kNpCnpSent,     ///< CNPs the notification point sent
  kRpCnpHandled,  ///< CNPs that cut a sender's rate
  kRpCnpIgnored,  ///< CNPs merged into the cut of the current period
  kCount,
};

constexpr std::string_view name(Counter c) {
  switch (c) {
    case Counter::kNpCnpSent:
      return "np_cnp_sent";
    case Counter::kRpCnpHandled:
      return "rp_cnp_handled";
    case Counter::kRpCnpIgnored:
      return "rp_cnp_ignored";
    case Counter::kCount:
      break;
  }
  return {};
}

/// DCQCN's counters of a device, named as mlx5's.
using Counters = counters::CounterSet<Counter>;

class QpCongestion final : public transport::TxGate, public transport::CongestionObserver {
 public:
  /// `send_cnp()` puts a CNP on the wire toward the QP's peer.
  QpCongestion(const DcqcnParams& p, std::uint64_t line_rate_bps, bool rp_enabled, bool np_enabled,
               NotificationPoint& np, Counters& counters, std::function<void()> send_cnp);

  bool admit(std::uint32_t bytes, Nanos now, Nanos* retry_at) override;
  void on_ce_marked(std::uint32_t qpn, const wire::RocePacket& pkt, Nanos now) override;
  void on_cnp(std::uint32_t qpn, Nanos now) override;

  // For the stats, from any thread.
  std::uint64_t rate_bps() const { return rate_.load(std::memory_order_relaxed); }
  std::uint64_t target_bps() const { return target_.load(std::memory_order_relaxed); }
  double alpha() const { return alpha_.load(std::memory_order_relaxed); }

 private:
  void publish();

  ReactionPoint rp_;
  const bool rp_enabled_;
  const bool np_enabled_;
  NotificationPoint& np_;
  Counters& counters_;
  std::function<void()> send_cnp_;
  double tokens_ = 0;  ///< bytes the pacer lets go now
  Nanos tokens_at_ = 0;
  std::atomic<std::uint64_t> rate_;
  std::atomic<std::uint64_t> target_;
  std::atomic<double> alpha_;
};

}  // namespace uroce::cc
