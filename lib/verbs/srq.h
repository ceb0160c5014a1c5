/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Shared receive queues (IBA 10.2.9.3, 11.2.3): a receive queue that
// several QPs of a PD take from, with its limit event.

#include <cstdint>
#include <memory>
#include <mutex>

#include "transport/recv_queue.h"
#include "verbs/pd.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

/// ibv_modify_srq's mask (IBV_SRQ_*).
namespace srq_attr {
inline constexpr int kMaxWr = 1;
inline constexpr int kLimit = 2;
}  // namespace srq_attr

class Srq : public transport::RecvQueue {
 public:
  /// An SRQ of `max_wr` WRs of `max_sge` SGEs, armed at `limit`. EINVAL
  /// for 0 or more than the device's WRs or SGEs, or a limit above max_wr.
  static int create(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                    std::unique_ptr<Srq>* out);
  /// EBUSY while QPs receive from it.
  static int destroy(std::unique_ptr<Srq>& srq);
  ~Srq();

  /// ibv_modify_srq: EINVAL for unknown mask bits or a limit above
  /// max_wr; EOPNOTSUPP for a new size (the ring keeps its size).
  int modify(int mask, std::uint32_t max_wr, std::uint32_t limit);
  /// Posts a receive; programs may post from several threads (the ring
  /// has one producer, so they take turns). 0, EINVAL or ENOMEM.
  int post_recv(const transport::RecvWr& wr);

  Pd& pd() const { return pd_; }
  std::uint32_t max_wr() const { return max_wr_; }
  UseCount& users() { return users_; }
  /// The program's handle of the SRQ (its ibv_srq), for events.
  void* handle = nullptr;

 private:
  Srq(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge)
      : transport::RecvQueue(max_wr, max_sge), pd_(pd), max_wr_(max_wr) {}
  Pd& pd_;
  const std::uint32_t max_wr_;
  std::mutex post_mu_;
  UseCount users_;
};

}  // namespace uroce::verbs
