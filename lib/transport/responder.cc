/* SPDX-License-Identifier: BSD-3-Clause */
// The responder: executes requests in PSN order, answers duplicates,
// NAKs gaps and errors, and sends ACKs, read responses and atomic
// acknowledgements (rxe_resp.c).

#include <algorithm>
#include <atomic>
#include <cstring>

#include "transport/qp.h"

namespace uroce::transport {

using wire::AethSyndrome;
using wire::NakCode;
using wire::Opcode;
using wire::Operation;
using wire::Position;
using wire::Psn;

bool Qp::bind_xrc_srq(std::uint32_t srqn, NakCode* code) {
  XrcSrq srq;
  switch (xrc_->find_srq(srqn, &srq)) {
    case XrcDomain::Lookup::kFound:
      rq_ = srq.rq;
      recv_cq_ = srq.cq;
      memory_ = srq.memory;
      return true;
    case XrcDomain::Lookup::kNoSuchSrq:
      if (code) *code = NakCode::kInvalidRequest;
      break;
    case XrcDomain::Lookup::kOtherDomain:
      // Another domain's SRQ is a protection violation, as another PD's
      // R_Key is.
      if (code) *code = NakCode::kRemoteAccessError;
      break;
  }
  counters_.inc(Counter::kXrcSrqErr);
  return false;
}

bool Qp::push_job(const RespJob& job) {
  if (jobs_count_ == jobs_.size()) return false;
  jobs_[(jobs_head_ + jobs_count_) % jobs_.size()] = job;
  ++jobs_count_;
  return true;
}

Qp::RespJob* Qp::find_job(RespJob::Kind kind, std::uint32_t res) {
  for (std::uint32_t k = 0; k < jobs_count_; ++k) {
    RespJob& job = jobs_[(jobs_head_ + k) % jobs_.size()];
    if (job.kind == kind && job.res == res) return &job;
  }
  return nullptr;
}

bool Qp::drop_jobs_after(Psn psn, Psn* earliest) {
  // Read response streams and atomic ACKs for PSNs after `psn`, and plain
  // ACKs beyond it, are obsolete once the requester has gone back to
  // `psn`: it asks for all of them again. NAKs stay.
  std::uint32_t kept = 0;
  bool dropped = false;
  for (std::uint32_t k = 0; k < jobs_count_; ++k) {
    const RespJob job = jobs_[(jobs_head_ + k) % jobs_.size()];
    const bool response = job.holds_resource();
    const Psn at = response ? res_[job.res].first_psn : job.psn;
    // (A SACK is never obsolete: it says what is held when it leaves, and
    // only a requester that does not go back is sent one.)
    const bool obsolete = at.after(psn) && job.kind != RespJob::Kind::kSack &&
                          (response || job.syndrome.type == wire::AethType::kAck);
    if (!obsolete) {
      jobs_[(jobs_head_ + kept++) % jobs_.size()] = job;
      continue;
    }
    if (response) {
      --res_[job.res].busy;
      if (!dropped || at.before(*earliest)) *earliest = at;
      dropped = true;
    }
  }
  jobs_count_ = kept;
  return dropped;
}

void Qp::queue_ack(Psn psn, bool ack_req) {
  // Acknowledge when asked, and at least every kAckCoalesceMax packets;
  // an ACK still waiting to go out is updated rather than doubled.
  if (!ack_req && ++resp_.since_ack < kAckCoalesceMax) return;
  resp_.since_ack = 0;
  if (jobs_count_ > 0) {
    RespJob& tail = jobs_[(jobs_head_ + jobs_count_ - 1) % jobs_.size()];
    if (tail.kind == RespJob::Kind::kAck && tail.syndrome.type == wire::AethType::kAck) {
      tail.psn = psn;
      tail.msn = resp_.msn;
      counters_.inc(Counter::kAckDeferred);
      return;
    }
    // A SACK waiting acknowledges everything executed when it leaves.
    if (tail.kind == RespJob::Kind::kSack) return;
  }
  push_job({RespJob::Kind::kAck, psn, psn, AethSyndrome::ack(), resp_.msn, 0});
}

void Qp::queue_nak(Psn psn, AethSyndrome syndrome) {
  push_job({RespJob::Kind::kAck, psn, psn, syndrome, resp_.msn, 0});
}

void Qp::responder_error(Psn psn, NakCode code, WcStatus local_status) {
  if (type_ == QpType::kUc) {
    // UC has no NAKs: the message is dropped and the QP waits for the
    // next one.
    resp_.uc_drop = true;
    resp_.in_send = resp_.in_write = false;
    counters_.inc(Counter::kDroppedInvalid);
    return;
  }
  // A class C error (IBA 9.9.3.1.2.2): NAK it, complete the receive WQE in
  // progress with the local status, and enter the error state once the
  // NAK is on the wire. An invalid request or an access violation is also
  // the QP's affiliated asynchronous error (IBA 11.6.3.1), as mlx5 reports
  // it (a responder may have no receive WQE to report it in). A remote
  // operational error is the responder's own (its receive WQE's memory):
  // that WQE's completion reports it.
  queue_nak(psn, AethSyndrome::nak(code));
  // An XRC target's WQE in progress is its SRQ's, which a shared target's
  // other process may have: that one flushes it when it sees the error.
  if (resp_.recv_taken && (xrc_ == nullptr || bind_xrc_srq(resp_.xrc_srqn))) {
    complete_recv(resp_.recv, local_status, WcOpcode::kRecv, resp_.recv_offset, 0, 0, 0);
    resp_.recv_taken = false;
  }
  resp_.fatal = true;
  fatal_nak_ = true;
  if (code == NakCode::kInvalidRequest || code == NakCode::kInvalidRdRequest)
    resp_.fatal_error = QpError::kInvalidRequest;
  else if (code == NakCode::kRemoteAccessError)
    resp_.fatal_error = QpError::kAccessViolation;
}

bool Qp::check_opcode_sequence(const wire::OpcodeInfo& info) const {
  // IBA 9.8.3.2: inside a message only its own MIDDLE and LAST may come.
  const bool cont = info.position == Position::kMiddle || info.position == Position::kLast;
  if (resp_.in_send) return cont && info.operation == Operation::kSend;
  if (resp_.in_write) return cont && info.operation == Operation::kRdmaWrite;
  return !cont;
}

bool Qp::check_length(const wire::RocePacket& pkt) const {
  // rxe_resp_check_length: FIRST and MIDDLE carry exactly one MTU, LAST
  // 1..MTU, ONLY at most one MTU.
  const std::size_t len = pkt.payload.size();
  if (!pkt.info->has_payload) return true;
  switch (pkt.info->position) {
    case Position::kFirst:
    case Position::kMiddle:
      return len == mtu();
    case Position::kLast:
      return len >= 1 && len <= mtu();
    default:
      return len <= mtu();
  }
}

bool Qp::copy_to_recv(wire::ConstBytes data, std::uint32_t offset, WcStatus* err) {
  const RecvWr& wr = resp_.recv;
  std::uint32_t done = 0;
  for (std::uint32_t i = 0; i < wr.num_sge && done < data.size(); ++i) {
    const Sge& sge = wr.sg_list[i];
    if (offset >= sge.length) {
      offset -= sge.length;
      continue;
    }
    const auto n =
        static_cast<std::uint32_t>(std::min<std::size_t>(sge.length - offset, data.size() - done));
    const MemRef ref = memory_->local(sge.lkey, sge.addr + offset, n, access::kLocalWrite);
    if (!ref) {
      // The receive WQE names memory the QP may not write: a malformed
      // WQE (rxe: RESPST_ERR_MALFORMED_WQE).
      *err = WcStatus::kLocQpOpErr;
      return false;
    }
    std::memcpy(ref.ptr, data.data() + done, n);
    done += n;
    offset = 0;
  }
  if (done < data.size()) {
    *err = WcStatus::kLocLenErr;  // the message is longer than the buffers
    return false;
  }
  return true;
}

bool Qp::take_recv(Psn psn) {
  if (resp_.recv_taken) return true;
  if (!rq_->take(resp_.recv)) {
    // No receive WQE: RNR NAK, and the requester retries this PSN after
    // the time we ask for (IBA 9.7.5.2.8). UC simply drops the message.
    if (reliable()) {
      queue_nak(psn, AethSyndrome::rnr_nak(attr_.min_rnr_timer));
      counters_.inc(Counter::kSendRnrErr);
    } else {
      responder_error(psn, NakCode::kInvalidRequest, WcStatus::kSuccess);
    }
    return false;
  }
  resp_.recv_taken = true;
  return true;
}

bool Qp::execute_send(const wire::RocePacket& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.starts_message()) {
    if (!take_recv(pkt.bth.psn)) return false;
    resp_.recv_offset = 0;
  }
  WcStatus err = WcStatus::kSuccess;
  if (!copy_to_recv(pkt.payload, resp_.recv_offset, &err)) {
    responder_error(
        pkt.bth.psn,
        err == WcStatus::kLocLenErr ? NakCode::kInvalidRequest : NakCode::kRemoteOperationalError,
        err);
    return false;
  }
  resp_.recv_offset += static_cast<std::uint32_t>(pkt.payload.size());
  resp_.in_send = !info.ends_message();
  if (info.ends_message()) {
    unsigned flags = 0;
    std::uint32_t imm = 0;
    if (info.has_immediate()) {
      flags |= wc_flags::kWithImm;
      imm = pkt.ext.imm_data;
    }
    if (info.has_invalidate()) {
      if (!memory_->invalidate(pkt.ext.ieth_rkey, true)) {
        responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kLocQpOpErr);
        return false;
      }
      flags |= wc_flags::kWithInv;
      imm = pkt.ext.ieth_rkey;
    }
    complete_recv(resp_.recv, WcStatus::kSuccess, WcOpcode::kRecv, resp_.recv_offset, flags, imm, 0,
                  pkt.bth.se);
    resp_.recv_taken = false;
    counters_.inc(Counter::kRdmaRecvs);
  }
  return true;
}

