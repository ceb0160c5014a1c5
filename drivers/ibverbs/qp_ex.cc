/* SPDX-License-Identifier: BSD-3-Clause */
// The extended post-send API (ibv_qp_ex: ibv_wr_start, ibv_wr_rdma_write,
// ibv_wr_set_sge, ibv_wr_complete, ...). Each ibv_wr_<opcode> call starts
// a WR that the set_* calls fill in; the next opcode call or
// ibv_wr_complete posts it. An error anywhere makes ibv_wr_complete fail
// and posts nothing more, as the verbs man page (ibv_wr_post(3)) says.

#include <cerrno>
#include <cstring>

#include "drivers/ibverbs/provider.h"
#include "transport/limits.h"

namespace uroce::ibverbs {

namespace {

namespace tp = transport;

UQp* of(ibv_qp_ex* qx) { return reinterpret_cast<UQp*>(qx); }

// Posts the WR being built, if any.
void flush(UQp* q) {
  if (q->wr_count == 0 || q->wr_error != 0) return;
  if (int rc = q->qp->qp().post_send(q->wr_building); rc != 0) q->wr_error = rc;
  q->wr_count = 0;
}

void begin(ibv_qp_ex* qx, tp::WrOpcode op) {
  UQp* q = of(qx);
  flush(q);
  q->wr_building = tp::SendWr{};
  q->wr_building.opcode = op;
  q->wr_building.wr_id = qx->wr_id;
  q->wr_building.send_flags = qx->wr_flags;
  q->wr_count = 1;
}

void wr_start(ibv_qp_ex* qx) {
  UQp* q = of(qx);
  q->post_mu.lock();  // held until complete or abort, as one batch
  q->wr_error = 0;
  q->wr_count = 0;
}

int wr_complete(ibv_qp_ex* qx) {
  UQp* q = of(qx);
  flush(q);
  const int rc = q->wr_error;
  q->post_mu.unlock();
  to_uctx(qx->qp_base.context)->dev->progress().drive();
  return rc;
}

void wr_abort(ibv_qp_ex* qx) {
  // WRs already handed to the send queue stay posted: uroce posts each
  // one as soon as the next begins. Only the one being built is dropped.
  UQp* q = of(qx);
  q->wr_count = 0;
  q->post_mu.unlock();
}

void wr_rdma_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr) {
  begin(qx, tp::WrOpcode::kRdmaWrite);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
}

void wr_rdma_write_imm(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  begin(qx, tp::WrOpcode::kRdmaWriteWithImm);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
  of(qx)->wr_building.imm_data = imm;
}

void wr_rdma_read(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr) {
  begin(qx, tp::WrOpcode::kRdmaRead);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
}

void wr_send(ibv_qp_ex* qx) { begin(qx, tp::WrOpcode::kSend); }

void wr_send_imm(ibv_qp_ex* qx, __be32 imm) {
  begin(qx, tp::WrOpcode::kSendWithImm);
  of(qx)->wr_building.imm_data = imm;
}

void wr_send_inv(ibv_qp_ex* qx, uint32_t invalidate_rkey) {
  begin(qx, tp::WrOpcode::kSendWithInv);
  of(qx)->wr_building.invalidate_rkey = invalidate_rkey;
}

void wr_atomic_cmp_swp(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) {
  begin(qx, tp::WrOpcode::kAtomicCmpAndSwp);
  tp::SendWr& w = of(qx)->wr_building;
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = compare;
  w.swap = swap;
}

void wr_atomic_fetch_add(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  begin(qx, tp::WrOpcode::kAtomicFetchAndAdd);
  tp::SendWr& w = of(qx)->wr_building;
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = add;
}

void wr_set_sge(ibv_qp_ex* qx, uint32_t lkey, uint64_t addr, uint32_t length) {
  tp::SendWr& w = of(qx)->wr_building;
  w.sg_list[0] = {addr, length, lkey};
  w.num_sge = 1;
}

void wr_set_sge_list(ibv_qp_ex* qx, size_t num_sge, const ibv_sge* sg_list) {
  UQp* q = of(qx);
  if (num_sge > tp::kMaxSge) {
    q->wr_error = EINVAL;
    return;
  }
  for (size_t i = 0; i < num_sge; ++i)
    q->wr_building.sg_list[i] = {sg_list[i].addr, sg_list[i].length, sg_list[i].lkey};
  q->wr_building.num_sge = static_cast<std::uint32_t>(num_sge);
}

// The program may reuse an inline buffer as soon as this returns, but
// the WR is posted later (next ibv_wr_* or ibv_wr_complete): keep a copy.
void wr_set_inline_data(ibv_qp_ex* qx, void* addr, size_t length) {
  UQp* q = of(qx);
  if (length > q->qp->caps().max_inline_data) {
    q->wr_error = EINVAL;
    return;
  }
  std::memcpy(q->inline_buf.data(), addr, length);
  q->wr_building.send_flags |= tp::send_flags::kInline;
  q->wr_building.sg_list[0] = {reinterpret_cast<std::uint64_t>(q->inline_buf.data()),
                               static_cast<std::uint32_t>(length), 0};
  q->wr_building.num_sge = 1;
}

void wr_set_ud_addr(ibv_qp_ex* qx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  UQp* q = of(qx);
  tp::SendWr& w = q->wr_building;
  w.ud.route = &to_u<UAh>(ah)->route;
  w.ud.remote_qpn = remote_qpn;
  w.ud.remote_qkey = (remote_qkey & 0x80000000u) ? q->qp->qp().attr().qkey : remote_qkey;
}

}  // namespace

void init_qp_ex(UQp* q) {
  ibv_qp_ex& x = q->ibvx;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_ud_addr = wr_set_ud_addr;
}

}  // namespace uroce::ibverbs
