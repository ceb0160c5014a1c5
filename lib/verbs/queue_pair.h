/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A queue pair as the verbs layer sees it: the transport's Qp with the
// memory it may reach (its PD's regions), its number on the device, and
// its place in the engine's dispatch table. Creation checks the requested
// capabilities against transport/limits.h, the way a provider does before
// it allocates anything.

#include <cstdint>
#include <memory>

#include "transport/qp.h"
#include "verbs/device.h"
#include "verbs/mr_table.h"

namespace uroce::verbs {

/// What ibv_qp_init_attr asks for.
struct QpCaps {
  transport::QpType type = transport::QpType::kRc;
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_send_sge = 0;
  std::uint32_t max_recv_sge = 0;
  std::uint32_t max_inline_data = 0;
  bool sq_sig_all = false;
};

class QueuePair {
 public:
  /// Creates a QP on `dev` in protection domain `pd`, completing into
  /// `send_cq` and `recv_cq`, receiving from `srq` if not null, and
  /// attaches it to the engine (in RESET it ignores every packet);
  /// `events`, if not null, hears of its asynchronous events.
  /// Returns 0, EINVAL for a missing CQ or capabilities beyond the
  /// device's, or EOPNOTSUPP for a QP type uroce does not offer.
  static int create(Device& dev, PdId pd, const QpCaps& caps, transport::Cq* send_cq,
                    transport::Cq* recv_cq, transport::RecvQueue* srq, transport::EventSink* events,
                    std::unique_ptr<QueuePair>* out);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  transport::Qp& qp() { return *qp_; }
  /// The capabilities granted (at least those asked for).
  const QpCaps& caps() const { return caps_; }

  /// modify_qp; `av` is needed when the mask has IBV_QP_AV.
  int modify(const transport::QpAttr& attr, const AddressVector* av, unsigned mask) {
    return dev_.modify_qp(*qp_, attr, av, mask);
  }

 private:
  QueuePair(Device& dev, PdId pd) : dev_(dev), memory_(dev.mrs(), pd) {}

  Device& dev_;
  PdMemory memory_;
  QpCaps caps_;
  // DCQCN's gate and observer outlive the QP that uses them (declared
  // first, destroyed last); the QP's address, for the CNP's route.
  std::unique_ptr<cc::QpCongestion> cc_;
  const transport::Qp* qp_raw_ = nullptr;
  std::unique_ptr<transport::Qp> qp_;
};

}  // namespace uroce::verbs