bool Qp::execute_write(const wire::RocePacket& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.starts_message()) {
    const wire::Reth& reth = pkt.ext.reth;
    if (reth.dma_length > kMaxMessageSize ||
        (info.ends_message() && reth.dma_length != pkt.payload.size())) {
      responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
      return false;
    }
    write_data_ = nullptr;
    resp_.write_token = token_;
    // A zero-length WRITE checks no R_Key (IBA C9-88).
    if (reth.dma_length > 0) {
      const MemRef ref = memory_->remote(reth.rkey, reth.va, reth.dma_length, access::kRemoteWrite);
      if (!ref) {
        responder_error(pkt.bth.psn, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr);
        return false;
      }
      write_data_ = ref.ptr;
    }
    write_length_ = reth.dma_length;
    write_offset_ = 0;
  } else if (resp_.write_token != token_) {
    // Another Qp of a shared target began it: not this one's to write.
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
    return false;
  }
  // WRITE with immediate consumes a receive WQE, checked before its last
  // packet writes anything so an RNR retry finds memory as it was.
  if (info.has_immediate() && !take_recv(pkt.bth.psn)) return false;
  const std::size_t n = pkt.payload.size();
  if (write_offset_ + n > write_length_) {
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
    return false;
  }
  if (n > 0) std::memcpy(write_data_ + write_offset_, pkt.payload.data(), n);
  write_offset_ += static_cast<std::uint32_t>(n);
  resp_.in_write = !info.ends_message();
  if (info.ends_message() && info.has_immediate()) {
    complete_recv(resp_.recv, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm, write_length_,
                  wc_flags::kWithImm, pkt.ext.imm_data, 0, pkt.bth.se);
    resp_.recv_taken = false;
    counters_.inc(Counter::kRdmaRecvs);
  }
  return true;
}

