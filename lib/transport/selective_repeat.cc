/* SPDX-License-Identifier: BSD-3-Clause */
// Selective repeat, after IRN (Mittal et al., SIGCOMM 2018): between two
// peers that both offer it, a loss costs the lost packets, not everything
// sent after them as go-back-N does.
//
// The requester offers it in every request (the BTH's selective_repeat
// bit). A responder that offers it too keeps a request that comes ahead of
// the expected PSN instead of dropping it, and answers with a SELECTIVE
// ACKNOWLEDGE: a cumulative ACK (the BTH's PSN, as an ACK's) and a bitmap
// of the 256 PSNs after it that it holds. Held requests execute in PSN
// order once the gap before them is filled, so every IBA ordering rule
// holds as it does under go-back-N; only what travels again changes.
//
// The requester marks what the responder holds. The path keeps order, so
// a PSN before the last one held that is neither acknowledged nor held
// was lost: a recovery resends each such PSN once, ahead of new packets.
// A PSN held past what was sent when the recovery began, or a resend held
// while one resent before it is still missing, shows that a resend was
// lost as well, and a new recovery begins. Each recovery in which the
// responder neither acknowledged nor received anything new spends one of
// retry_cnt, and forward progress gives the budget back. A local ACK
// timeout resends every PSN the responder does not hold, and the oldest
// one unacknowledged whether held or not: the responder may have executed
// everything and its ACK been lost, and only a duplicate makes it
// acknowledge again. At the tail of what was sent, where a loss draws no
// SACK, a tail probe comes a few round trips after the last answer.
//
// A peer that does not offer it (Linux rxe, a ConnectX) never sees a
// SELECTIVE ACKNOWLEDGE, and its NAKs still take the requester back N.

#include <algorithm>
#include <bit>

#include "transport/qp.h"

