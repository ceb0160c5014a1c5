/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/recv_queue.h"

#include <cerrno>

namespace uroce::transport {

RecvQueue::RecvQueue(std::uint32_t max_wr, std::uint32_t max_sge)
    : ring_(max_wr == 0 ? 1 : max_wr), max_sge_(max_sge) {}

int RecvQueue::post(const RecvWr& wr) {
  if (wr.num_sge > max_sge_) return EINVAL;
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) >= ring_.size()) return ENOMEM;
  ring_[tail % ring_.size()] = wr;
  tail_.store(tail + 1, std::memory_order_release);
  return 0;
}

bool RecvQueue::take(RecvWr& out) {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  if (head == tail_.load(std::memory_order_acquire)) return false;
  out = ring_[head % ring_.size()];
  head_.store(head + 1, std::memory_order_release);
  // The SRQ limit event (IBA 11.5.2.2 / 10.2.9.6): fewer WRs left than the
  // limit, reported once, then disarmed.
  if (const std::uint32_t limit = limit_.load(std::memory_order_relaxed);
      limit != 0 && tail_.load(std::memory_order_acquire) - (head + 1) < limit &&
      limit_.exchange(0, std::memory_order_acq_rel) != 0 && events_) {
    events_->srq_limit_reached(*this);
  }
  return true;
}

}  // namespace uroce::transport
