/* SPDX-License-Identifier: BSD-3-Clause */
// The extended CQ (ibv_create_cq_ex): the same ring as an ibv_cq, polled
// one completion at a time through start_poll / next_poll / end_poll and
// read field by field. start_poll takes the CQ's poll lock and end_poll
// gives it back, so the completion being read stays the caller's.

#include <cerrno>
#include <cstring>

#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

// What a completion can tell: everything a struct ibv_wc holds.
// Timestamps, VLANs, flow tags and tag matching are not offered.
constexpr std::uint64_t kWcFlags = IBV_WC_STANDARD_FLAGS;

UCq* from_ex(ibv_cq_ex* cq) { return reinterpret_cast<UCq*>(cq); }

// Takes the next completion into `current`; false when the ring is empty
// even after moving the engine once.
bool take(UCq* q) {
  verbs::Wc w;
  if (!q->cq->take_locked(&w)) return false;
  to_ibv_wc(w, &q->current);
  q->ibvx.wr_id = q->current.wr_id;
  q->ibvx.status = q->current.status;
  return true;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (!attr || attr->comp_mask != 0) return EINVAL;
  UCq* q = from_ex(cq);
  q->cq->lock();
  if (take(q)) return 0;
  // Empty: verbs.h says end_poll is then not called.
  q->cq->unlock();
  return ENOENT;
}

int next_poll(ibv_cq_ex* cq) { return take(from_ex(cq)) ? 0 : ENOENT; }

void end_poll(ibv_cq_ex* cq) { from_ex(cq)->cq->unlock(); }

const ibv_wc& cur(ibv_cq_ex* cq) { return from_ex(cq)->current; }

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return cur(cq).opcode; }
uint32_t read_vendor_err(ibv_cq_ex* cq) { return cur(cq).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* cq) { return cur(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return cur(cq).imm_data; }
uint32_t read_qp_num(ibv_cq_ex* cq) { return cur(cq).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cq) { return cur(cq).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return cur(cq).wc_flags; }
uint32_t read_slid(ibv_cq_ex* cq) { return cur(cq).slid; }
uint8_t read_sl(ibv_cq_ex* cq) { return cur(cq).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* cq) { return cur(cq).dlid_path_bits; }

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (!attr || attr->cqe > INT32_MAX) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->comp_mask &
       ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  // Asked for what it cannot report, or for overrun semantics it does
  // not have: not supported, as libibverbs documents for
  // ibv_create_cq_ex. A parent domain is welcome (domain.cc).
  const bool with_flags = attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS;
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (!attr->parent_domain || attr->parent_domain->context != context ||
       !pd_of(attr->parent_domain).is_parent_domain())) {
    errno = EINVAL;  // not a parent domain of this context
    return nullptr;
  }
  if ((attr->wc_flags & ~kWcFlags) != 0 ||
      (with_flags &&
       (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) != 0)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UCq* q = make_cq(context, attr->cqe, attr->cq_context, attr->channel,
                   static_cast<int>(attr->comp_vector));
  if (!q) return nullptr;
  ibv_cq_ex& x = q->ibvx;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  return &x;
}

}  // namespace uroce::ibverbs