namespace uroce::transport {

using wire::Psn;

namespace {

constexpr std::uint32_t kSackBits = kMaxUnackedPsns;
static_assert(wire::SackEth::kBits == kMaxUnackedPsns, "a SACK covers a requester's window");

std::uint32_t bit_of(Psn psn) { return psn.value() % kSackBits; }

// A requester with this many packets unacknowledged, or fewer, is at its
// tail (IRN's RTO_low threshold).
constexpr std::uint32_t kTailPackets = 3;
// The shortest a tail probe waits: below the round-trip times that an
// engine's scheduling adds on a loaded host.
constexpr Nanos kMinTailProbeNs = 100'000;
// Unanswered probes double their wait this many times at most; then only
// the full local ACK timeout runs. (With a long timeout attribute, up to
// 2^31 x 4.096 us, doubling alone might never reach it.)
constexpr unsigned kMaxTailProbes = 16;
constexpr Nanos kMaxFirstProbeNs = Nanos{1} << 40;  // 18 minutes

}  // namespace

// --- requester ------------------------------------------------------------

bool Qp::sr_sacked(Psn psn) const {
  // A bit stands for one PSN of [base, base + kSackBits): a READ may put
  // more PSNs than that outstanding.
  if (static_cast<std::uint32_t>(psn - sr_.base) >= kSackBits) return false;
  const std::uint32_t i = bit_of(psn);
  return (sr_.sacked[i / 64] >> (i % 64) & 1) != 0;
}

void Qp::sr_slide() {
  // Bits below comp_.psn are of PSNs acknowledged: clear them, so that the
  // PSNs kSackBits later, which share their bits, start unheld.
  const std::int32_t n = comp_.psn - sr_.base;
  if (n <= 0) return;
  if (static_cast<std::uint32_t>(n) >= kSackBits) {
    sr_.sacked.fill(0);
  } else {
    for (Psn p = sr_.base; p != comp_.psn; ++p) {
      const std::uint32_t i = bit_of(p);
      sr_.sacked[i / 64] &= ~(std::uint64_t{1} << (i % 64));
    }
  }
  sr_.base = comp_.psn;
}

bool Qp::sr_acked_to(Psn to) {
  if (!to.after(sr_.acked_to)) return false;
  sr_.acked_to = to;
  return true;
}

void Qp::sr_progress(Nanos now) {
  // A probe not sent yet (the pacer held it) is moot: the peer answered.
  sr_.probe = sr_.tail_probe = false;
  sr_slide();
  if (sr_.acked_to.before(comp_.psn)) sr_.acked_to = comp_.psn;
  if (sr_.timing && !comp_.psn.before(sr_.timed) && now > sr_.timed_at) {
    // RFC 6298's smoothing, in nanoseconds.
    sr_.timing = false;
    const Nanos rtt = now - sr_.timed_at;
    if (sr_.srtt == 0) {
      sr_.srtt = std::max<Nanos>(rtt, 1);
      sr_.rttvar = rtt / 2;
    } else {
      const Nanos err = rtt > sr_.srtt ? rtt - sr_.srtt : sr_.srtt - rtt;
      sr_.rttvar = (3 * sr_.rttvar + err) / 4;
      sr_.srtt = std::max<Nanos>((7 * sr_.srtt + rtt) / 8, 1);
    }
  }
}

void Qp::sr_learn_peer() {
  sr_.peer = true;
  sr_.base = sr_.acked_to = comp_.psn;
}

bool Qp::sr_tail() const {
  if (req_.wqe == sq_tail() || window_full() ||
      static_cast<std::uint32_t>(req_.psn - comp_.psn) <= kTailPackets)
    return true;
  // SQD begins no message either.
  return next_wqe_held() || (state() == QpState::kSqd && !sq_at(req_.wqe).started);
}

Nanos Qp::sr_probe_timeout() const {
  if (sr_.srtt == 0 || comp_.tail_probes > kMaxTailProbes) return 0;
  const Nanos first = std::max({kMinTailProbeNs, 2 * sr_.srtt, sr_.srtt + 4 * sr_.rttvar});
  // Past the last probe, or a round trip of minutes: the full timeout,
  // which spends retry_cnt, whatever the QP's timeout attribute.
  if (first >= kMaxFirstProbeNs) return 0;
  return first << comp_.tail_probes;
}

void Qp::sr_tail_probe(Nanos now) {
  // Resend the oldest PSN unacknowledged, held or not: it is the one lost,
  // or its answer draws an ACK (everything was received and the last ACK
  // lost) or a SACK of what is missing. No retry budget is spent: the
  // probes back off, and once the full timeout is the shorter, it runs.
  // (A recovery under way gives way: the probe's answer shows what it
  // still misses.)
  comp_.tail = false;
  if (comp_.tail_probes <= kMaxTailProbes) ++comp_.tail_probes;
  sr_begin(comp_.psn + 1, /*probe=*/true, /*reask=*/true);
  sr_.tail_probe = true;
  arm_retransmit(now);
}

void Qp::sr_begin(Psn end, bool probe, bool reask) {
  counters_.inc(Counter::kSrRecoveryRounds);
  sr_.timing = false;  // what is resent is not timed (Karn)
  sr_.round = true;
  sr_.probe = probe;
  sr_.tail_probe = false;
  sr_.reask = reask;
  sr_.next = comp_.psn;
  sr_.end = end;
  sr_.mark = req_.psn;
}

void Qp::on_selective_ack(const wire::RocePacket& pkt, Nanos now) {
  counters_.inc(Counter::kSrSackRcvd);
  if (!sr_.peer) sr_learn_peer();
  // Everything up to the BTH's PSN was executed, as an ACK says: the
  // responder moved on, even if a READ before it still misses answers.
  const bool moved = sr_acked_to(pkt.bth.psn + 1);
  if (complete_acked(pkt.bth.psn, /*inclusive=*/true, now)) progress(now);
  if (state() == QpState::kErr) return;
  sr_slide();
  // Mark what the responder holds; the last PSN held ends what the path,
  // keeping order, shows lost.
  const wire::SackEth& sack = pkt.ext.sack;
  const Psn first = pkt.bth.psn + 1;
  Psn end = first;
  // A PSN this recovery resent, held now while one before it is still
  // missing: that one's resend, sent first, was lost on the way.
  bool resend_came = false;
  bool fresh = false;  // the responder holds something it did not before
  for (std::uint32_t k = 0; sack.bytes != nullptr && k < wire::SackEth::kSize; ++k) {
    // Bit 7 - j of byte k stands for PSN first + 8k + j.
    for (unsigned m = sack.bytes[k]; m != 0; m &= m - 1) {
      const Psn p = first + static_cast<std::int32_t>(k * 8 + 7 - std::countr_zero(m));
      if (p.before(comp_.psn) || !p.before(req_.psn)) continue;  // acknowledged, or never sent
      if (!sr_sacked(p)) {
        fresh = true;
        if (sr_.round && p.before(sr_.next)) resend_came = true;
      }
      const std::uint32_t i = bit_of(p);
      sr_.sacked[i / 64] |= std::uint64_t{1} << (i % 64);
      if (!p.before(end)) end = p + 1;
    }
  }
  if (!end.after(comp_.psn)) return;
  // A recovery is over once the cumulative ACK passes what had been sent
  // when it began. A PSN held past that was sent after the recovery's
  // resends: a PSN still missing before it was lost again.
  // (When the window is closed, nothing new is sent past the mark: only
  // the resends themselves can show one of them lost.)
  const bool over = !sr_.round || !comp_.psn.before(sr_.mark);
  if (over || end.after(sr_.mark) || resend_came) {
    // A recovery spends one of retry_cnt only when the responder neither
    // acknowledged nor received anything new: a congested queue may drop
    // resends again and again while traffic still flows, and the local
    // ACK timer, which only a cumulative ACK restarts, still ends a PSN
    // that never gets through.
    if (!moved && !fresh) {
      if (comp_.retry_cnt == 0) {
        fail_head(WcStatus::kRetryExcErr);
        return;
      }
      --comp_.retry_cnt;
    }
    if (!over && sr_.end.after(end)) end = sr_.end;
    sr_begin(end, /*probe=*/false, /*reask=*/false);
  } else if (end.after(sr_.end)) {
    // More of the same loss: resent in this recovery. Its mark stays:
    // moved on, it would wait for packets a closed window never sends,
    // and a lost resend for the local ACK timeout.
    sr_.end = end;
  }
}

Qp::Resend Qp::sr_resend_one(TxSink& sink, Nanos now) {
  if (!comp_.psn.before(sr_.mark)) {
    sr_.round = false;  // everything sent before it began is acknowledged
    return Resend::kNone;
  }
  // go_back_n may have taken the requester back since: what it sends
  // again is not resent here too.
  const Psn end = sr_.end.before(req_.psn) ? sr_.end : req_.psn;
  if (!sr_.next.before(end)) return Resend::kNone;
  sr_slide();
  if (sr_.next.before(comp_.psn)) sr_.next = comp_.psn;
  const std::uint64_t tail = sq_tail();
  for (std::uint64_t i = sq_head_.load(std::memory_order_relaxed); i != tail; ++i) {
    SendWqe& wqe = sq_at(i);
    if (!wqe.started || !sr_.next.before(end) || !wqe.first_psn.before(end)) break;
    if (wqe.last_psn.before(sr_.next)) continue;
    Psn psn = wqe.first_psn.before(sr_.next) ? sr_.next : wqe.first_psn;
    std::uint32_t offset = 0;
    if (is_rd_atomic(wqe.wr.opcode)) {
      // Only the request travels; its other PSNs are its responses'. Held
      // or not, a request still unanswered goes again: the responder may
      // have executed it and its answer been lost, and it answers a
      // duplicate READ or ATOMIC again from its resources. A READ part
      // answered asks for the rest (as go_back_n does) once its answers
      // are known lost: after a timeout, an implied NAK, or an ACK of
      // what follows it (its answers come first).
      // A request the responder holds, or executed with its answer still
      // on the way, is not asked for again after a SACK: a duplicate would
      // make the responder drop what it queued after it.
      const bool part_answered = wqe.first_psn.before(comp_.psn);
      const Psn from = part_answered ? comp_.psn : wqe.first_psn;
      const bool lost = sr_.reask || sr_.acked_to.after(wqe.last_psn);
      const bool held = sr_sacked(wqe.first_psn) || wqe.first_psn.before(sr_.acked_to);
      if (psn != from || (!lost && (part_answered || held))) {
        sr_.next = wqe.last_psn + 1;
        continue;
      }
      offset = static_cast<std::uint32_t>(from - wqe.first_psn) * mtu();
    } else {
      const Psn stop = wqe.last_psn.before(end) ? wqe.last_psn + 1 : end;
      // Held, or executed already (acknowledged past a READ still
      // unanswered): not resent, but for a timeout's probe.
      while (psn != stop && (sr_sacked(psn) || psn.before(sr_.acked_to)) &&
             !(sr_.probe && psn == comp_.psn))
        ++psn;
      if (psn == stop) {
        sr_.next = stop;
        continue;
      }
      offset = static_cast<std::uint32_t>(psn - wqe.first_psn) * mtu();
    }
    TxPacket pkt;
    std::uint32_t len = 0;
    bool last = false;
    if (!build_request(wqe, psn, offset, pkt, len, last)) {
      fail_head(WcStatus::kLocProtErr);
      return Resend::kBlocked;
    }
    // Asked to be acknowledged at once: the recovery ends on its answer.
    pkt.bth.ack_req = true;
    if (gate_) {
      Nanos retry_at = 0;
      if (!gate_->admit(len, now, &retry_at)) {
        req_.gate_retry_at = std::max(retry_at, now + 1);
        return Resend::kBlocked;
      }
    }
    if (!sink.transmit(pkt)) return Resend::kBlocked;
    counters_.inc(Counter::kSentPkts);
    counters_.inc(Counter::kSrRetransmitted);
    // (A probe the pacer held may never leave: an answer came first.)
    if (sr_.tail_probe) counters_.inc(Counter::kSrTailProbes);
    sr_.probe = sr_.tail_probe = false;
    const Psn answered = is_rd_atomic(wqe.wr.opcode) ? wqe.last_psn + 1 : psn + 1;
    sr_.next = answered;
    if (req_.ack_req_end.before(answered)) req_.ack_req_end = answered;
    arm_retransmit(now);
    return Resend::kSent;
  }
  sr_.next = end;
  return Resend::kNone;
}

// --- responder ------------------------------------------------------------

void Qp::sr_clear_kept() {
  if (sr_kept_count_ != 0) {
    for (auto& k : sr_kept_) k.reset();
  }
  sr_held_.fill(0);
  sr_kept_count_ = 0;
}

bool Qp::sr_holds(Psn psn) const {
  const std::uint32_t i = bit_of(psn);
  return (sr_held_[i / 64] >> (i % 64) & 1) != 0 && kept_at(psn)->pkt.bth.psn == psn;
}

void Qp::sr_forget(Psn psn) { (void)sr_take(psn); }

std::unique_ptr<Qp::KeptRequest> Qp::sr_take(Psn psn) {
  const std::uint32_t i = bit_of(psn);
  const std::uint64_t bit = std::uint64_t{1} << (i % 64);
  if ((sr_held_[i / 64] & bit) == 0) return nullptr;
  sr_held_[i / 64] &= ~bit;
  --sr_kept_count_;
  return std::move(kept_at(psn));
}

void Qp::sr_keep(const wire::RocePacket& pkt) {
  keep_request(pkt);
  queue_sack();
}

void Qp::keep_request(const wire::RocePacket& pkt) {
  const Psn psn = pkt.bth.psn;
  if (sr_kept_.empty()) sr_kept_.resize(kMaxUnackedPsns);
  if (sr_holds(psn)) {
    counters_.inc(Counter::kDuplicateRequest);
  } else {
    // A slot still marked holds a PSN the expected one has passed (a
    // READ's PSNs skipped over it): stale, replaced.
    sr_forget(psn);
    auto k = std::make_unique<KeptRequest>();
    k->frame.assign(pkt.frame.begin(), pkt.frame.end());
    k->pkt = pkt;
    k->pkt.frame = wire::ConstBytes(k->frame.data(), k->frame.size());
    k->pkt.payload = wire::ConstBytes(k->frame.data() + (pkt.payload.data() - pkt.frame.data()),
                                      pkt.payload.size());
    kept_at(psn) = std::move(k);
    const std::uint32_t i = bit_of(psn);
    sr_held_[i / 64] |= std::uint64_t{1} << (i % 64);
    ++sr_kept_count_;
    counters_.inc(shared_ != nullptr ? Counter::kXrcSharedWaits : Counter::kSrOooKept);
  }
}

void Qp::sr_execute_with_kept(const wire::RocePacket& pkt, Nanos now) {
  sr_forget(pkt.bth.psn);
  responder_execute(pkt, now);
  if (resp_.epsn.after(pkt.bth.psn + 1)) sr_forget_skipped(pkt.bth.psn + 1);
  sr_drain(now);
}

void Qp::sr_drain(Nanos now) {
  bool wrote = false;
  Psn last_write;  // of the last SEND or WRITE executed
  while (sr_kept_count_ > 0 && !resp_.fatal && sr_holds(resp_.epsn)) {
    const Psn before = resp_.epsn;
    const std::unique_ptr<KeptRequest> k = sr_take(before);
    const wire::RocePacket& kept = k->pkt;
    responder_execute(kept, now);
    // Not executed (no receive WQE, no resource): the requester resends
    // it, as it would under go-back-N.
    if (resp_.epsn == before) break;
    sr_forget_skipped(before + 1);
    const wire::Operation op = kept.info->operation;
    if (op == wire::Operation::kSend || op == wire::Operation::kRdmaWrite) {
      wrote = true;
      last_write = before;
    }
  }
  // Acknowledge what the kept requests added at once, AckReq or not: the
  // requester's recovery waits on it. (READs and atomics answer for
  // themselves, with their responses.)
  if (wrote && !resp_.fatal) queue_ack(last_write, true);
}

void Qp::sr_sack(Psn acked, std::uint8_t* bytes) const {
  // Bit i: PSN acked + 1 + i is held, or was executed already (a SACK
  // that may not acknowledge past a READ still answering covers less
  // than the responder executed).
  std::fill(bytes, bytes + wire::SackEth::kSize, std::uint8_t{0});
  const Psn first = acked + 1;
  constexpr auto kBits = static_cast<std::int32_t>(wire::SackEth::kBits);
  for (Psn p = first; p.before(resp_.epsn) && p - first < kBits; ++p)
    wire::SackEth::set(bytes, static_cast<unsigned>(p - first));
  for (std::uint32_t w = 0; w < sr_held_.size(); ++w) {
    for (std::uint64_t m = sr_held_[w]; m != 0; m &= m - 1) {
      const auto slot = w * 64 + static_cast<std::uint32_t>(std::countr_zero(m));
      const Psn p = sr_kept_[slot]->pkt.bth.psn;
      const std::int32_t i = p - first;
      if (i >= 0 && i < kBits && sr_holds(p)) wire::SackEth::set(bytes, static_cast<unsigned>(i));
    }
  }
}

Psn Qp::sr_cumulative() const {
  // What a SACK leaving now acknowledges: everything executed, but not past
  // a READ or ATOMIC whose answer is still queued behind it, which the
  // requester would take as lost (an implied NAK).
  for (std::uint32_t k = 1; k < jobs_count_; ++k) {
    const RespJob& job = jobs_[(jobs_head_ + k) % jobs_.size()];
    if (job.holds_resource()) return job.start - 1;  // where its stream (re)starts
  }
  return resp_.epsn - 1;
}

void Qp::queue_sack() {
  // One SACK waiting at a time: it says what is held, and acknowledges
  // what was executed, when it leaves; so it also stands for a plain ACK
  // waiting before it (queue_ack does not queue one behind it either).
  if (jobs_count_ > 0) {
    RespJob& tail = jobs_[(jobs_head_ + jobs_count_ - 1) % jobs_.size()];
    if (tail.kind == RespJob::Kind::kSack) return;
    if (tail.kind == RespJob::Kind::kAck && tail.syndrome.type == wire::AethType::kAck) {
      tail.kind = RespJob::Kind::kSack;
      return;
    }
  }
  push_job({RespJob::Kind::kSack, resp_.epsn, resp_.epsn, wire::AethSyndrome::ack(), resp_.msn, 0});
}

void Qp::sr_forget_skipped(Psn from) {
  // A READ took the expected PSN past PSNs no request may have: what a
  // broken peer put there is stale, and must not run once PSNs wrap.
  for (Psn p = from; p.before(resp_.epsn) && p - from < static_cast<std::int32_t>(kSackBits); ++p)
    sr_forget(p);
}

}  // namespace uroce::transport
