/* SPDX-License-Identifier: BSD-3-Clause */
#include "cc/notification_point.h"

namespace uroce::cc {

bool NotificationPoint::on_ce(std::uint32_t sender_qpn, Nanos now) {
  ++marked_;
  const auto [it, fresh] = last_.try_emplace(sender_qpn, now);
  if (!fresh) {
    if (now < it->second + interval_) return false;
    it->second = now;
  }
  ++sent_;
  return true;
}

}  // namespace uroce::cc
