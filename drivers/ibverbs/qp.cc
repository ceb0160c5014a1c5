/* SPDX-License-Identifier: BSD-3-Clause */
// Queue pairs: creation, the modify_qp state machine, queries, and the
// post_send / post_recv data path (ibv_send_wr -> verbs::SendWr).

#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"
#include "verbs/access.h"
#include "verbs/limits.h"

namespace uroce::ibverbs {

namespace {

static_assert(static_cast<int>(verbs::WrOpcode::kSendWithInv) == IBV_WR_SEND_WITH_INV);
static_assert(static_cast<int>(verbs::WrOpcode::kAtomicFetchAndAdd) == IBV_WR_ATOMIC_FETCH_AND_ADD);
static_assert(verbs::send_flags::kInline == IBV_SEND_INLINE);
static_assert(verbs::send_flags::kSolicited == IBV_SEND_SOLICITED);
static_assert(verbs::access::kRemoteAtomic == IBV_ACCESS_REMOTE_ATOMIC);
static_assert(static_cast<int>(verbs::QpState::kErr) == IBV_QPS_ERR);
static_assert(verbs::attr_mask::kDestQpn == IBV_QP_DEST_QPN);
static_assert(verbs::attr_mask::kMaxDestRdAtomic == IBV_QP_MAX_DEST_RD_ATOMIC);
static_assert(verbs::attr_mask::kCap == IBV_QP_CAP &&
              verbs::attr_mask::kAltPath == IBV_QP_ALT_PATH);

constexpr unsigned kSendFlags =
    IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;

// An enum field as the integer the program stored in it: values outside
// the enum are the program's mistake to refuse, and loading them as the
// enum would be undefined.
template <typename E>
std::uint32_t raw(const E& field) {
  static_assert(sizeof(E) == sizeof(std::uint32_t));
  std::uint32_t v;
  std::memcpy(&v, &field, sizeof(v));
  return v;
}

ibv_qp* create(ibv_context* context, const ibv_qp_init_attr_ex& a) {
  UContext* c = ours(context);
  const std::uint32_t type = raw(a.qp_type);
  if (type == IBV_QPT_XRC_RECV) {
    // An XRC target has its domain and nothing else: no PD, no CQ, no
    // queue (IBA A14.3.3; the kernel ignores the rest).
    if (!a.xrcd || !ours(a.xrcd->context) || ours(a.xrcd->context)->dev != c->dev) {
      errno = EINVAL;
      return nullptr;
    }
    std::shared_ptr<verbs::QueuePair> qp;
    if (int rc = verbs::QueuePair::create_xrc_target(xrcd_of(a.xrcd), &qp); rc != 0) {
      errno = rc;
      return nullptr;
    }
    return xrc_target_handle(context, std::move(qp), a.qp_context);
  }
  // An XRC initiator sends only: its receive CQ and SRQ are not looked at.
  const bool ini = type == IBV_QPT_XRC_SEND;
  if (!a.pd || ours(a.pd->context) != c || !a.send_cq || ours(a.send_cq->context) != c ||
      (!ini &&
       (!a.recv_cq || ours(a.recv_cq->context) != c || (a.srq && ours(a.srq->context) != c)))) {
    errno = EINVAL;
    return nullptr;
  }
  if (a.create_flags != 0 || a.rwq_ind_tbl) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  verbs::QpCaps caps;
  switch (type) {
    case IBV_QPT_XRC_SEND:
      caps.type = verbs::QpType::kXrcIni;
      break;
    case IBV_QPT_RC:
      caps.type = verbs::QpType::kRc;
      break;
    case IBV_QPT_UC:
      caps.type = verbs::QpType::kUc;
      break;
    case IBV_QPT_UD:
      caps.type = verbs::QpType::kUd;
      break;
    default:
      errno = EOPNOTSUPP;
      return nullptr;
  }
  caps.max_send_wr = a.cap.max_send_wr;
  caps.max_recv_wr = a.cap.max_recv_wr;
  caps.max_send_sge = a.cap.max_send_sge;
  caps.max_recv_sge = a.cap.max_recv_sge;
  caps.max_inline_data = a.cap.max_inline_data;
  caps.sq_sig_all = a.sq_sig_all != 0;
  std::unique_ptr<verbs::QueuePair> qp;
  const int rc =
      ini ? verbs::QueuePair::create_xrc_initiator(pd_of(a.pd), caps, cq_of(a.send_cq), &qp)
          : verbs::QueuePair::create(pd_of(a.pd), caps, cq_of(a.send_cq), cq_of(a.recv_cq),
                                     a.srq ? to_u<USrq>(a.srq)->srq.get() : nullptr, &qp);
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* q = new UQp();
  q->qp = std::move(qp);
  ibv_qp& ibqp = q->ibvx.qp_base;
  ibqp.context = context;
  ibqp.qp_context = a.qp_context;
  ibqp.pd = a.pd;
  ibqp.send_cq = a.send_cq;
  ibqp.recv_cq = ini ? nullptr : a.recv_cq;
  ibqp.srq = ini ? nullptr : a.srq;
  ibqp.qp_num = q->qp->qpn();
  ibqp.handle = ibqp.qp_num;
  ibqp.state = IBV_QPS_RESET;
  ibqp.qp_type = a.qp_type;
  pthread_mutex_init(&ibqp.mutex, nullptr);
  pthread_cond_init(&ibqp.cond, nullptr);
  init_qp_ex(q);
  q->qp->handle = &ibqp;
  return &ibqp;
}

// The granted capabilities, written back as ibv_create_qp does.
void write_caps(const UQp* q, ibv_qp_cap* cap) {
  const verbs::QpCaps& g = q->qp->caps();
  cap->max_send_wr = g.max_send_wr;
  cap->max_recv_wr = g.max_recv_wr;
  cap->max_send_sge = g.max_send_sge;
  cap->max_recv_sge = g.max_recv_sge;
  cap->max_inline_data = g.max_inline_data;
}

int to_send_wr(UQp* q, const ibv_send_wr& in, verbs::SendWr* out) {
  const std::uint32_t opcode = raw(in.opcode);
  if (opcode > IBV_WR_SEND_WITH_INV) return EINVAL;
  if (in.send_flags & ~kSendFlags) return EINVAL;
  out->wr_id = in.wr_id;
  out->opcode = static_cast<verbs::WrOpcode>(opcode);
  out->send_flags = in.send_flags;
  out->invalidate_rkey = in.invalidate_rkey;
  // A bind or a local invalidation carries no data: its SGL is not looked
  // at, as other providers ignore it.
  if (opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV) {
    out->num_sge = 0;
    if (opcode == IBV_WR_LOCAL_INV) return 0;
    // Only a type 2 window is bound by a WR; a type 1 one goes through
    // ibv_bind_mw (IBA 10.6.7.2.1). The WR's key is the program's
    // (ibv_inc_rkey of the window's).
    if (in.bind_mw.mw == nullptr || in.bind_mw.mw->type != IBV_MW_TYPE_2) return EINVAL;
    return to_mw_bind(&q->ibvx.qp_base, in.bind_mw.mw, in.bind_mw.rkey, in.bind_mw.bind_info,
                      &out->bind);
  }
  if (in.num_sge < 0 || static_cast<std::uint32_t>(in.num_sge) > verbs::kMaxSge) return EINVAL;
  out->num_sge = static_cast<std::uint32_t>(in.num_sge);
  for (int i = 0; i < in.num_sge; ++i)
    out->sg_list[static_cast<std::size_t>(i)] = {in.sg_list[i].addr, in.sg_list[i].length,
                                                 in.sg_list[i].lkey};
  out->imm_data = in.imm_data;
  switch (opcode) {
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      out->remote_addr = in.wr.atomic.remote_addr;
      out->rkey = in.wr.atomic.rkey;
      out->compare_add = in.wr.atomic.compare_add;
      out->swap = in.wr.atomic.swap;
      break;
    default:
      out->remote_addr = in.wr.rdma.remote_addr;
      out->rkey = in.wr.rdma.rkey;
      break;
  }
  if (q->qp->type() == verbs::QpType::kXrcIni) out->xrc_remote_srqn = in.qp_type.xrc.remote_srqn;
  if (q->qp->type() == verbs::QpType::kUd) {
    ibv_ah* ah = in.wr.ud.ah;
    if (!ah || !ours(ah->context)) return EINVAL;
    return q->qp->set_ud_destination(*to_u<UAh>(ah)->ah, in.wr.ud.remote_qpn, in.wr.ud.remote_qkey,
                                     out);
  }
  return 0;
}

// The transport checks the SGE count against the queue's; this bounds it
// by what a WR holds.
int to_recv_wr(const ibv_recv_wr& in, verbs::RecvWr* out) {
  if (in.num_sge < 0 || static_cast<std::uint32_t>(in.num_sge) > verbs::kMaxSge) return EINVAL;
  out->wr_id = in.wr_id;
  out->num_sge = static_cast<std::uint32_t>(in.num_sge);
  for (int i = 0; i < in.num_sge; ++i)
    out->sg_list[static_cast<std::size_t>(i)] = {in.sg_list[i].addr, in.sg_list[i].length,
                                                 in.sg_list[i].lkey};
  return 0;
}

// Posts a chain of receive WRs to `queue` (a QP or an SRQ), stopping at
// the first it refuses, which *bad then names.
template <typename Queue>
int post_recv_chain(Queue& queue, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  verbs::RecvWr r;
  for (; wr; wr = wr->next) {
    int rc = to_recv_wr(*wr, &r);
    if (rc == 0) rc = queue.post_recv(r);
    if (rc != 0) {
      if (bad) *bad = wr;
      return rc;
    }
  }
  return 0;
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  const std::uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                              IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  // An XRC target is made in its domain, every other QP in a PD.
  const bool target = attr && raw(attr->qp_type) == IBV_QPT_XRC_RECV;
  if (!attr || !(attr->comp_mask & (target ? IBV_QP_INIT_ATTR_XRCD : IBV_QP_INIT_ATTR_PD))) {
    errno = EINVAL;
    return nullptr;
  }
  // The ibv_wr_* operations uroce serves (qp_ex.cc).
  const std::uint64_t served_ops =
      IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
      IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
  if ((attr->comp_mask & ~known) || ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
                                     (attr->send_ops_flags & ~served_ops))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_qp_init_attr_ex a = *attr;
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS)) a.create_flags = 0;
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_XRCD)) a.xrcd = nullptr;
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD)) a.pd = nullptr;
  a.rwq_ind_tbl = nullptr;
  ibv_qp* qp = create(context, a);
  if (qp) write_caps(to_u<UQp>(qp), &attr->cap);
  return qp;
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  UQp* q = to_u<UQp>(ibqp);
  int rc = 0;
  {
    q->qp->lock_send();
    verbs::SendWr w;
    for (; wr; wr = wr->next) {
      rc = to_send_wr(q, *wr, &w);
      if (rc == 0) rc = q->qp->post_send_locked(w);
      if (rc != 0) break;
    }
    q->qp->unlock_send();
  }
  if (rc != 0 && bad) *bad = wr;
  q->qp->doorbell();
  return rc;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  // It receives from its SRQ (or, an XRC end, from none), whatever the chain.
  if (qp_of(qp).caps().max_recv_wr == 0) {
    if (bad) *bad = wr;
    return EINVAL;
  }
  return post_recv_chain(qp_of(qp), wr, bad);
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_recv_chain(*to_u<USrq>(srq)->srq, wr, bad);
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;
namespace verbs = uroce::verbs;

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_create_qp, "IBVERBS_1.1", nullptr, pd, qp_init_attr);
  if (!qp_init_attr) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr_ex a{};
  std::memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  ibv_qp* qp = create(pd->context, a);
  if (qp) write_caps(to_u<UQp>(qp), &qp_init_attr->cap);
  return qp;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (!qp || !ours(qp->context)) UROCE_FORWARD(ibv_qp_to_qp_ex, "IBVERBS_1.6", nullptr, qp);
  return &to_u<UQp>(qp)->ibvx;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (!qp || !ours(qp->context))
    UROCE_FORWARD(ibv_modify_qp, "IBVERBS_1.1", ENOSYS, qp, attr, attr_mask);
  UQp* q = to_u<UQp>(qp);
  if (!attr) return EINVAL;
  namespace am = verbs::attr_mask;
  const unsigned mask = static_cast<unsigned>(attr_mask);
  const std::uint32_t state = raw(attr->qp_state), cur_state = raw(attr->cur_qp_state);
  // Enum fields out of their enum's range are refused before they are
  // loaded as the enum (undefined); the transport refuses a path MTU
  // code outside 1..5.
  if ((mask & am::kState) && state > IBV_QPS_ERR) return EINVAL;
  if ((mask & am::kCurState) && cur_state > IBV_QPS_ERR) return EINVAL;

  uroce::verbs::QpModify m;
  verbs::QpAttr& a = m.attr;
  a.qp_state = static_cast<verbs::QpState>(state);
  a.path_mtu = static_cast<uroce::wire::Mtu>(raw(attr->path_mtu));
  a.qkey = attr->qkey;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.dest_qp_num = attr->dest_qp_num;
  a.qp_access_flags = attr->qp_access_flags;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  a.en_sqd_async_notify = attr->en_sqd_async_notify != 0;
  m.cur_state = static_cast<verbs::QpState>(cur_state);
  m.port_num = attr->port_num;
  m.pkey_index = attr->pkey_index;
  if (mask & am::kAv) m.av = to_av(attr->ah_attr);
  if (int rc = q->qp->modify(m, mask); rc != 0) return rc;
  if (mask & am::kAv) q->ah_attr = attr->ah_attr;
  if (mask & am::kState) qp->state = static_cast<ibv_qp_state>(state);
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  if (!qp || !ours(qp->context))
    UROCE_FORWARD(ibv_query_qp, "IBVERBS_1.1", ENOSYS, qp, attr, attr_mask, init_attr);
  if (!attr || !init_attr) return EINVAL;
  UQp* q = to_u<UQp>(qp);
  verbs::QpAttr a;
  verbs::QpState state;
  q->qp->query(&a, &state);
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = static_cast<ibv_qp_state>(state);
  attr->cur_qp_state = attr->qp_state;
  attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = a.qp_access_flags;
  write_caps(q, &attr->cap);
  attr->ah_attr = q->ah_attr;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = 1;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = a.sq_draining;
  std::memset(init_attr, 0, sizeof(*init_attr));
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  write_caps(q, &init_attr->cap);
  init_attr->qp_type = qp->qp_type;
  init_attr->sq_sig_all = q->qp->caps().sq_sig_all;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  // No QP is EINVAL, where libibverbs would fault: librdmacm's
  // rdma_destroy_qp passes the id's QP unchecked, and Debian's qperf
  // (0.4.11) calls it on its listening id, which has none, at the end of
  // every -cm1 test.
  if (!qp) return EINVAL;
  if (!ours(qp->context)) UROCE_FORWARD(ibv_destroy_qp, "IBVERBS_1.1", ENOSYS, qp);
  UQp* q = to_u<UQp>(qp);
  // Once it is destroyed no event names it, no packet reaches it and
  // nothing completes into its CQs any more; then the events queued for it
  // go. A QP still attached to a multicast group stays (EBUSY).
  // An XRC target QP goes with its last handle; until then the others
  // get its events.
  if (qp->qp_type == IBV_QPT_XRC_RECV) forget_xrc_target_handle(qp);
  if (int rc = uroce::verbs::QueuePair::destroy(q->qp); rc != 0) return rc;
  forget_async_events(to_uctx(qp->context), qp);
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

}  // extern "C"