std::uint32_t Qp::alloc_resource() {
  // Oldest first; a resource a response stream still reads is not reused.
  const auto n = static_cast<std::uint32_t>(res_.size());
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t i = (resp_.res_next + k) % n;
    if (res_[i].busy == 0) {
      resp_.res_next = (i + 1) % n;
      return i;
    }
  }
  return n;
}

bool Qp::execute_read(const wire::RocePacket& pkt) {
  const wire::Reth& reth = pkt.ext.reth;
  if (res_.empty() || reth.dma_length > kMaxMessageSize) {
    // max_dest_rd_atomic 0: this QP takes no READs (IBA 9.4.3).
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
    return false;
  }
  if (reth.dma_length > 0 &&
      !memory_->remote(reth.rkey, reth.va, reth.dma_length, access::kRemoteRead)) {
    responder_error(pkt.bth.psn, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr);
    return false;
  }
  const std::uint32_t r = alloc_resource();
  if (r == res_.size() || jobs_count_ == jobs_.size()) return false;  // dropped; retried
  const std::uint32_t npsn = std::max<std::uint32_t>(1, (reth.dma_length + mtu() - 1) / mtu());
  resp_.msn = (resp_.msn + 1) & wire::kPsnMask;  // C9-148: one MSN per READ
  res_[r] = {
      true,      true,      pkt.bth.psn,     pkt.bth.psn + static_cast<std::int32_t>(npsn - 1),
      reth.va,   reth.rkey, reth.dma_length, 0,
      resp_.msn, 1,         resp_.xrc_srqn};
  push_job({RespJob::Kind::kRead, pkt.bth.psn, pkt.bth.psn, AethSyndrome::ack(), resp_.msn, r});
  resp_.epsn = pkt.bth.psn + static_cast<std::int32_t>(npsn);
  return true;
}

