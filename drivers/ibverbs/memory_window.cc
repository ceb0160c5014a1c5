/* SPDX-License-Identifier: BSD-3-Clause */
// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)). A window
// is a slot of the device's MR table (verbs/mr_table.h); binding it is a
// send-queue WR the engine runs in order with the QP's other WRs, so the
// rules of a bind are checked there and a broken one completes the WR
// with IBV_WC_MW_BIND_ERR, as the verbs specify.

#include <cerrno>

#include "drivers/ibverbs/provider.h"
#include "transport/random.h"

namespace uroce::ibverbs {

namespace {

namespace tp = transport;

// The access bits a bind may give a window; the window only honours the
// remote ones (local write is the region's business).
constexpr unsigned kBindAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

static_assert(tp::access::kMwBind == IBV_ACCESS_MW_BIND);
static_assert(static_cast<int>(tp::WrOpcode::kBindMw) == IBV_WR_BIND_MW);
static_assert(static_cast<int>(tp::WrOpcode::kLocalInv) == IBV_WR_LOCAL_INV);
static_assert(static_cast<int>(tp::WcStatus::kMwBindErr) == IBV_WC_MW_BIND_ERR);
static_assert(static_cast<int>(tp::WcOpcode::kBindMw) == IBV_WC_BIND_MW);

}  // namespace

int to_mw_bind(ibv_qp* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               tp::MwBind* out) {
  if (mw == nullptr || ours(mw->context) == nullptr || mw->context != qp->context) return EINVAL;
  if ((info.mw_access_flags & ~kBindAccess) != 0) return EINVAL;  // no zero-based windows
  if (info.length != 0 &&
      (info.mr == nullptr || info.mr->context != qp->context || info.mr->pd != mw->pd))
    return EINVAL;
  const UMw* w = to_u<UMw>(mw);
  out->mw_index = w->index;
  out->mw_id = w->id;
  out->new_rkey = rkey;
  out->mr_lkey = info.length != 0 ? info.mr->lkey : 0;
  out->addr = info.addr;
  out->length = info.length;
  out->access = info.mw_access_flags;
  return 0;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  UContext* c = pd ? ours(pd->context) : nullptr;
  if (c == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  verbs::MrTable::MwInfo info;
  if (int rc = c->dev->mrs().alloc_mw(to_u<UPd>(pd)->id, static_cast<int>(type), &info); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* w = new UMw();
  w->pd = to_u<UPd>(pd);
  w->index = info.index;
  w->id = info.id;
  w->ibv.context = pd->context;
  w->ibv.pd = pd;
  w->ibv.rkey = info.rkey;
  w->ibv.handle = info.rkey;
  w->ibv.type = type;
  w->pd->users.fetch_add(1);
  return &w->ibv;
}

int dealloc_mw(ibv_mw* mw) {
  UContext* c = mw ? ours(mw->context) : nullptr;
  if (c == nullptr) return EINVAL;
  UMw* w = to_u<UMw>(mw);
  // Returns once the engine can no longer reach memory through it.
  if (int rc = c->dev->mrs().dealloc_mw(w->index, w->id); rc != 0) return rc;
  w->pd->users.fetch_sub(1);
  delete w;
  return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  if (qp == nullptr || ours(qp->context) == nullptr || mw_bind == nullptr || mw == nullptr ||
      mw->type != IBV_MW_TYPE_1)
    return EINVAL;
  if ((mw_bind->send_flags & ~static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE)) != 0)
    return EINVAL;
  // A type 1 window's new key is the device's to choose (IBA 10.6.7.2.1):
  // its slot, and 8 random bits that differ from the current ones, so the
  // old key stops working and the new one is not guessable.
  std::uint32_t low = mw->rkey & 0xFF;
  while (low == (mw->rkey & 0xFF)) low = tp::secure_random_u32() & 0xFF;
  const std::uint32_t rkey = (mw->rkey & ~0xFFu) | low;
  tp::SendWr w;
  w.wr_id = mw_bind->wr_id;
  w.opcode = tp::WrOpcode::kBindMw;
  w.send_flags = mw_bind->send_flags;
  if (int rc = to_mw_bind(qp, mw, rkey, mw_bind->bind_info, &w.bind); rc != 0) return rc;
  UQp* q = to_u<UQp>(qp);
  int rc;
  {
    std::lock_guard lock(q->post_mu);
    rc = q->qp->qp().post_send(w);
  }
  // ibv_bind_mw(3): the window has its new key once the bind is posted.
  if (rc == 0) mw->rkey = rkey;
  to_uctx(qp->context)->dev->progress().drive();
  return rc;
}

}  // namespace uroce::ibverbs
