/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A receive queue: a QP's own, or a shared receive queue (SRQ) that
// several QPs take from. The program posts; the engine takes.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "transport/events.h"
#include "transport/spin_lock.h"
#include "transport/types.h"

namespace uroce::transport {

class RecvQueue {
 public:
  RecvQueue(std::uint32_t max_wr, std::uint32_t max_sge);

  /// Posts a receive WR (program side). Returns 0, EINVAL for too many
  /// SGEs, or ENOMEM when the queue is full.
  int post(const RecvWr& wr);

  /// Takes the oldest receive WR (engine side); false when empty.
  bool take(RecvWr& out) {
    if (!many_consumers_) return take_one(out);
    std::lock_guard lock(take_lock_);
    return take_one(out);
  }
  /// QPs of several lcores' engines take from this queue (an SRQ of a
  /// device on several lcores; set once, before use): takes lock.
  void set_many_consumers() { many_consumers_ = true; }

  /// Whether a WR is waiting (engine side).
  bool empty() const {
    return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_acquire);
  }

  /// Where the limit event goes (set once, before use).
  void set_events(EventSink* events) { events_ = events; }
  /// Arms the SRQ limit (ibv_modify_srq IBV_SRQ_LIMIT): once fewer than
  /// `limit` WRs remain, the event sink hears of it, once. 0 disarms.
  void arm_limit(std::uint32_t limit) { limit_.store(limit, std::memory_order_release); }
  std::uint32_t limit() const { return limit_.load(std::memory_order_acquire); }

  std::uint32_t max_sge() const { return max_sge_; }
  std::size_t capacity_bytes() const {
    return ring_.capacity() * sizeof(Entry) + sges_.capacity() * sizeof(Sge);
  }

 private:
  // A posted WR: its id and SGE count; its SGEs are the slot's stride_ in
  // sges_, as many as the queue's max_sge (not the device's limit).
  struct Entry {
    std::uint64_t wr_id = 0;
    std::uint32_t num_sge = 0;
  };
  const std::uint32_t max_sge_;
  const std::uint32_t stride_;
  // Room for max_wr_ WRs in a power of two of slots: a slot is an index's
  // low bits (index & mask_), not a division.
  const std::uint32_t max_wr_;
  std::vector<Entry> ring_;
  const std::uint64_t mask_;
  std::vector<Sge> sges_;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::atomic<std::uint32_t> limit_{0};
  EventSink* events_ = nullptr;
  bool take_one(RecvWr& out);
  bool many_consumers_ = false;
  SpinLock take_lock_;
};

}  // namespace uroce::transport