bool Qp::execute_atomic(const wire::RocePacket& pkt) {
  const wire::AtomicEth& a = pkt.ext.atomic_eth;
  if (res_.empty() || (a.va & 7) != 0) {
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
    return false;
  }
  const MemRef ref = memory_->remote(a.rkey, a.va, 8, access::kRemoteAtomic);
  if (!ref) {
    responder_error(pkt.bth.psn, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr);
    return false;
  }
  if (reinterpret_cast<std::uintptr_t>(ref.ptr) % alignof(std::uint64_t) != 0) {
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
    return false;
  }
  const std::uint32_t r = alloc_resource();
  if (r == res_.size() || jobs_count_ == jobs_.size()) return false;  // dropped; retried
  // Atomic with respect to other atomics on this host (IBV_ATOMIC_HCA).
  std::atomic_ref<std::uint64_t> target(*reinterpret_cast<std::uint64_t*>(ref.ptr));
  std::uint64_t orig;
  if (pkt.info->operation == Operation::kCompareSwap) {
    orig = a.compare;
    target.compare_exchange_strong(orig, a.swap_add);
  } else {
    orig = target.fetch_add(a.swap_add);
  }
  resp_.msn = (resp_.msn + 1) & wire::kPsnMask;
  res_[r] = {true, false, pkt.bth.psn, pkt.bth.psn, a.va,          a.rkey,
             8,    orig,  resp_.msn,   1,           resp_.xrc_srqn};
  push_job(
      {RespJob::Kind::kAtomicAck, pkt.bth.psn, pkt.bth.psn, AethSyndrome::ack(), resp_.msn, r});
  resp_.epsn = pkt.bth.psn + 1;
  return true;
}

