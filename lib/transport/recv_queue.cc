/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/recv_queue.h"

#include <algorithm>
#include <bit>
#include <cerrno>

namespace uroce::transport {

RecvQueue::RecvQueue(std::uint32_t max_wr, std::uint32_t max_sge)
    : max_sge_(max_sge),
      stride_(std::max<std::uint32_t>(max_sge, 1)),
      max_wr_(max_wr == 0 ? 1 : max_wr),
      ring_(std::bit_ceil(max_wr_)),
      mask_(ring_.size() - 1),
      sges_(ring_.size() * stride_) {}

int RecvQueue::post(const RecvWr& wr) {
  if (wr.num_sge > max_sge_) return EINVAL;
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) >= max_wr_) return ENOMEM;
  const std::size_t slot = tail & mask_;
  ring_[slot] = {wr.wr_id, wr.num_sge};
  std::copy_n(wr.sg_list.begin(), wr.num_sge,
              sges_.begin() + static_cast<std::ptrdiff_t>(slot * stride_));
  tail_.store(tail + 1, std::memory_order_release);
  return 0;
}

bool RecvQueue::take_one(RecvWr& out) {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  if (head == tail_.load(std::memory_order_acquire)) return false;
  const std::size_t slot = head & mask_;
  out.wr_id = ring_[slot].wr_id;
  out.num_sge = ring_[slot].num_sge;
  std::copy_n(sges_.begin() + static_cast<std::ptrdiff_t>(slot * stride_), out.num_sge,
              out.sg_list.begin());
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
