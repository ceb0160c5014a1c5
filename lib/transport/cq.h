/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A completion queue: a ring of work completions, written by the engine
// thread and read by the program (single producer, single consumer); on
// a device on several lcores, written by each under a lock.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "transport/events.h"
#include "transport/spin_lock.h"
#include "transport/types.h"

namespace uroce::transport {

class Cq;

/// Told when an armed CQ gets a completion (a completion channel).
class CqNotifier {
 public:
  virtual ~CqNotifier() = default;
  virtual void notify(Cq& cq) = 0;
};

class Cq {
 public:
  /// A CQ holding up to `depth` completions.
  explicit Cq(std::uint32_t depth);

  /// Adds a completion; false when the CQ is full (the CQ overflowed: the
  /// QP that completes into it goes to the error state, IBA 11.4.2.1).
  /// `solicited`: the completion of a message that asked for an event.
  bool push(const Wc& wc, bool solicited = false) {
    if (!many_producers_) return push_one(wc, solicited);
    std::lock_guard lock(push_lock_);
    return push_one(wc, solicited);
  }
  /// QPs of several lcores' engines complete into this CQ (set once,
  /// before use): pushes take a lock.
  void set_many_producers() { many_producers_ = true; }

  /// Where armed notifications go (set once, before use).
  void set_notifier(CqNotifier* n) { notifier_ = n; }
  /// Where an overflow is reported (set once, before use).
  void set_events(EventSink* e) { events_ = e; }
  /// ibv_req_notify_cq: the next completion (with solicited_only, the
  /// next solicited or error completion) notifies once.
  void arm(bool solicited_only);

  /// Takes up to `max` completions, oldest first; returns how many.
  std::uint32_t poll(Wc* out, std::uint32_t max);

  /// Removes the completions of QP `qpn`, keeping the others in order
  /// (a QP moved to RESET, as mlx5 cleans its CQs). Returns how many went.
  /// Only while neither producer nor consumer runs: the caller holds the
  /// engine and the CQ's poll lock.
  std::uint32_t remove_qp(std::uint32_t qpn);

  /// Gives the CQ room for `depth` completions, keeping those waiting in
  /// order; false (nothing changes) when more than `depth` wait. Under the
  /// same rule as remove_qp.
  bool resize(std::uint32_t depth);

  std::uint32_t depth() const { return depth_; }
  /// Completions waiting (a snapshot).
  std::uint32_t size() const;
  bool overflowed() const { return overflowed_.load(std::memory_order_relaxed); }

 private:
  // Room for depth_ completions in a power of two of slots: a slot is an
  // index's low bits, where a division took a fifth of push's time.
  bool push_one(const Wc& wc, bool solicited);
  std::uint32_t depth_;
  std::vector<Wc> ring_;
  std::uint64_t mask_;
  // Free-running indices; the slot is index & mask_.
  alignas(64) std::atomic<std::uint64_t> head_{0};  // consumer
  alignas(64) std::atomic<std::uint64_t> tail_{0};  // producer
  std::atomic<bool> overflowed_{false};
  // 0: not armed, 1: armed for any completion, 2: for solicited ones.
  std::atomic<std::uint8_t> armed_{0};
  CqNotifier* notifier_ = nullptr;
  EventSink* events_ = nullptr;
  bool many_producers_ = false;
  SpinLock push_lock_;
};

}  // namespace uroce::transport
