/* SPDX-License-Identifier: BSD-3-Clause */
// Shared receive queues and address handles.

#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

static_assert(verbs::srq_attr::kMaxWr == IBV_SRQ_MAX_WR);
static_assert(verbs::srq_attr::kLimit == IBV_SRQ_LIMIT);

// A basic SRQ, or an XRC SRQ of `xrcd` completing into `cq`.
ibv_srq* create_srq(ibv_pd* pd, void* srq_context, const ibv_srq_attr& attr,
                    ibv_xrcd* xrcd = nullptr, ibv_cq* cq = nullptr) {
  std::unique_ptr<verbs::Srq> srq;
  const int rc = xrcd ? verbs::Srq::create_xrc(pd_of(pd), xrcd_of(xrcd), cq_of(cq), attr.max_wr,
                                               attr.max_sge, attr.srq_limit, &srq)
                      : verbs::Srq::create(pd_of(pd), attr.max_wr, attr.max_sge, attr.srq_limit,
                                           &srq);
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* s = new USrq();
  s->srq = std::move(srq);
  s->srq->handle = &s->ibv;
  s->ibv.context = pd->context;
  s->ibv.srq_context = srq_context;
  s->ibv.pd = pd;
  pthread_mutex_init(&s->ibv.mutex, nullptr);
  pthread_cond_init(&s->ibv.cond, nullptr);
  return &s->ibv;
}

}  // namespace

verbs::AddressVector to_av(const ibv_ah_attr& ah) {
  verbs::AddressVector av;
  av.has_grh = ah.is_global != 0;
  av.port_num = ah.port_num;
  av.sgid_index = ah.grh.sgid_index;
  std::memcpy(av.dgid.data(), ah.grh.dgid.raw, 16);
  av.hop_limit = ah.grh.hop_limit;
  av.traffic_class = ah.grh.traffic_class;
  av.flow_label = ah.grh.flow_label;
  return av;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  const std::uint32_t need = IBV_SRQ_INIT_ATTR_PD;
  if (!attr || (attr->comp_mask & need) != need || !attr->pd ||
      ours(attr->pd->context) != ours(context)) {
    errno = EINVAL;
    return nullptr;
  }
  constexpr std::uint32_t known =
      IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  const bool typed = attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE;
  if ((attr->comp_mask & ~known) ||
      (typed && attr->srq_type != IBV_SRQT_BASIC && attr->srq_type != IBV_SRQT_XRC)) {
    errno = EOPNOTSUPP;  // tag-matching SRQs are not offered
    return nullptr;
  }
  if (typed && attr->srq_type == IBV_SRQT_XRC) {
    // An XRC SRQ names its domain and its CQ (libibverbs' ibv_cmd_create_srq_ex).
    constexpr std::uint32_t xrc = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    if ((attr->comp_mask & xrc) != xrc || !attr->xrcd || !attr->cq ||
        ours(attr->cq->context) != ours(context) || !ours(attr->xrcd->context)) {
      errno = EINVAL;
      return nullptr;
    }
    return create_srq(attr->pd, attr->srq_context, attr->attr, attr->xrcd, attr->cq);
  }
  return create_srq(attr->pd, attr->srq_context, attr->attr);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  const verbs::Srq& s = *to_u<USrq>(srq)->srq;
  if (!srq_num || s.xrcd() == nullptr) return EINVAL;  // only an XRC SRQ has a number
  *srq_num = s.srq_num();
  return 0;
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_create_srq, "IBVERBS_1.1", nullptr, pd, srq_init_attr);
  if (!srq_init_attr) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq(pd, srq_init_attr->srq_context, srq_init_attr->attr);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
  if (!srq || !ours(srq->context))
    UROCE_FORWARD(ibv_modify_srq, "IBVERBS_1.1", ENOSYS, srq, srq_attr, srq_attr_mask);
  if (!srq_attr) return EINVAL;
  return to_u<USrq>(srq)->srq->modify(srq_attr_mask, srq_attr->max_wr, srq_attr->srq_limit);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
  if (!srq || !ours(srq->context))
    UROCE_FORWARD(ibv_query_srq, "IBVERBS_1.1", ENOSYS, srq, srq_attr);
  if (!srq_attr) return EINVAL;
  const uroce::verbs::Srq& s = *to_u<USrq>(srq)->srq;
  srq_attr->max_wr = s.max_wr();
  srq_attr->max_sge = s.max_sge();
  srq_attr->srq_limit = s.limit();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (!srq || !ours(srq->context)) UROCE_FORWARD(ibv_destroy_srq, "IBVERBS_1.1", ENOSYS, srq);
  USrq* s = to_u<USrq>(srq);
  if (int rc = uroce::verbs::Srq::destroy(s->srq); rc != 0) return rc;
  forget_async_events(ours(srq->context), srq);
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !ours(pd->context)) UROCE_FORWARD(ibv_create_ah, "IBVERBS_1.1", nullptr, pd, attr);
  if (!attr) {
    errno = EINVAL;
    return nullptr;
  }
  std::unique_ptr<uroce::verbs::Ah> ah;
  if (int rc = uroce::verbs::Ah::create(pd_of(pd), to_av(*attr), &ah); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* a = new UAh();
  a->ah = std::move(ah);
  a->ibv.context = pd->context;
  a->ibv.pd = pd;
  return &a->ibv;
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (!ah || !ours(ah->context)) UROCE_FORWARD(ibv_destroy_ah, "IBVERBS_1.1", ENOSYS, ah);
  UAh* a = to_u<UAh>(ah);
  uroce::verbs::Ah::destroy(a->ah);
  delete a;
  return 0;
}

