/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/srq.h"

#include <cerrno>

#include "verbs/device.h"

namespace uroce::verbs {

int Srq::create(Pd& pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                std::unique_ptr<Srq>* out) {
  const DeviceAttr& a = pd.device().attr();
  if (max_wr == 0 || max_wr > a.max_qp_wr || max_sge == 0 || max_sge > a.max_sge ||
      limit > max_wr)
    return EINVAL;
  std::unique_ptr<Srq> s(new Srq(pd, max_wr, max_sge));
  s->set_events(pd.context().event_sink());
  s->arm_limit(limit);
  pd.users().acquire();
  *out = std::move(s);
  return 0;
}

int Srq::destroy(std::unique_ptr<Srq>& srq) {
  if (srq->users_.busy()) return EBUSY;
  srq.reset();
  return 0;
}

Srq::~Srq() { pd_.users().release(); }

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
