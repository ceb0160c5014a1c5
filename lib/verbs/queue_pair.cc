/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/queue_pair.h"

#include <algorithm>
#include <cerrno>

#include "transport/limits.h"

namespace uroce::verbs {

int QueuePair::create(Device& dev, PdId pd, const QpCaps& caps, transport::Cq* send_cq,
                      transport::Cq* recv_cq, transport::RecvQueue* srq,
                      transport::EventSink* events, std::unique_ptr<QueuePair>* out) {
  using transport::QpType;
  if (caps.type != QpType::kRc && caps.type != QpType::kUc && caps.type != QpType::kUd)
    return EOPNOTSUPP;
  if (!send_cq || !recv_cq) return EINVAL;
  if (caps.max_send_wr > transport::kMaxQpWr || caps.max_send_sge > transport::kMaxSge ||
      caps.max_inline_data > transport::kMaxInlineData)
    return EINVAL;
  // With an SRQ the receive capabilities are the SRQ's and are ignored
  // here, as IBA 11.2.4.1 says.
  if (!srq && (caps.max_recv_wr > transport::kMaxQpWr || caps.max_recv_sge > transport::kMaxSge))
    return EINVAL;

  std::unique_ptr<QueuePair> q(new QueuePair(dev, pd));
  QpCaps& granted = q->caps_;
  granted = caps;
  // A queue of depth 0 still holds one WR; one SGE always fits.
  granted.max_send_wr = std::max(caps.max_send_wr, 1u);
  granted.max_send_sge = std::max(caps.max_send_sge, 1u);
  granted.max_recv_wr = srq ? 0 : std::max(caps.max_recv_wr, 1u);
  granted.max_recv_sge = srq ? 0 : std::max(caps.max_recv_sge, 1u);

  transport::QpInit init;
  init.type = caps.type;
  init.qpn = dev.alloc_qpn();
  init.max_send_wr = granted.max_send_wr;
  init.max_send_sge = granted.max_send_sge;
  init.max_inline_data = granted.max_inline_data;
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.srq = srq;
  init.max_recv_wr = std::max(granted.max_recv_wr, 1u);
  init.max_recv_sge = std::max(granted.max_recv_sge, 1u);
  init.sq_sig_all = caps.sq_sig_all;
  init.memory = &q->memory_;
  q->memory_.set_qpn(init.qpn);
  init.events = events;
  init.port_mtu = dev.port_attr().active_mtu;
  q->cc_ = dev.make_congestion(&q->qp_raw_);
  if (q->cc_ && caps.type != QpType::kUd) {
    // UD datagrams go to many peers: no per-QP rate for them.
    init.gate = q->cc_.get();
    init.congestion = q->cc_.get();
  }
  q->qp_ = std::make_unique<transport::Qp>(init);
  q->qp_raw_ = q->qp_.get();
  dev.engine().attach(*q->qp_);
  *out = std::move(q);
  return 0;
}

QueuePair::~QueuePair() {
  dev_.engine().detach(qp_->qpn());
  memory_.release();
  dev_.retire_qp_counters(qp_->counters());
  dev_.free_qpn(qp_->qpn());
}

}  // namespace uroce::verbs
