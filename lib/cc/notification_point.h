/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The DCQCN notification point: for CE-marked RoCEv2 packets of a QP, one
// CNP to that QP's sender at most every min_time_between_cnps, however
// many marks arrive (Zhu et al. section 3.2; ConnectX's np_* knobs).

#include <cstdint>
#include <unordered_map>

#include "cc/params.h"

namespace uroce::cc {

class NotificationPoint {
 public:
  explicit NotificationPoint(const DcqcnParams& p)
      : interval_(std::uint64_t{p.min_time_between_cnps_us} * 1000) {}

  /// A CE-marked packet arrived from the sender's QP `sender_qpn`.
  /// Returns true if a CNP is to go to it now.
  bool on_ce(std::uint32_t sender_qpn, Nanos now);
  /// Forgets a QP (destroyed).
  void forget(std::uint32_t sender_qpn) { last_.erase(sender_qpn); }

  std::uint64_t ecn_marked() const { return marked_; }
  std::uint64_t cnp_sent() const { return sent_; }

 private:
  const Nanos interval_;
  std::unordered_map<std::uint32_t, Nanos> last_;  ///< sender QPN -> last CNP
  std::uint64_t marked_ = 0;
  std::uint64_t sent_ = 0;
};

}  // namespace uroce::cc
