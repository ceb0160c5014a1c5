/* SPDX-License-Identifier: BSD-3-Clause */
// The extended post-send API (ibv_qp_ex: ibv_wr_start, ibv_wr_rdma_write,
// ibv_wr_set_sge, ibv_wr_complete, ...). Each ibv_wr_<opcode> call starts
// a WR that the set_* calls fill in; the batch is posted by
// ibv_wr_complete and dropped by ibv_wr_abort. An error in building makes
// ibv_wr_complete fail and post nothing, as ibv_wr_post(3) says.

#include <cerrno>
#include <cstring>

#include "ibverbs/provider.h"
#include "verbs/limits.h"

namespace uroce::ibverbs {

namespace {


UQp* of(ibv_qp_ex* qx) { return reinterpret_cast<UQp*>(qx); }

// Adds the WR being built, if any, to the batch.
void finish(UQp* q) {
  if (q->wr_count == 0) return;
  if (q->wr_error == 0)
    q->wr_batch.push_back({q->wr_building, std::move(q->wr_inline), q->wr_inline_set});
  q->wr_inline.clear();
  q->wr_inline_set = false;
  q->wr_count = 0;
}

void begin(ibv_qp_ex* qx, verbs::WrOpcode op) {
  UQp* q = of(qx);
  finish(q);
  q->wr_building = verbs::SendWr{};
  q->wr_building.opcode = op;
  q->wr_building.wr_id = qx->wr_id;
  q->wr_building.send_flags = qx->wr_flags;
  q->wr_inline.clear();
  q->wr_inline_set = false;
  q->wr_count = 1;
}

// XRC: the remote SRQ of the WR being built (an XRC initiator's).
void wr_set_xrc_srqn(ibv_qp_ex* qx, uint32_t remote_srqn) {
  of(qx)->wr_building.xrc_remote_srqn = remote_srqn;
}

void wr_start(ibv_qp_ex* qx) {
  UQp* q = of(qx);
  q->qp->lock_send();  // held until complete or abort: one batch at a time
  q->wr_error = 0;
  q->wr_count = 0;
  q->wr_batch.clear();
}

// Posts the batch, stopping at the first WR the QP refuses.
int wr_complete(ibv_qp_ex* qx) {
  UQp* q = of(qx);
  finish(q);
  int rc = q->wr_error;
  for (std::size_t i = 0; rc == 0 && i < q->wr_batch.size(); ++i) {
    UQp::BatchedWr& b = q->wr_batch[i];
    if (b.inline_set) {
      b.wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(b.inline_data.data()),
                         static_cast<std::uint32_t>(b.inline_data.size()), 0};
      b.wr.num_sge = 1;
    }
    rc = q->qp->post_send_locked(b.wr);
  }
  q->wr_batch.clear();
  q->qp->unlock_send();
  q->qp->doorbell();
  return rc;
}

// Nothing of the batch was posted: it all goes (ibv_wr_post(3)).
void wr_abort(ibv_qp_ex* qx) {
  UQp* q = of(qx);
  q->wr_count = 0;
  q->wr_batch.clear();
  q->qp->unlock_send();
}

// What uroce does not offer still needs an entry: the ibv_wr_* inlines
// call it unchecked. The batch then fails at ibv_wr_complete.
void unsupported(ibv_qp_ex* qx) {
  of(qx)->wr_error = EOPNOTSUPP;
  of(qx)->wr_count = 0;
}
void wr_send_tso(ibv_qp_ex* qx, void*, uint16_t, uint16_t) { unsupported(qx); }
void wr_atomic_write(ibv_qp_ex* qx, uint32_t, uint64_t, const void*) { unsupported(qx); }

// A type 2 window only, as ibv_wr_bind_mw(3) says; a bad bind fails the
// batch with EINVAL.
void wr_bind_mw(ibv_qp_ex* qx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  begin(qx, verbs::WrOpcode::kBindMw);
  UQp* q = of(qx);
  if (mw == nullptr || info == nullptr || mw->type != IBV_MW_TYPE_2 ||
      to_mw_bind(&qx->qp_base, mw, rkey, *info, &q->wr_building.bind) != 0) {
    q->wr_error = EINVAL;
    q->wr_count = 0;
  }
}

void wr_local_inv(ibv_qp_ex* qx, uint32_t invalidate_rkey) {
  begin(qx, verbs::WrOpcode::kLocalInv);
  of(qx)->wr_building.invalidate_rkey = invalidate_rkey;
}

void wr_rdma_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr) {
  begin(qx, verbs::WrOpcode::kRdmaWrite);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
}