void Qp::responder_execute(const wire::RocePacket& pkt, Nanos /*now*/) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (!check_opcode_sequence(info) || !check_length(pkt)) {
    responder_error(pkt.bth.psn, NakCode::kInvalidRequest, WcStatus::kLocLenErr);
    return;
  }
  if (xrc_ != nullptr) {
    // An XRC target: the XRCETH names the SRQ, in every packet of a
    // message the same one (IBA A14.8.2).
    NakCode code = NakCode::kInvalidRequest;
    const std::uint32_t srqn = pkt.ext.xrc_srqn;
    if ((!info.starts_message() && srqn != resp_.xrc_srqn) || !bind_xrc_srq(srqn, &code)) {
      // The WQE in progress, if any, was its SRQ's: not ours to complete.
      resp_.recv_taken = false;
      responder_error(pkt.bth.psn, code, WcStatus::kRemInvReqErr);
      return;
    }
    resp_.xrc_srqn = srqn;
  }
  // The QP's own remote access enables (set by Modify QP) come before any
  // R_Key: an operation they do not allow is a remote access error.
  if (info.starts_message()) {
    unsigned need = 0;
    if (info.operation == Operation::kRdmaWrite) need = access::kRemoteWrite;
    if (info.operation == Operation::kRdmaReadRequest) need = access::kRemoteRead;
    if (info.operation == Operation::kCompareSwap || info.operation == Operation::kFetchAdd)
      need = access::kRemoteAtomic;
    if ((attr_.qp_access_flags & need) != need) {
      responder_error(pkt.bth.psn, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr);
      return;
    }
  }
  bool ok = false;
  switch (info.operation) {
    case Operation::kSend:
      ok = execute_send(pkt);
      break;
    case Operation::kRdmaWrite:
      ok = execute_write(pkt);
      break;
    case Operation::kRdmaReadRequest:
      ok = execute_read(pkt);
      break;
    case Operation::kCompareSwap:
    case Operation::kFetchAdd:
      ok = execute_atomic(pkt);
      break;
    default:
      break;
  }
  if (!ok) return;
  resp_.nak_sent = false;
  if (info.operation == Operation::kSend || info.operation == Operation::kRdmaWrite) {
    resp_.epsn = pkt.bth.psn + 1;
    if (info.ends_message()) resp_.msn = (resp_.msn + 1) & wire::kPsnMask;
    if (reliable()) queue_ack(pkt.bth.psn, pkt.bth.ack_req);
  }
}

void Qp::responder_duplicate(const wire::RocePacket& pkt, Nanos /*now*/) {
  counters_.inc(Counter::kDuplicateRequest);
  const Psn psn = pkt.bth.psn;
  // The requester went back to this PSN (go-back-N): what is queued for
  // later PSNs is obsolete, since it asks for all of it again, and answers
  // must keep PSN order. Queued behind a long READ stream that every
  // duplicate READ restarts, an answer to an earlier PSN would never go.
  Psn first_dropped;
  const bool dropped = drop_jobs_after(psn, &first_dropped);
  switch (pkt.info->operation) {
    case Operation::kRdmaReadRequest:
      // Re-execute from the duplicate's PSN, out of the saved resource
      // (IBA 9.7.5.1.5); no resource, no answer.
      for (std::uint32_t i = 0; i < res_.size(); ++i) {
        RespResource& r = res_[i];
        if (!r.valid || !r.is_read || psn.before(r.first_psn) || psn.after(r.last_psn) ||
            r.rkey != pkt.ext.reth.rkey)
          continue;
        // A stream of this resource still queued (it is the last job now)
        // restarts where asked, as rxe replays its current resource.
        if (RespJob* job = find_job(RespJob::Kind::kRead, i)) {
          job->psn = job->start = psn;
        } else if (push_job({RespJob::Kind::kRead, psn, psn, AethSyndrome::ack(), r.msn, i})) {
          ++r.busy;
        }
        return;
      }
      return;
    case Operation::kCompareSwap:
    case Operation::kFetchAdd:
      // Never executed twice: the saved result is sent again.
      for (std::uint32_t i = 0; i < res_.size(); ++i) {
        RespResource& r = res_[i];
        if (!r.valid || r.is_read || r.first_psn != psn) continue;
        if (!find_job(RespJob::Kind::kAtomicAck, i) &&
            push_job({RespJob::Kind::kAtomicAck, psn, psn, AethSyndrome::ack(), r.msn, i}))
          ++r.busy;
        return;
      }
      return;
    default: {
      // IBA C9-105: a duplicate SEND or WRITE is acknowledged with the
      // newest executed PSN, not the duplicate's; but not past a READ or
      // ATOMIC whose answer was just dropped, which the requester would
      // otherwise take as lost (an implied NAK).
      Psn ack = resp_.epsn - 1;
      if (dropped && first_dropped.before(resp_.epsn)) ack = first_dropped - 1;
      if (ack.before(psn)) ack = psn;
      queue_nak(ack, AethSyndrome::ack());
      return;
    }
  }
}

