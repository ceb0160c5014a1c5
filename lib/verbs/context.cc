/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/context.h"

#include "verbs/cq.h"
#include "verbs/srq.h"

namespace uroce::verbs {

void Context::enter(const transport::Qp& qp, QueuePair& owner) {
  std::lock_guard lock(qps_mu_);
  qps_[&qp] = &owner;
}

void Context::leave(const transport::Qp& qp) {
  std::lock_guard lock(qps_mu_);
  qps_.erase(&qp);
}

// Every ring and SRQ the transport names here is a verbs object of this
// context: only Cq::create and Srq::create hand out this sink.
void Context::cq_overflow(transport::Cq& cq) {
  if (events_) events_->cq_overflow(static_cast<Cq&>(cq));
}

void Context::srq_limit_reached(transport::RecvQueue& srq) {
  if (events_) events_->srq_limit_reached(static_cast<Srq&>(srq));
}

void Context::qp_error(transport::Qp& qp, transport::QpError why) {
  // Under the lock, so that a QP being destroyed (which leaves first)
  // is never named.
  std::lock_guard lock(qps_mu_);
  const auto it = qps_.find(&qp);
  if (it != qps_.end() && events_) events_->qp_error(*it->second, why);
}

void Context::sq_drained(transport::Qp& qp) {
  std::lock_guard lock(qps_mu_);
  const auto it = qps_.find(&qp);
  if (it != qps_.end() && events_) events_->sq_drained(*it->second);
}

}  // namespace uroce::verbs
