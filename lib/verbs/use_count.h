/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What uses a verbs object. A PD used by a region, a CQ used by a QP, an
// SRQ used by a QP, ... cannot be destroyed: the call fails with EBUSY,
// as the kernel's uverbs answers (and rxe's pool references enforce).
//
// An imported object's handle may go while objects made with it live
// (ibv_unimport_pd before the QPs of the PD are destroyed: the kernel
// keeps its object): it is then abandoned, and the last release frees it.
// Uses come and go on the control path only, so a mutex keeps the
// decision to free in one place.

#include <cstdint>
#include <functional>
#include <mutex>

namespace uroce::verbs {

class UseCount {
 public:
  void acquire() {
    std::lock_guard lock(mu_);
    ++n_;
  }
  void release() {
    std::unique_lock lock(mu_);
    if (--n_ != 0 || !reap_) return;
    auto reap = std::move(reap_);
    lock.unlock();
    reap();  // frees the object, and this with it
  }
  /// True while anything still uses the object.
  bool busy() const {
    std::lock_guard lock(mu_);
    return n_ != 0;
  }
  /// The object's owner lets it go: if it is in use, `reap` (which frees
  /// it) runs at the last release and this returns true; otherwise the
  /// owner frees it now (false).
  bool abandon(std::function<void()> reap) {
    std::lock_guard lock(mu_);
    if (n_ == 0) return false;
    reap_ = std::move(reap);
    return true;
  }

 private:
  mutable std::mutex mu_;
  std::uint32_t n_ = 0;
  std::function<void()> reap_;
};

}  // namespace uroce::verbs