void Qp::responder_uc(const wire::RocePacket& pkt, Nanos now) {
  const wire::OpcodeInfo& info = *pkt.info;
  if (pkt.bth.psn != resp_.epsn || resp_.uc_drop) {
    // A gap: drop to the next message start (IBA 9.8.3.1). A receive WQE
    // holding part of the lost message is reused for the next one.
    if (!info.starts_message()) {
      counters_.inc(Counter::kOutOfSeqRequest);
      resp_.uc_drop = true;
      resp_.in_send = resp_.in_write = false;
      resp_.epsn = pkt.bth.psn + 1;
      return;
    }
    resp_.uc_drop = false;
    resp_.in_send = resp_.in_write = false;
    resp_.epsn = pkt.bth.psn;
  }
  responder_execute(pkt, now);
}

void Qp::write_grh(const wire::RocePacket& pkt, std::uint8_t* grh) const {
  // RoCEv2 GRH as rdma-core reads it (ibv_create_ah_from_wc): the IPv6
  // header as received, or for IPv4 the IPv4 header in the last 20 bytes.
  std::memset(grh, 0, kGrhSize);
  const wire::ConstBytes ip = pkt.frame.subspan(pkt.l3_offset);
  if (pkt.ipv6) {
    std::memcpy(grh, ip.data(), kGrhSize);
  } else {
    std::memcpy(grh + 20, ip.data(), 20);
  }
}

void Qp::responder_ud(const wire::RocePacket& pkt, Nanos /*now*/) {
  // Q_Key mismatch: silently dropped (IBA 10.2.5; rxe_recv.c).
  if (pkt.ext.deth.qkey != attr_.qkey) {
    counters_.inc(Counter::kDroppedInvalid);
    return;
  }
  if (!rq_->take(resp_.recv)) {
    counters_.inc(Counter::kDroppedInvalid);  // no receive WQE: UD drops
    return;
  }
  resp_.recv_taken = true;
  std::uint8_t grh[kGrhSize];
  write_grh(pkt, grh);
  WcStatus err = WcStatus::kSuccess;
  const std::uint32_t len = kGrhSize + static_cast<std::uint32_t>(pkt.payload.size());
  const bool ok = copy_to_recv(wire::ConstBytes(grh, kGrhSize), 0, &err) &&
                  copy_to_recv(pkt.payload, kGrhSize, &err);
  unsigned flags = wc_flags::kGrh;
  if (pkt.info->has_immediate()) flags |= wc_flags::kWithImm;
  resp_.recv_taken = false;
  complete_recv(resp_.recv, ok ? WcStatus::kSuccess : err, WcOpcode::kRecv, len, flags,
                pkt.ext.imm_data, pkt.ext.deth.src_qp, false,
                pkt.ipv6 ? kWcSlRoceV2Ipv6 : kWcSlRoceV2Ipv4);
  if (ok) counters_.inc(Counter::kRdmaRecvs);
}