int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  UContext* c = ours(context);
  if (!c)
    UROCE_FORWARD(ibv_init_ah_from_wc, "IBVERBS_1.1", -1, context, port_num, wc, grh, ah_attr);
  if (!wc || !grh || !ah_attr || !(wc->wc_flags & IBV_WC_GRH) || port_num != 1) {
    errno = EINVAL;
    return -1;
  }
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  const auto* raw = reinterpret_cast<const std::uint8_t*>(grh);
  uroce::wire::IpAddr src, dst;
  std::uint8_t tclass;
  // IPv6 when the GRH is an IPv6 header (version 6 in its first nibble);
  // else RoCEv2's IPv4 form, the IPv4 header in the last 20 bytes.
  if ((raw[0] >> 4) != 6) {
    // IPv4: the header sits in the GRH's last 20 bytes.
    src = uroce::wire::IpAddr::from_v4_bytes(raw + 32);
    dst = uroce::wire::IpAddr::from_v4_bytes(raw + 36);
    tclass = raw[21];
  } else {
    std::memcpy(src.bytes.data(), grh->sgid.raw, 16);
    std::memcpy(dst.bytes.data(), grh->dgid.raw, 16);
    tclass = static_cast<std::uint8_t>(be32toh(grh->version_tclass_flow) >> 20);
    ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xFFFFF;
  }
  const auto gids = c->dev->gids();
  std::size_t i = 0;
  while (i < gids.size() && gids[i] != dst) ++i;
  if (i == gids.size()) {
    errno = ENOENT;  // not sent to one of our addresses
    return -1;
  }
  std::memcpy(ah_attr->grh.dgid.raw, src.bytes.data(), 16);
  ah_attr->grh.sgid_index = static_cast<std::uint8_t>(i);
  ah_attr->grh.hop_limit = 0xFF;
  ah_attr->grh.traffic_class = tclass;
  ah_attr->is_global = 1;
  ah_attr->port_num = port_num;
  ah_attr->sl = wc->sl;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_create_ah_from_wc, "IBVERBS_1.1", nullptr, pd, wc, grh, port_num);
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}

}  // extern "C"
