/* SPDX-License-Identifier: BSD-3-Clause */
// Memory windows (verbs/mr.h's Mw; ibv_alloc_mw(3), ibv_bind_mw(3)).

#include <cerrno>

#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {


static_assert(static_cast<int>(verbs::WrOpcode::kBindMw) == IBV_WR_BIND_MW);
static_assert(static_cast<int>(verbs::WrOpcode::kLocalInv) == IBV_WR_LOCAL_INV);
static_assert(static_cast<int>(verbs::WcStatus::kMwBindErr) == IBV_WC_MW_BIND_ERR);
static_assert(static_cast<int>(verbs::WcOpcode::kBindMw) == IBV_WC_BIND_MW);

}  // namespace

int to_mw_bind(ibv_qp* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               verbs::MwBind* out) {
  if (mw == nullptr || !ours(mw->context)) return EINVAL;
  const verbs::Mr* mr = info.mr && ours(info.mr->context) ? to_u<UMr>(info.mr)->mr.get() : nullptr;
  if (info.length != 0 && mr == nullptr) return EINVAL;
  return to_u<UMw>(mw)->mw->bind_request(qp_of(qp).context(), rkey, mr, info.addr, info.length,
                                         info.mw_access_flags, out);
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (pd == nullptr || !ours(pd->context)) {
    errno = EINVAL;
    return nullptr;
  }
  std::unique_ptr<verbs::Mw> mw;
  if (int rc = verbs::Mw::alloc(pd_of(pd), static_cast<int>(type), &mw); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* w = new UMw();
  w->ibv.context = pd->context;
  w->ibv.pd = pd;
  w->ibv.rkey = mw->rkey();
  w->ibv.handle = mw->rkey();
  w->ibv.type = type;
  w->mw = std::move(mw);
  return &w->ibv;
}

int dealloc_mw(ibv_mw* mw) {
  if (mw == nullptr || !ours(mw->context)) return EINVAL;
  UMw* w = to_u<UMw>(mw);
  // Returns once the engine can no longer reach memory through it.
  if (int rc = verbs::Mw::destroy(w->mw); rc != 0) return rc;
  delete w;
  return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  if (qp == nullptr || !ours(qp->context) || mw_bind == nullptr || mw == nullptr ||
      !ours(mw->context) || mw->type != IBV_MW_TYPE_1)
    return EINVAL;
  if ((mw_bind->send_flags & ~static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE)) != 0)
    return EINVAL;
  verbs::Mw& w = *to_u<UMw>(mw)->mw;
  const std::uint32_t rkey = w.next_type1_key();
  verbs::SendWr wr;
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = verbs::WrOpcode::kBindMw;
  wr.send_flags = mw_bind->send_flags;
  if (int rc = to_mw_bind(qp, mw, rkey, mw_bind->bind_info, &wr.bind); rc != 0) return rc;
  verbs::QueuePair& q = qp_of(qp);
  const int rc = q.post_send(wr);
  // ibv_bind_mw(3): the window has its new key once the bind is posted.
  if (rc == 0) {
    w.set_rkey(rkey);
    mw->rkey = rkey;
  }
  q.doorbell();
  return rc;
}

}  // namespace uroce::ibverbs