void Qp::responder_receive(const wire::RocePacket& pkt, Nanos now) {
  if (resp_.fatal) return;
  if (type_ == QpType::kUd) {
    responder_ud(pkt, now);
    return;
  }
  if (type_ == QpType::kUc) {
    responder_uc(pkt, now);
    return;
  }
  // Its responses tell a requester that offers selective repeat that
  // this end keeps requests out of order too, before any loss.
  if (pkt.bth.selective_repeat) resp_.sr_peer = selective_repeat_;
  const std::int32_t diff = pkt.bth.psn - resp_.epsn;
  if (diff > 0) {
    counters_.inc(Counter::kOutOfSeqRequest);
    // A requester that offers selective repeat resends only what is
    // missing: keep the packet, and say what is held.
    // (Up to a requester's window ahead: a request further on is not
    // ours yet, and is NAKed as under go-back-N.)
    if (selective_repeat_ && pkt.bth.selective_repeat &&
        static_cast<std::uint32_t>(diff) < kMaxUnackedPsns) {
      sr_keep(pkt);
      return;
    }
    if (shared_ != nullptr && static_cast<std::uint32_t>(diff) < kMaxUnackedPsns &&
        wait_for_other_process(pkt, now))
      return;
    // Out of sequence: one NAK per gap, then silence until the expected
    // PSN arrives (IBA 9.7.5.1.3).
    if (!resp_.nak_sent) {
      resp_.nak_sent = true;
      queue_nak(resp_.epsn, AethSyndrome::nak(NakCode::kPsnSequenceError));
      counters_.inc(Counter::kPacketSeqErr);
    }
    return;
  }
  if (diff < 0) {
    responder_duplicate(pkt, now);
    return;
  }
  // The expected PSN; with later ones kept, they follow it.
  if (sr_kept_count_ != 0) [[unlikely]] {
    sr_execute_with_kept(pkt, now);
    return;
  }
  responder_execute(pkt, now);
}

bool Qp::wait_for_other_process(const wire::RocePacket& pkt, Nanos now) {
  // Nothing kept (what was ran meanwhile): a new wait.
  if (shared_wait_since_ == 0 || sr_kept_count_ == 0) {
    shared_wait_since_ = now;
  } else if (now - shared_wait_since_ >= kSharedWaitNs) {
    sr_clear_kept();
    shared_wait_since_ = shared_wait_poll_ = 0;
    return false;
  }
  keep_request(pkt);
  shared_wait_poll_ = now + kSharedPollNs;
  return true;
}

void Qp::resume_waiting(Nanos now) {
  shared_wait_poll_ = 0;
  if (sr_kept_count_ != 0 && !resp_.fatal && sr_holds(resp_.epsn)) {
    sr_drain(now);
    shared_wait_since_ = now;  // a new wait, for what still waits
  }
  if (sr_kept_count_ == 0 || resp_.fatal) {
    sr_clear_kept();
    shared_wait_since_ = 0;
    return;
  }
  if (now - shared_wait_since_ < kSharedWaitNs) {
    shared_wait_poll_ = now + kSharedPollNs;
    return;
  }
  // The wait is over: lost on the wire, most likely. Go-back-N, as for
  // any gap.
  sr_clear_kept();
  shared_wait_since_ = 0;
  if (!resp_.nak_sent) {
    resp_.nak_sent = true;
    queue_nak(resp_.epsn, AethSyndrome::nak(NakCode::kPsnSequenceError));
    counters_.inc(Counter::kPacketSeqErr);
  }
}

