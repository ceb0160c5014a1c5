/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/cq.h"

#include <bit>

namespace uroce::transport {

Cq::Cq(std::uint32_t depth)
    : depth_(depth == 0 ? 1 : depth), ring_(std::bit_ceil(depth_)), mask_(ring_.size() - 1) {}

// Arming and pushing race as the two sides of Dekker's algorithm: the
// program stores armed_ and then reads tail_ (the poll that follows
// ibv_req_notify_cq), the engine stores tail_ and then reads armed_. With
// release and acquire alone each load may pass the other side's store
// (x86 reorders a store with a later load), so both can miss: the program
// sees no completion and the engine sees no arm, and the program waits
// on its channel for an event that never comes. All four are sequentially
// consistent, so at least one load sees the other side's store. Only a
// CQ with a completion channel is ever armed, and only its pushes pay for
// the locked store this takes.
void Cq::arm(bool solicited_only) {
  armed_.store(solicited_only ? 2 : 1, std::memory_order_seq_cst);
}

bool Cq::push_one(const Wc& wc, bool solicited) {
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) >= depth_) {
    if (!overflowed_.exchange(true, std::memory_order_relaxed) && events_)
      events_->cq_overflow(*this);
    return false;
  }
  ring_[tail & mask_] = wc;
  // Release: the consumer sees the entry, and the payload it describes,
  // before it sees the new tail.
  if (!notifier_) {
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  tail_.store(tail + 1, std::memory_order_seq_cst);  // see arm()
  // An armed CQ notifies once; errors count as solicited (IBA 11.4.2.2).
  const std::uint8_t armed = armed_.load(std::memory_order_seq_cst);
  if (armed != 0 && (armed == 1 || solicited || wc.status != WcStatus::kSuccess) &&
      armed_.exchange(0, std::memory_order_acq_rel) != 0) {
    notifier_->notify(*this);
  }
  return true;
}

std::uint32_t Cq::poll(Wc* out, std::uint32_t max) {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  const std::uint64_t tail = tail_.load(std::memory_order_seq_cst);  // see arm()
  std::uint32_t n = 0;
  while (n < max && head + n < tail) {
    out[n] = ring_[(head + n) & mask_];
    ++n;
  }
  head_.store(head + n, std::memory_order_release);
  return n;
}

std::uint32_t Cq::remove_qp(std::uint32_t qpn) {
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  std::uint64_t kept = head;
  for (std::uint64_t i = head; i < tail; ++i) {
    const Wc wc = ring_[i & mask_];
    if (wc.qp_num == qpn) continue;
    ring_[kept & mask_] = wc;
    ++kept;
  }
  tail_.store(kept, std::memory_order_release);
  return static_cast<std::uint32_t>(tail - kept);
}

bool Cq::resize(std::uint32_t depth) {
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  if (depth == 0 || tail - head > depth) return false;
  std::vector<Wc> ring(std::bit_ceil(depth));
  for (std::uint64_t i = head; i < tail; ++i) ring[i - head] = ring_[i & mask_];
  ring_.swap(ring);
  depth_ = depth;
  mask_ = ring_.size() - 1;
  head_.store(0, std::memory_order_release);
  tail_.store(tail - head, std::memory_order_release);
  return true;
}

std::uint32_t Cq::size() const {
  return static_cast<std::uint32_t>(tail_.load(std::memory_order_acquire) -
                                    head_.load(std::memory_order_acquire));
}

}  // namespace uroce::transport