void wr_rdma_write_imm(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  begin(qx, verbs::WrOpcode::kRdmaWriteWithImm);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
  of(qx)->wr_building.imm_data = imm;
}

void wr_rdma_read(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr) {
  begin(qx, verbs::WrOpcode::kRdmaRead);
  of(qx)->wr_building.rkey = rkey;
  of(qx)->wr_building.remote_addr = remote_addr;
}

void wr_send(ibv_qp_ex* qx) { begin(qx, verbs::WrOpcode::kSend); }

void wr_send_imm(ibv_qp_ex* qx, __be32 imm) {
  begin(qx, verbs::WrOpcode::kSendWithImm);
  of(qx)->wr_building.imm_data = imm;
}

void wr_send_inv(ibv_qp_ex* qx, uint32_t invalidate_rkey) {
  begin(qx, verbs::WrOpcode::kSendWithInv);
  of(qx)->wr_building.invalidate_rkey = invalidate_rkey;
}

void wr_atomic_cmp_swp(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) {
  begin(qx, verbs::WrOpcode::kAtomicCmpAndSwp);
  verbs::SendWr& w = of(qx)->wr_building;
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = compare;
  w.swap = swap;
}

void wr_atomic_fetch_add(ibv_qp_ex* qx, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  begin(qx, verbs::WrOpcode::kAtomicFetchAndAdd);
  verbs::SendWr& w = of(qx)->wr_building;
  w.rkey = rkey;
  w.remote_addr = remote_addr;
  w.compare_add = add;
}

void wr_set_sge(ibv_qp_ex* qx, uint32_t lkey, uint64_t addr, uint32_t length) {
  verbs::SendWr& w = of(qx)->wr_building;
  w.sg_list[0] = {addr, length, lkey};
  w.num_sge = 1;
}

void wr_set_sge_list(ibv_qp_ex* qx, size_t num_sge, const ibv_sge* sg_list) {
  UQp* q = of(qx);
  if (num_sge > verbs::kMaxSge) {
    q->wr_error = EINVAL;
    return;
  }
  for (size_t i = 0; i < num_sge; ++i)
    q->wr_building.sg_list[i] = {sg_list[i].addr, sg_list[i].length, sg_list[i].lkey};
  q->wr_building.num_sge = static_cast<std::uint32_t>(num_sge);
}

// The program may reuse its inline buffers as soon as this returns, but
// the batch is posted later: keep a copy with the WR.
void wr_set_inline_data_list(ibv_qp_ex* qx, size_t num_buf, const ibv_data_buf* buf_list) {
  UQp* q = of(qx);
  q->wr_inline.clear();
  for (size_t i = 0; i < num_buf; ++i) {
    if (buf_list[i].length > q->qp->caps().max_inline_data - q->wr_inline.size()) {
      q->wr_error = EINVAL;
      return;
    }
    const auto* p = static_cast<const std::uint8_t*>(buf_list[i].addr);
    q->wr_inline.insert(q->wr_inline.end(), p, p + buf_list[i].length);
  }
  q->wr_building.send_flags |= verbs::send_flags::kInline;
  q->wr_inline_set = true;
}

void wr_set_inline_data(ibv_qp_ex* qx, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qx, 1, &buf);
}

void wr_set_ud_addr(ibv_qp_ex* qx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  UQp* q = of(qx);
  if (!ah || !ours(ah->context)) {
    q->wr_error = EINVAL;  // not an address handle of a uroce device
    return;
  }
  // The transport copies the route at post.
  if (int rc = q->qp->set_ud_destination(*to_u<UAh>(ah)->ah, remote_qpn, remote_qkey,
                                         &q->wr_building);
      rc != 0)
    q->wr_error = rc;
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
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_atomic_write = wr_atomic_write;
}

}  // namespace uroce::ibverbs