bool Qp::responder_send_one(TxSink& sink, Nanos /*now*/) {
  if (jobs_count_ == 0) {
    if (fatal_nak_ && state() != QpState::kErr) {
      enter_error();
      if (events_ && resp_.fatal_error) events_->qp_error(*this, *resp_.fatal_error);
    }
    return false;
  }
  RespJob& job = jobs_[jobs_head_];
  const wire::Transport transport = wire_transport();
  TxPacket pkt;
  pkt.route = &route_template_;
  pkt.bth.pkey = attr_.pkey;
  pkt.bth.dest_qp = attr_.dest_qp_num;
  pkt.bth.psn = job.psn;
  pkt.bth.selective_repeat = resp_.sr_peer;
  std::uint8_t sack[wire::SackEth::kSize];  // a SACK's, until the frame is built
  bool done = true;
  switch (job.kind) {
    case RespJob::Kind::kAck:
      pkt.bth.opcode = wire::with_transport(Opcode::kRcAcknowledge, transport);
      pkt.ext.aeth = {job.syndrome, job.msn};
      break;
    case RespJob::Kind::kSack:
      // What the responder holds when the SACK leaves, not when queued.
      pkt.bth.opcode = static_cast<std::uint8_t>(Opcode::kSelectiveAcknowledge);
      pkt.bth.psn = sr_cumulative();
      pkt.ext.aeth = {AethSyndrome::ack(), resp_.msn};
      sr_sack(pkt.bth.psn, sack);
      pkt.ext.sack.bytes = sack;
      break;
    case RespJob::Kind::kAtomicAck: {
      const RespResource& r = res_[job.res];
      pkt.bth.opcode = wire::with_transport(Opcode::kRcAtomicAcknowledge, transport);
      pkt.ext.aeth = {AethSyndrome::ack(), r.msn};
      pkt.ext.atomic_ack_eth = {r.orig_value};
      break;
    }
    case RespJob::Kind::kRead: {
      const RespResource& r = res_[job.res];
      const std::uint32_t offset = static_cast<std::uint32_t>(job.psn - r.first_psn) * mtu();
      const std::uint32_t len = std::min(mtu(), r.length - std::min(r.length, offset));
      const bool first = job.psn == job.start;
      const bool last = job.psn == r.last_psn;
      const Opcode op = first && last ? Opcode::kRcRdmaReadResponseOnly
                        : first       ? Opcode::kRcRdmaReadResponseFirst
                        : last        ? Opcode::kRcRdmaReadResponseLast
                                      : Opcode::kRcRdmaReadResponseMiddle;
      pkt.bth.opcode = wire::with_transport(op, transport);
      pkt.ext.aeth = {AethSyndrome::ack(), r.msn};
      if (len > 0) {
        // Looked up again for every packet, never cached: the region may
        // be deregistered (or an XRC target's SRQ destroyed) while its
        // responses are still going out.
        const bool bound = xrc_ == nullptr || bind_xrc_srq(r.xrc_srqn);
        const MemRef ref = bound ? memory_->remote(r.rkey, r.va + offset, len, access::kRemoteRead)
                                 : MemRef{nullptr, MemError::kBadKey};
        if (!ref) {
          --res_[job.res].busy;
          jobs_head_ = (jobs_head_ + 1) % static_cast<std::uint32_t>(jobs_.size());
          --jobs_count_;
          return false;
        }
        pkt.payload[0] = wire::GatherSeg(ref.ptr, len);
        pkt.payload_segs = 1;
        pkt.payload_len = len;
      }
      done = last;
      break;
    }
  }
  if (!sink.transmit(pkt)) return false;
  counters_.inc(Counter::kSentPkts);
  if (job.kind == RespJob::Kind::kSack) counters_.inc(Counter::kSrSackSent);
  if (done) {
    if (job.holds_resource()) --res_[job.res].busy;
    jobs_head_ = (jobs_head_ + 1) % static_cast<std::uint32_t>(jobs_.size());
    --jobs_count_;
  } else {
    job.psn += 1;
  }
  return true;
}

}  // namespace uroce::transport
