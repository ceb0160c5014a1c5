/* SPDX-License-Identifier: BSD-3-Clause */
// The completer: acknowledgements and responses become completions; NAKs,
// skipped responses and timeouts become go-back-N retries (rxe_comp.c).

#include <algorithm>
#include <cstring>

#include "transport/qp.h"

namespace uroce::transport {

using wire::AethType;
using wire::NakCode;
using wire::Psn;

void Qp::complete_local_done() {
  // UC and UD WQEs complete once their last packet is out, in order.
  for (std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
       head != req_.wqe && sq_at(head).done; head = sq_head_.load(std::memory_order_relaxed)) {
    if (!retire_head(WcStatus::kSuccess)) return;
  }
}

void Qp::progress(Nanos now) {
  // Forward progress resets the retry budgets (IBA 9.7.5.2.8) and pushes
  // the local ACK timeout back.
  comp_.retry_cnt = attr_.retry_cnt;
  comp_.rnr_retry = attr_.rnr_retry;
  comp_.retry_pending = false;
  comp_.rto_deadline = 0;
  comp_.tail_probes = 0;
  if (sr_.peer) sr_progress(now);
  if (comp_.psn.before(req_.ack_req_end)) arm_retransmit(now);
}

bool Qp::complete_acked(Psn psn, bool inclusive, Nanos now) {
  // Every SEND or WRITE whose last PSN the acknowledgement covers is done
  // (an implicit ACK, IBA 9.7.5.1.2). A READ or ATOMIC it covers whose
  // responses never came means they were lost: an implied NAK.
  const Psn acked_to = inclusive ? psn + 1 : psn;  // first PSN not acknowledged
  const Psn before = comp_.psn;
  std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
  while (head != sq_tail()) {
    SendWqe& wqe = sq_at(head);
    if (!wqe.started || !wqe.first_psn.before(acked_to)) break;
    if (!wqe.last_psn.before(acked_to)) {
      // Acknowledged part way: a long SEND or WRITE moves the window
      // forward, so a loss later in it goes back only this far.
      if (!is_rd_atomic(wqe.wr.opcode) && acked_to.after(comp_.psn)) comp_.psn = acked_to;
      break;
    }
    if (is_rd_atomic(wqe.wr.opcode)) {
      counters_.inc(Counter::kImpliedNakSeqErr);
      retry(comp_.psn, RetryCause::kImpliedNak, now);
      return comp_.psn != before;
    }
    comp_.psn = wqe.last_psn + 1;
    // Nothing reads the WQE once its slot is back with post_send.
    if (!retire_head(WcStatus::kSuccess)) break;
    ++head;
  }
  return comp_.psn != before;
}

void Qp::fail_head(WcStatus status) {
  // The WQE at the head fails with `status`; the QP enters the error
  // state and every other WQE is flushed (IBA 10.7.3).
  // (A full CQ ends the QP inside: enter_error below then finds it ended.)
  if (sq_head_.load(std::memory_order_relaxed) != sq_tail()) (void)retire_head(status);
  if (status == WcStatus::kRetryExcErr) counters_.inc(Counter::kRetryExceededErr);
  if (status == WcStatus::kRnrRetryExcErr) counters_.inc(Counter::kRetryRnrExceededErr);
  enter_error();
}

void Qp::restart(Psn from, RetryCause cause) {
  sr_.timing = false;  // what is resent is not timed (Karn)
  // A responder that keeps what it receives out of order needs only what
  // it does not hold, and lost READ and ATOMIC answers asked for again: a
  // recovery over everything unacknowledged, not go-back-N. A NAK still
  // goes back: the responder dropped the request it names (RNR) or keeps
  // nothing.
  if (sr_.peer && (cause == RetryCause::kTimeout || cause == RetryCause::kImpliedNak)) {
    sr_begin(req_.psn, /*probe=*/cause == RetryCause::kTimeout, /*reask=*/true);
  } else {
    // What goes back is resent: not timed until past what was sent (Karn).
    if (!sr_.resending || req_.psn.after(sr_.resent_to)) sr_.resent_to = req_.psn;
    sr_.resending = true;
    go_back_n(from);
  }
}

void Qp::retry(Psn from, RetryCause cause, Nanos now) {
  // One retry sequence at a time (rxe's started_retry): responses and NAKs
  // still in flight from before the restart would otherwise restart it
  // again and again, each time burning retry budget. Only a timeout or an
  // RNR NAK restarts from the same PSN twice.
  if ((cause == RetryCause::kNak || cause == RetryCause::kImpliedNak) && comp_.retry_pending &&
      comp_.retry_psn == from) {
    // Except once: READ responses beyond the restart point after it show
    // the restarted stream lost its first response (or our request). Ask
    // again at once, without spending retry budget, instead of waiting out
    // the ACK timeout: on a lossy link a READ otherwise spends its whole
    // retry_cnt on a few unlucky losses (seen at 10 % loss).
    if (cause == RetryCause::kImpliedNak && !comp_.rerequested) {
      comp_.rerequested = true;
      restart(from, cause);
    }
    return;
  }
  const bool rnr = cause == RetryCause::kRnr;
  std::uint8_t& budget = rnr ? comp_.rnr_retry : comp_.retry_cnt;
  // rnr_retry 7 means retry forever (IBA 9.7.5.2.8); retry_cnt 7 does not
  // (rxe treats it as infinite too; the spec does not).
  if (!(rnr && budget == 7)) {
    if (budget == 0) {
      fail_head(rnr ? WcStatus::kRnrRetryExcErr : WcStatus::kRetryExcErr);
      return;
    }
    --budget;
  }
  restart(from, cause);
  comp_.rerequested = false;
  comp_.retry_pending = true;
  comp_.retry_psn = from;
  // The timer starts again when the resent packets ask for an ACK (in
  // SQD too, which resends what it has begun). A QP in another state
  // sends nothing: its timer runs on, so that it ends in RETRY_EXC_ERR
  // instead of waiting forever.
  comp_.rto_deadline = 0;
  if (state() != QpState::kRts && state() != QpState::kSqd) arm_retransmit(now);
  // A recovery may find every PSN held and send nothing: the timer runs
  // on regardless, or nothing would ever restart it.
  if (sr_.round) arm_retransmit(now);
}

void Qp::on_read_response(const wire::RocePacket& pkt, SendWqe& wqe, Nanos now) {
  const Psn psn = pkt.bth.psn;
  if (psn.before(comp_.psn)) return;  // a duplicate: already placed
  if (psn.after(comp_.psn)) {
    // A response went missing: ask again from the first one absent.
    counters_.inc(Counter::kImpliedNakSeqErr);
    retry(comp_.psn, RetryCause::kImpliedNak, now);
    return;
  }
  const std::uint32_t offset = static_cast<std::uint32_t>(psn - wqe.first_psn) * mtu();
  const bool last = psn == wqe.last_psn;
  const std::uint32_t expect = last ? wqe.length - offset : mtu();
  // A restarted READ's responses begin again with FIRST (or ONLY) at the
  // PSN it resumed from, so only the end of the stream is checked.
  if (offset > wqe.length || pkt.payload.size() != expect || last != pkt.info->ends_message()) {
    fail_head(WcStatus::kBadRespErr);
    return;
  }
  // Scatter into the local SGL; the local MR must grant write access.
  std::uint32_t skip = offset;
  std::uint32_t done = 0;
  const Sge* sges = sges_of(wqe);
  for (std::uint32_t i = 0; i < wqe.wr.num_sge && done < expect; ++i) {
    const Sge& sge = sges[i];
    if (skip >= sge.length) {
      skip -= sge.length;
      continue;
    }
    const std::uint32_t n = std::min(sge.length - skip, expect - done);
    const MemRef ref = memory_->local(sge.lkey, sge.addr + skip, n, access::kLocalWrite);
    if (!ref) {
      fail_head(WcStatus::kLocProtErr);
      return;
    }
    std::memcpy(ref.ptr, pkt.payload.data() + done, n);
    done += n;
    skip = 0;
  }
  comp_.psn = psn + 1;
  if (last) {
    --req_.rd_atomic;
    if (!retire_head(WcStatus::kSuccess)) return;
  }
  progress(now);
}

void Qp::on_atomic_ack(const wire::RocePacket& pkt, SendWqe& wqe, Nanos now) {
  if (pkt.bth.psn != wqe.first_psn) return;
  const Sge& sge = sges_of(wqe)[0];
  const MemRef ref = memory_->local(sge.lkey, sge.addr, 8, access::kLocalWrite);
  if (!ref) {
    fail_head(WcStatus::kLocProtErr);
    return;
  }
  // The original remote value lands in host order, as verbs defines it.
  const std::uint64_t orig = pkt.ext.atomic_ack_eth.orig_remote_data;
  std::memcpy(ref.ptr, &orig, 8);
  comp_.psn = wqe.first_psn + 1;
  --req_.rd_atomic;
  if (!retire_head(WcStatus::kSuccess)) return;
  progress(now);
}

void Qp::on_nak(const wire::RocePacket& pkt, Nanos now) {
  const wire::AethSyndrome syn = pkt.ext.aeth.syndrome;
  const Psn psn = pkt.bth.psn;
  // Everything before the NAK's PSN was executed (IBA 9.7.5.1.3).
  if (complete_acked(psn, /*inclusive=*/false, now)) progress(now);
  if (state() == QpState::kErr) return;
  // A NAK for a PSN already acknowledged is older than an ACK that came
  // before it (reordered on the way): going back to it would put the
  // requester behind the completer, where its window is closed.
  if (psn.before(comp_.psn)) return;
  // A READ or ATOMIC before the NAK's PSN still misses responses: that
  // loss came first, and complete_acked already restarted from it. Going
  // back to the NAK's PSN now would skip it.
  const bool earlier_missing = comp_.psn.before(psn);
  if (syn.type == AethType::kRnrNak) {
    counters_.inc(Counter::kRcvdRnrErr);
    // Wait what the responder asked (its min_rnr_timer), then resend.
    comp_.rnr_until = now + Nanos{wire::rnr_timer_usec(syn.value)} * 1000;
    comp_.rto_deadline = 0;
    retry(earlier_missing ? comp_.psn : psn, RetryCause::kRnr, now);
    return;
  }
  switch (syn.nak_code()) {
    case NakCode::kPsnSequenceError:
      counters_.inc(Counter::kRcvdSeqErr);
      if (!earlier_missing) retry(psn, RetryCause::kNak, now);
      return;
    case NakCode::kInvalidRequest:
      fail_head(WcStatus::kRemInvReqErr);
      return;
    case NakCode::kRemoteAccessError:
      fail_head(WcStatus::kRemAccessErr);
      return;
    case NakCode::kRemoteOperationalError:
    default:
      fail_head(WcStatus::kRemOpErr);
      return;
  }
}

void Qp::completer_receive(const wire::RocePacket& pkt, Nanos now) {
  if (!reliable()) return;
  const Psn psn = pkt.bth.psn;
  // A response to nothing sent yet, or to something long acknowledged, is
  // a ghost (a duplicate or a packet from an earlier life of the QP).
  if (!psn.before(req_.psn) || psn.before(comp_.psn - 1)) return;
  if (!sr_.peer && selective_repeat_) {
    // An answer without the offer: the peer keeps nothing out of order
    // (yet), and the round trip timed for probes ends unused, rather than
    // give a sample spanning everything until a later answer offers it.
    if (pkt.bth.selective_repeat)
      sr_learn_peer();
    else
      sr_.timing = false;
  }

  const wire::Operation op = pkt.info->operation;
  if (op == wire::Operation::kSelectiveAcknowledge) {
    on_selective_ack(pkt, now);
    return;
  }
  if (op == wire::Operation::kAcknowledge) {
    if (pkt.ext.aeth.syndrome.type != AethType::kAck) {
      on_nak(pkt, now);
      return;
    }
    if (sr_.peer) sr_acked_to(psn + 1);
    if (complete_acked(psn, /*inclusive=*/true, now)) progress(now);
    return;
  }
  // READ responses and ATOMIC ACKs implicitly acknowledge what precedes
  // them.
  if (complete_acked(psn, /*inclusive=*/false, now)) progress(now);
  if (state() == QpState::kErr) return;
  const std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
  if (head == sq_tail()) return;
  SendWqe& wqe = sq_at(head);
  if (!wqe.started || psn.before(wqe.first_psn) || psn.after(wqe.last_psn)) return;
  const bool want_read = wqe.wr.opcode == WrOpcode::kRdmaRead;
  const bool is_read = op == wire::Operation::kRdmaReadResponse;
  if (want_read != is_read || (!want_read && !is_rd_atomic(wqe.wr.opcode))) {
    // A response of the wrong kind for the request at its PSN.
    fail_head(WcStatus::kBadRespErr);
    return;
  }
  if (is_read) {
    on_read_response(pkt, wqe, now);
  } else {
    on_atomic_ack(pkt, wqe, now);
  }
}

}  // namespace uroce::transport
