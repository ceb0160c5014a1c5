/* SPDX-License-Identifier: BSD-3-Clause */
// The requester: turns send WQEs into request packets, segmenting to the
// path MTU, and restarts from a PSN on go-back-N (rxe_req.c).

#include <algorithm>

#include "transport/qp.h"
#include "wire/multicast.h"

namespace uroce::transport {

using wire::Opcode;
using wire::Psn;

namespace {

// Opcode of a SEND or WRITE packet from its place in the message.
std::uint8_t send_write_opcode(wire::Transport transport, WrOpcode op, bool first, bool last) {
  if (transport == wire::Transport::kUd) {
    return static_cast<std::uint8_t>(op == WrOpcode::kSendWithImm ? Opcode::kUdSendOnlyWithImmediate
                                                                  : Opcode::kUdSendOnly);
  }
  Opcode rc;
  const bool write = op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
  const bool imm = op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
  const bool inv = op == WrOpcode::kSendWithInv;
  if (write) {
    rc = first && last ? (imm ? Opcode::kRcRdmaWriteOnlyWithImmediate : Opcode::kRcRdmaWriteOnly)
         : first       ? Opcode::kRcRdmaWriteFirst
         : last        ? (imm ? Opcode::kRcRdmaWriteLastWithImmediate : Opcode::kRcRdmaWriteLast)
                       : Opcode::kRcRdmaWriteMiddle;
  } else {
    rc = first && last ? (imm   ? Opcode::kRcSendOnlyWithImmediate
                          : inv ? Opcode::kRcSendOnlyWithInvalidate
                                : Opcode::kRcSendOnly)
         : first       ? Opcode::kRcSendFirst
         : last        ? (imm   ? Opcode::kRcSendLastWithImmediate
                          : inv ? Opcode::kRcSendLastWithInvalidate
                                : Opcode::kRcSendLast)
                       : Opcode::kRcSendMiddle;
  }
  // UC and XRC opcodes are the RC ones with their transport bits.
  return wire::with_transport(rc, transport);
}

}  // namespace

bool Qp::gather(const SendWqe& wqe, std::uint32_t offset, std::uint32_t len, TxPacket& pkt) {
  pkt.payload_len = len;
  pkt.payload_segs = 0;
  if (len == 0) return true;
  if (wqe.inline_len > 0 || (wqe.wr.send_flags & send_flags::kInline)) {
    pkt.payload[0] = wire::GatherSeg(inline_of(wqe) + offset, len);
    pkt.payload_segs = 1;
    return true;
  }
  // Walk the SGL to `offset`, then take `len` bytes, each piece resolved
  // through its lkey: a bad key or range fails the WR (LOC_PROT_ERR).
  const Sge* sges = sges_of(wqe);
  for (std::uint32_t i = 0; i < wqe.wr.num_sge && len > 0; ++i) {
    const Sge& sge = sges[i];
    if (offset >= sge.length) {
      offset -= sge.length;
      continue;
    }
    const std::uint32_t n = std::min(sge.length - offset, len);
    const MemRef ref = memory_->local(sge.lkey, sge.addr + offset, n, 0);
    if (!ref) return false;
    pkt.payload[pkt.payload_segs++] = wire::GatherSeg(ref.ptr, n);
    len -= n;
    offset = 0;
  }
  return len == 0;
}

bool Qp::build_request(SendWqe& wqe, Psn psn, std::uint32_t offset, TxPacket& pkt,
                       std::uint32_t& len, bool& last) {
  const SendWrFields& wr = wqe.wr;
  pkt.route = type_ == QpType::kUd ? &ud_route_of(wqe) : &route_template_;
  pkt.bth = wire::Bth{};
  pkt.bth.pkey = attr_.pkey;
  pkt.bth.dest_qp = type_ == QpType::kUd ? wr.ud.remote_qpn : attr_.dest_qp_num;
  // A datagram to a multicast group goes to the multicast QPN whatever
  // the WR names: every QP attached to the group is its destination.
  if (type_ == QpType::kUd && wire::is_multicast(ud_route_of(wqe).dst_ip()))
    pkt.bth.dest_qp = wire::kMulticastQpn;
  pkt.bth.psn = psn;
  pkt.bth.selective_repeat = selective_repeat_;
  pkt.payload_segs = 0;
  pkt.payload_len = 0;
  wire::ExtHeaders& ext = pkt.ext;

  switch (wr.opcode) {
    case WrOpcode::kRdmaRead: {
      // A restarted READ asks only for what is still missing: from the
      // first response PSN not received (never from the message start).
      const std::uint32_t done = offset;
      pkt.bth.opcode = wire::with_transport(Opcode::kRcRdmaReadRequest, wire_transport());
      ext.xrc_srqn = wr.xrc_remote_srqn;
      ext.reth = {wr.remote_addr + done, wr.rkey, wqe.length - done};
      len = 0;
      last = true;
      pkt.bth.ack_req = true;
      return true;
    }
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
      pkt.bth.opcode = wire::with_transport(
          wr.opcode == WrOpcode::kAtomicCmpAndSwp ? Opcode::kRcCompareSwap : Opcode::kRcFetchAdd,
          wire_transport());
      ext.xrc_srqn = wr.xrc_remote_srqn;
      ext.atomic_eth = {wr.remote_addr, wr.rkey,
                        wr.opcode == WrOpcode::kAtomicCmpAndSwp ? wr.swap : wr.compare_add,
                        wr.compare_add};
      len = 0;
      last = true;
      pkt.bth.ack_req = true;
      return true;
    default:
      break;
  }

  const bool first = offset == 0;
  len = std::min(mtu(), wqe.length - offset);
  last = offset + len == wqe.length;
  pkt.bth.opcode = send_write_opcode(wire_transport(), wr.opcode, first, last);
  const wire::OpcodeInfo& info = wire::opcode_info(pkt.bth.opcode);
  if (info.has(wire::ExtHeader::kXrcEth)) ext.xrc_srqn = wr.xrc_remote_srqn;
  if (info.has(wire::ExtHeader::kReth)) ext.reth = {wr.remote_addr, wr.rkey, wqe.length};
  if (info.has(wire::ExtHeader::kImmDt)) ext.imm_data = wr.imm_data;
  if (info.has(wire::ExtHeader::kIeth)) ext.ieth_rkey = wr.invalidate_rkey;
  if (info.has(wire::ExtHeader::kDeth)) {
    // A Q_Key with its high bit set means "use the QP's own" (IBA 10.2.5).
    ext.deth = {(wr.ud.remote_qkey & 0x80000000u) ? attr_.qkey : wr.ud.remote_qkey, qpn_};
  }
  pkt.bth.se =
      last && (wr.send_flags & send_flags::kSolicited) && info.operation == wire::Operation::kSend;
  // AckReq on the last packet of a message and every so often inside a
  // long one; UC and UD are never acknowledged.
  pkt.bth.ack_req = reliable() && (last || req_.since_ack_req + 1 >= kAckReqEveryPackets);
  return gather(wqe, offset, len, pkt);
}

bool Qp::execute_local_ops() {
  // Binds and local invalidations run in WR order, once every earlier WR
  // has completed, so a WRITE posted before a rebind still reaches the
  // window as it was (rxe runs them from the requester the same way).
  while (req_.wqe != sq_tail()) {
    SendWqe& wqe = sq_at(req_.wqe);
    if (!is_local_op(wqe.wr.opcode)) return true;
    if (req_.wqe != sq_head_.load(std::memory_order_relaxed)) return false;
    if (wqe.wr.opcode == WrOpcode::kBindMw) {
      if (!memory_->bind_mw(wqe.wr.bind)) {
        fail_head(WcStatus::kMwBindErr);
        return false;
      }
    } else if (!memory_->invalidate(wqe.wr.invalidate_rkey, false)) {
      fail_head(WcStatus::kLocQpOpErr);  // as rxe reports a failed LOCAL_INV
      return false;
    }
    if (!retire_head(WcStatus::kSuccess)) return false;
    ++req_.wqe;
  }
  return false;
}

bool Qp::requester_send_one(TxSink& sink, Nanos now) {
  const QpState s = state();
  if (s != QpState::kRts && s != QpState::kSqd) return false;
  if (comp_.rnr_until != 0 && now < comp_.rnr_until) return false;
  if (req_.gate_retry_at != 0 && now < req_.gate_retry_at) return false;
  // Selective repeat: what a SACK showed lost goes before anything new.
  if (sr_.round) [[unlikely]] {
    const Resend r = sr_resend_one(sink, now);
    if (r != Resend::kNone) return r == Resend::kSent;
  }
  // SQD finishes (and resends) the messages begun, and begins nothing.
  if (s == QpState::kSqd && (req_.wqe == sq_tail() || !sq_at(req_.wqe).started)) return false;
  if (!execute_local_ops()) return false;
  if (window_full()) return false;

  SendWqe& wqe = sq_at(req_.wqe);
  const bool rd_atomic = is_rd_atomic(wqe.wr.opcode);
  if (!wqe.started) {
    // FENCE waits for every earlier READ and ATOMIC to complete.
    if ((wqe.wr.send_flags & send_flags::kFence) && req_.rd_atomic > 0) return false;
    if (rd_atomic && req_.rd_atomic >= std::max<std::uint32_t>(1, attr_.max_rd_atomic))
      return false;  // initiator depth reached: stall, not an error
    if (type_ == QpType::kUd && wqe.length > mtu()) {
      // IBA C10-93.1.1: a UD message longer than the path MTU is not sent,
      // and the WR completes as if it had been.
      wqe.started = wqe.sent = wqe.done = true;
      ++req_.wqe;
      return false;
    }
    wqe.started = true;
    wqe.first_psn = req_.psn;
    wqe.last_psn = req_.psn + static_cast<std::int32_t>(packets_of(wqe) - 1);
    req_.offset = 0;
  }

  TxPacket pkt;
  std::uint32_t len = 0;
  bool last = false;
  if (!build_request(wqe, req_.psn, req_.offset, pkt, len, last)) {
    // The gather list names memory the QP may not read.
    fail_head(WcStatus::kLocProtErr);
    return false;
  }
  if (gate_) {
    Nanos retry_at = 0;
    if (!gate_->admit(len, now, &retry_at)) {
      req_.gate_retry_at = std::max(retry_at, now + 1);
      return false;
    }
  }
  if (!sink.transmit(pkt)) return false;
  counters_.inc(Counter::kSentPkts);
  if (rd_atomic && !wqe.counted_rd_atomic) {
    wqe.counted_rd_atomic = true;
    ++req_.rd_atomic;
  }
  req_.since_ack_req = pkt.bth.ack_req ? 0 : req_.since_ack_req + 1;

  if (wqe.wr.opcode == WrOpcode::kRdmaRead) {
    req_.psn = wqe.last_psn + 1;
  } else {
    req_.psn += 1;
    req_.offset += len;
  }
  if (last) {
    wqe.sent = true;
    if (!reliable()) wqe.done = true;  // nothing will acknowledge it
    if (pkt.bth.opcode != static_cast<std::uint8_t>(Opcode::kRcRdmaReadRequest) &&
        wire::opcode_info(pkt.bth.opcode).operation == wire::Operation::kSend)
      counters_.inc(Counter::kRdmaSends);
    ++req_.wqe;
    req_.offset = 0;
  }
  // The local ACK timer covers the packets a responder must answer, those
  // with AckReq (IBA 9.7.6.1.3). A message split over several turns of the
  // engine's scheduler (with thousands of QPs, a turn may come a local ACK
  // timeout later) would otherwise time out on packets that nothing was
  // asked to acknowledge yet, and go back to resend them.
  if (reliable() && pkt.bth.ack_req) {
    req_.ack_req_end = req_.psn;
    // Timed from the first request on, before the peer is known to keep
    // what comes out of order: its first answer then says so and gives
    // the first round trip, and tail probes can begin.
    if (selective_repeat_ && !sr_.timing) {
      if (sr_.resending && req_.psn.after(sr_.resent_to)) sr_.resending = false;
      if (!sr_.resending) {
        sr_.timing = true;
        sr_.timed = req_.psn;
        sr_.timed_at = now;
      }
    }
    arm_retransmit(now);
  } else if (sr_.peer && window_full()) {
    // The window is full: nothing goes until an answer comes, so the
    // requester is at its tail (sr_tail), though this packet asked for no
    // ACK and a running timer was armed as a full one.
    arm_retransmit(now);
  }
  return true;
}

void Qp::start_retransmit_timer(Nanos now) {
  if (attr_.timeout == 0 || comp_.rnr_until != 0) return;
  // IBA 9.7.6.1.3: local ACK timeout = 4.096 us * 2^timeout.
  const Nanos timeout = Nanos{4096} << attr_.timeout;
  if (comp_.rto_deadline != 0) {
    const bool at_tail = sr_tail();
    if (comp_.tail) {
      // A tail probe's timer, and the requester sends on: it is not at
      // its tail any more, and the full timeout runs.
      if (at_tail) return;
      comp_.tail = false;
      comp_.rto_deadline = now + timeout;
      return;
    }
    // The full timeout runs (for an AckReq sent before), and the
    // requester has come to its tail: a probe, if it comes sooner.
    const Nanos probe = at_tail ? sr_probe_timeout() : 0;
    if (probe != 0 && probe < timeout && now + probe < comp_.rto_deadline) {
      comp_.tail = true;
      comp_.rto_deadline = now + probe;
    }
    return;
  }
  // With selective repeat, a loss at the tail (nothing sent after it to
  // draw a SACK) is probed after a few round trips, not the full timeout;
  // unanswered probes back off until the full timeout is the shorter.
  const Nanos probe = sr_.peer && sr_tail() ? sr_probe_timeout() : 0;
  comp_.tail = probe != 0 && probe < timeout;
  comp_.rto_deadline = now + (comp_.tail ? probe : timeout);
}

void Qp::go_back_n(Psn psn) {
  // Find the WQE holding `psn` among those sent, and resend from that PSN:
  // from the middle of its message if need be (IBA 9.7.5.1.1; never from
  // the message start, or a lossy link livelocks on long messages).
  // WQEs that have PSNs are contiguous from the head.
  const std::uint64_t tail = sq_tail();
  for (std::uint64_t i = sq_head_.load(std::memory_order_relaxed); i != tail; ++i) {
    SendWqe& wqe = sq_at(i);
    if (!wqe.started) break;
    if (psn.before(wqe.first_psn) || psn.after(wqe.last_psn)) continue;
    const auto skipped = static_cast<std::uint32_t>(psn - wqe.first_psn);
    req_.wqe = i;
    req_.psn = psn;
    req_.offset =
        wqe.wr.opcode == WrOpcode::kAtomicCmpAndSwp || wqe.wr.opcode == WrOpcode::kAtomicFetchAndAdd
            ? 0
            : std::min(wqe.length, skipped * mtu());
    req_.since_ack_req = 0;
    // What was asked to be acknowledged from here on is asked again.
    req_.ack_req_end = psn;
    // Everything from here goes again: a recovery has nothing left to add.
    sr_.next = sr_.end;
    counters_.inc(Counter::kCompleterRetryErr);
    return;
  }
}

}  // namespace uroce::transport
