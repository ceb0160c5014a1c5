/* SPDX-License-Identifier: BSD-3-Clause */
// XRC domains (ibv_open_xrcd, ibv_close_xrcd) and XRC target QPs opened
// by number (ibv_open_qp). XRC SRQs are in srq_ah.cc, XRC QPs' creation
// in qp.cc.

#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "ibverbs/provider.h"

namespace uroce::ibverbs {
namespace {

// Every handle of every XRC target QP, across the process's contexts. An
// event is queued to a handle's context under the lock, and a handle
// leaves under it before its events are forgotten and it is freed.
struct TargetHandles {
  std::mutex mu;
  std::unordered_multimap<const verbs::QueuePair*, ibv_qp*> of;
};
TargetHandles& target_handles() {
  static TargetHandles* t = new TargetHandles();  // outlives every handle
  return *t;
}

}  // namespace

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  // As libibverbs' ibv_cmd_open_xrcd: the descriptor and the flags are
  // both required, and nothing else is known.
  constexpr std::uint32_t need = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  UContext* c = ours(context);
  if (!c || !attr || (attr->comp_mask & need) != need) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->comp_mask & ~need) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  verbs::Xrcd* xrcd = nullptr;
  if (int rc = verbs::Xrcd::open(*c->ctx, attr->fd, attr->oflags, &xrcd); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* x = new UXrcd();
  x->xrcd = xrcd;
  x->ibv.context = context;
  return &x->ibv;
}

int close_xrcd(ibv_xrcd* ibxrcd) {
  UXrcd* x = to_u<UXrcd>(ibxrcd);
  if (int rc = verbs::Xrcd::close(x->xrcd); rc != 0) return rc;
  delete x;
  return 0;
}

ibv_qp* xrc_target_handle(ibv_context* context, std::shared_ptr<verbs::QueuePair> qp,
                          void* qp_context) {
  auto* q = new UQp();
  q->qp = std::move(qp);
  ibv_qp& ibqp = q->ibvx.qp_base;
  ibqp.context = context;
  ibqp.qp_context = qp_context;
  ibqp.qp_num = q->qp->qpn();
  ibqp.handle = ibqp.qp_num;
  transport::QpAttr attr;
  transport::QpState state;
  q->qp->query(&attr, &state);  // a shared target's: as the last modify left it
  ibqp.state = static_cast<ibv_qp_state>(state);
  ibqp.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&ibqp.mutex, nullptr);
  pthread_cond_init(&ibqp.cond, nullptr);
  init_qp_ex(q);
  // The handle is an object of its context, which is not closed under it
  // (events are queued to that context): in another context than the
  // QP's maker, nothing else would say so.
  ours(context)->ctx->objects().acquire();
  TargetHandles& t = target_handles();
  std::lock_guard lock(t.mu);
  t.of.emplace(q->qp.get(), &ibqp);
  return &ibqp;
}

void forget_xrc_target_handle(ibv_qp* handle) {
  {
    TargetHandles& t = target_handles();
    std::lock_guard lock(t.mu);
    auto [first, last] = t.of.equal_range(to_u<UQp>(handle)->qp.get());
    for (auto it = first; it != last; ++it) {
      if (it->second == handle) {
        t.of.erase(it);
        break;
      }
    }
  }
  ours(handle->context)->ctx->objects().release();
}

bool post_xrc_target_event(const verbs::QueuePair& qp, ibv_event_type type) {
  TargetHandles& t = target_handles();
  std::lock_guard lock(t.mu);
  auto [first, last] = t.of.equal_range(&qp);
  if (first == last) return false;
  for (auto it = first; it != last; ++it) {
    ibv_async_event e{};
    e.element.qp = it->second;
    e.event_type = type;
    post_async_event(to_uctx(it->second->context), e);
  }
  return true;
}

ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* attr) {
  constexpr std::uint32_t need =
      IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  UContext* c = ours(context);
  if (!c || !attr || (attr->comp_mask & need) != need || !attr->xrcd ||
      ours(attr->xrcd->context) == nullptr || ours(attr->xrcd->context)->dev != c->dev) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // Only an XRC target QP is opened by number (IBA A14.3.3).
  if (attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  std::shared_ptr<verbs::QueuePair> qp = xrcd_of(attr->xrcd).open_target(attr->qp_num);
  if (!qp) {
    errno = EINVAL;
    return nullptr;
  }
  return xrc_target_handle(
      context, std::move(qp),
      (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr);
}

}  // namespace uroce::ibverbs
