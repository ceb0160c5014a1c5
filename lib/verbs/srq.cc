/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/srq.h"

#include <cerrno>

#include "verbs/device.h"
#include "verbs/xrcd.h"

namespace uroce::verbs {

Srq::Srq(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge)
    : transport::RecvQueue(max_wr, max_sge),
      pd_(pd),
      max_wr_(max_wr),
      memory_(pd.device().mrs(), pd.id()) {}

int Srq::create(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                std::unique_ptr<Srq>* out) {
  const DeviceAttr& a = pd.device().attr();
  if (max_wr == 0 || max_wr > a.max_qp_wr || max_sge == 0 || max_sge > a.max_sge || limit > max_wr)
    return EINVAL;
  std::unique_ptr<Srq> s(new Srq(pd, max_wr, max_sge));
  // Its QPs may be of any of the device's lcores.
  if (pd.device().lcores() > 1) s->set_many_consumers();
  s->set_events(pd.context().event_sink());
  s->arm_limit(limit);
  pd.users().acquire();
  *out = std::move(s);
  return 0;
}

int Srq::create_xrc(Pd& pd, Xrcd& xrcd, Cq& cq, std::uint32_t max_wr, std::uint32_t max_sge,
                    std::uint32_t limit, std::unique_ptr<Srq>* out) {
  Device& dev = pd.device();
  if (&xrcd.device() != &dev || &cq.context().device() != &dev) return EINVAL;
  std::unique_ptr<Srq> s;
  if (int rc = create(pd, max_wr, max_sge, limit, &s); rc != 0) return rc;
  s->srqn_ = dev.alloc_qpn();  // SRQ numbers come from the QPN space: unique, unpredictable
  if (s->srqn_ == 0) return EIO;
  s->xrcd_ = &xrcd;
  s->cq_ = &cq;
  xrcd.users().acquire();
  cq.users().acquire();
  // In a domain shared with the host's other programs, the daemon hands
  // this program the requests that name it (a daemon gone: EIO, as for
  // a QP).
  if (xrcd.host_domain() != 0 && !dev.port().add_xrc_srq(xrcd.host_domain(), s->srqn_)) {
    xrcd.users().release();
    cq.users().release();
    s->xrcd_ = nullptr;
    return EIO;
  }
  dev.xrc_domains().add_srq(s->srqn_, *s);
  *out = std::move(s);
  return 0;
}

int Srq::destroy(std::unique_ptr<Srq>& srq) {
  if (srq->users_.busy()) return EBUSY;
  srq.reset();
  return 0;
}

Srq::~Srq() {
  if (xrcd_ != nullptr) {
    // Out of the table first: from here on no target QP reaches it.
    Device& dev = pd_.device();
    if (xrcd_->host_domain() != 0) dev.port().remove_xrc_srq(srqn_);
    dev.xrc_domains().remove_srq(srqn_);
    cq_->users().release();
    xrcd_->users().release();
  }
  if (srqn_ != 0) pd_.device().free_qpn(srqn_);
  pd_.users().release();
}

int Srq::modify(int mask, std::uint32_t max_wr, std::uint32_t limit) {
  (void)max_wr;
  if ((mask & ~(srq_attr::kMaxWr | srq_attr::kLimit)) != 0) return EINVAL;
  if (mask & srq_attr::kMaxWr) return EOPNOTSUPP;
  if (mask & srq_attr::kLimit) {
    if (limit > max_wr_) return EINVAL;
    arm_limit(limit);
  }
  return 0;
}

int Srq::post_recv(const transport::RecvWr& wr) {
  std::lock_guard lock(post_mu_);
  return post(wr);
}

}  // namespace uroce::verbs
