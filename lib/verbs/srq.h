/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Shared receive queues (IBA 10.2.9.3, 11.2.3): a receive queue that
// several QPs of a PD take from, with its limit event. An XRC SRQ (IBA
// A14.3.1) belongs to an XRC domain too: it has a number, by which the
// domain's target QPs reach it, and a CQ of its own, where its receives
// complete; the RDMA requests of the messages sent to it are checked
// against its PD's memory.

#include <cstdint>
#include <memory>
#include <mutex>

#include "transport/recv_queue.h"
#include "verbs/cq.h"
#include "verbs/mr_table.h"
#include "verbs/pd.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Xrcd;

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
  /// An XRC SRQ of `xrcd`, completing into `cq`; EINVAL as create, and
  /// for a CQ or domain of another device; EIO when no number can be had
  /// (a shared device whose daemon is gone).
  static int create_xrc(Pd& pd, Xrcd& xrcd, Cq& cq, std::uint32_t max_wr, std::uint32_t max_sge,
                        std::uint32_t limit, std::unique_ptr<Srq>* out);
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
  /// XRC: the domain, the CQ, the number (ibv_get_srq_num) and the
  /// memory target QPs reach; null and 0 for a basic SRQ.
  Xrcd* xrcd() const { return xrcd_; }
  Cq* cq() const { return cq_; }
  std::uint32_t srq_num() const { return srqn_; }
  transport::MemoryAccess* memory() { return &memory_; }
  UseCount& users() { return users_; }
  /// The program's handle of the SRQ (its ibv_srq), for events.
  void* handle = nullptr;

 private:
  Srq(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge);
  Pd& pd_;
  const std::uint32_t max_wr_;
  Xrcd* xrcd_ = nullptr;
  Cq* cq_ = nullptr;
  std::uint32_t srqn_ = 0;
  PdMemory memory_;
  std::mutex post_mu_;
  UseCount users_;
};

}  // namespace uroce::verbs
