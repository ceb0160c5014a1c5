/* SPDX-License-Identifier: BSD-3-Clause */
// The QP's state machine, posting, completion and flushing.

#include "transport/qp.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "transport/random.h"

namespace uroce::transport {

using wire::Psn;

namespace {

bool opcode_allowed(QpType type, WrOpcode op) {
  // An XRC target has no send queue.
  if (type == QpType::kXrcTgt) return false;
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return type != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      return type == QpType::kRc || type == QpType::kXrcIni;
    case WrOpcode::kLocalInv:
    case WrOpcode::kBindMw:
      // Windows are bound and invalidated on connected QPs only (a type 2
      // window belongs to an RC QP, IBA 10.6.7.2.2).
      return type != QpType::kUd;
  }
  return false;
}

WcOpcode wc_opcode_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    default:
      return WcOpcode::kSend;
  }
}

// P_Keys match when their low 15 bits agree and at least one of the two is
// a full member (IBA 10.9.3; rxe's pkey_match).
bool pkey_match(std::uint16_t a, std::uint16_t b) {
  return (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000);
}

// The transport bits of a QP type's opcodes.
wire::Transport transport_of(QpType type) {
  switch (type) {
    case QpType::kUc:
      return wire::Transport::kUc;
    case QpType::kUd:
      return wire::Transport::kUd;
    case QpType::kXrcIni:
    case QpType::kXrcTgt:
      return wire::Transport::kXrc;
    default:
      return wire::Transport::kRc;
  }
}

// The block a QP's responder shares: only an XRC target has one.
SharedResponder* shared_of(const QpInit& init) {
  return init.type == QpType::kXrcTgt && init.shared_lock != nullptr ? init.shared : nullptr;
}

}  // namespace

Qp::Qp(const QpInit& init)
    : type_(init.type),
      transport_(transport_of(init.type)),
      qpn_(init.qpn),
      sq_sig_all_(init.sq_sig_all),
      max_send_sge_(std::min(init.max_send_sge, kMaxSge)),
      max_inline_(std::min(init.max_inline_data, kMaxInlineData)),
      port_mtu_(init.port_mtu),
      selective_repeat_(init.selective_repeat && init.type == QpType::kRc),
      send_cq_(init.send_cq),
      recv_cq_(init.recv_cq),
      rq_(init.srq ? init.srq : &own_rq_),
      own_rq_(init.srq ? 1 : init.max_recv_wr, std::min(init.max_recv_sge, kMaxSge)),
      memory_(init.memory),
      xrc_(init.xrc),
      events_(init.events),
      gate_(init.gate),
      congestion_(init.congestion),
      sq_depth_(std::max<std::uint32_t>(init.max_send_wr, 1)),
      sq_(std::bit_ceil(sq_depth_)),
      sq_mask_(sq_.size() - 1),
      sge_stride_(std::max<std::uint32_t>(max_send_sge_, 1)),
      sq_sges_(sq_.size() * sge_stride_),
      sq_inline_(sq_.size() * max_inline_),
      sq_routes_(type_ == QpType::kUd ? sq_.size() : 0),
      shared_(shared_of(init)),
      shared_lock_(shared_ != nullptr ? init.shared_lock : nullptr),
      token_(std::uint64_t{secure_random_u32()} << 32 | secure_random_u32()) {}

Qp::~Qp() {
  if (shared_ == nullptr) return;
  // What this Qp still had to send goes with it: the resources its READ
  // and atomic answers held are free again, and a fatal NAK it could not
  // send still ends the QP, for every process. Nothing else is adopted:
  // this may not be the engine's thread, which alone may flush.
  shared_lock_->lock();
  const std::uint32_t resources = std::min<std::uint32_t>(shared_->res_count, kMaxRdAtomic);
  for (std::uint32_t k = 0; k < jobs_count_; ++k) {
    const RespJob& job = jobs_[(jobs_head_ + k) % jobs_.size()];
    if (job.holds_resource() && job.res < resources && shared_->res[job.res].busy > 0)
      --shared_->res[job.res].busy;
  }
  if (fatal_nak_ && shared_->state != QpState::kErr) {
    shared_->state = QpState::kErr;
    shared_->attr.qp_state = QpState::kErr;
    std::atomic_ref(shared_->generation).fetch_add(1, std::memory_order_release);
  }
  shared_lock_->unlock();
}

std::uint32_t Qp::packets_of(const SendWqe& wqe) const {
  switch (wqe.wr.opcode) {
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
      return 1;
    default:
      // A zero-length message is still one packet (IBA 9.7.1: one PSN).
      return std::max<std::uint32_t>(1, (wqe.length + mtu() - 1) / mtu());
  }
}

bool Qp::transition_allowed(QpState from, QpState to, unsigned mask) const {
  using namespace attr_mask;
  // Required and optional attributes per transition and QP type (IBA
  // 11.2.4.2 Table 92, as the kernel's ib_modify_qp_is_ok encodes it). A
  // mask that lacks a required attribute or carries one the transition
  // does not take is refused. An XRC initiator has RC's requester and no
  // responder resources; an XRC target RC's responder and no requester.
  const bool ud = type_ == QpType::kUd;
  const bool acked_sends = type_ == QpType::kRc || type_ == QpType::kXrcIni;
  const bool acked_receives = type_ == QpType::kRc || type_ == QpType::kXrcTgt;
  unsigned required = 0;
  unsigned optional = 0;
  using S = QpState;
  if (to == S::kReset || to == S::kErr) {
    // Allowed from every state, with no attribute but the state.
  } else if (from == S::kReset && to == S::kInit) {
    required = kPkeyIndex | kPort | (ud ? kQkey : kAccessFlags);
  } else if (from == S::kInit && to == S::kInit) {
    optional = kPkeyIndex | kPort | (ud ? kQkey : kAccessFlags);
  } else if (from == S::kInit && to == S::kRtr) {
    if (ud) {
      optional = kPkeyIndex | kQkey;
    } else {
      required = kAv | kPathMtu | kDestQpn | kRqPsn;
      if (acked_receives) required |= kMaxDestRdAtomic | kMinRnrTimer;
      optional = kAltPath | kAccessFlags | kPkeyIndex;
    }
  } else if ((from == S::kRtr || from == S::kRts || from == S::kSqd) && to == S::kRts) {
    if (from == S::kRtr) {
      required = kSqPsn;
      if (acked_sends) required |= kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic;
      if (type_ == QpType::kXrcTgt) required |= kTimeout;
    }
    optional =
        ud ? kQkey : kAltPath | kAccessFlags | kPathMigState | (acked_receives ? kMinRnrTimer : 0);
  } else if (from == S::kSqe && to == S::kRts) {
    optional = ud ? kQkey : kAccessFlags;
  } else if (from == S::kRts && to == S::kSqd) {
    optional = kEnSqdAsyncNotify;
  } else if (from == S::kSqd && to == S::kSqd) {
    if (ud) {
      optional = kPkeyIndex | kQkey;
    } else {
      optional = kAv | kAltPath | kAccessFlags | kPkeyIndex | kPathMigState;
      if (acked_sends) optional |= kPort | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic;
      if (acked_receives) optional |= kPort | kTimeout | kMaxDestRdAtomic | kMinRnrTimer;
    }
  } else {
    return false;
  }
  // The current state may always be named (the caller checks it).
  const unsigned allowed = required | optional | kState | kCurState;
  return (mask & required) == required && (mask & ~allowed) == 0;
}

int Qp::modify(const QpAttr& a, unsigned mask, Nanos /*now*/) {
  using namespace attr_mask;
  // A shared XRC target: from the state another process may have left it
  // in, and what this changes is every process's.
  SharedGuard guard(*this);
  const QpState from = state();
  const QpState to = (mask & kState) ? a.qp_state : from;
  if (!transition_allowed(from, to, mask)) return EINVAL;
  if ((mask & kRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & kRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & kMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & kTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & kMaxQpRdAtomic) && a.max_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & kMaxDestRdAtomic) && a.max_dest_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & kPathMtu) && !wire::mtu_from_code(static_cast<unsigned>(a.path_mtu))) return EINVAL;
  if ((mask & kAv) && type_ != QpType::kUd && a.route.src_ip.is_v4() != a.route.dst_ip.is_v4())
    return EINVAL;

  if (mask & kAccessFlags) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & kQkey) attr_.qkey = a.qkey;
  if (mask & kPkeyIndex) attr_.pkey = a.pkey;
  if (mask & kAv) {
    attr_.route = a.route;
    route_template_ = wire::RouteTemplate(a.route);
  }
  if (mask & kPathMtu) attr_.path_mtu = a.path_mtu;
  if (mask & kDestQpn) attr_.dest_qp_num = a.dest_qp_num & wire::kPsnMask;
  if (mask & kRqPsn) attr_.rq_psn = a.rq_psn & wire::kPsnMask;
  if (mask & kSqPsn) attr_.sq_psn = a.sq_psn & wire::kPsnMask;
  if (mask & kMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & kTimeout) attr_.timeout = a.timeout;
  if (mask & kRetryCnt) attr_.retry_cnt = a.retry_cnt;
  if (mask & kRnrRetry) attr_.rnr_retry = a.rnr_retry;
  if (mask & kEnSqdAsyncNotify) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & kMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & kMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;

  if (to == QpState::kReset) {
    reset_state();
  } else if (to == QpState::kErr) {
    enter_error();
  } else if (from == QpState::kInit && to == QpState::kRtr) {
    resp_.epsn = Psn(attr_.rq_psn);
    reset_resources(attr_.max_dest_rd_atomic);
    // Room for one job per responder resource plus ACKs and NAKs between.
    jobs_.assign(2 * attr_.max_dest_rd_atomic + 4, RespJob{});
    jobs_head_ = jobs_count_ = 0;
  } else if (from == QpState::kRtr && to == QpState::kRts) {
    req_.psn = comp_.psn = req_.ack_req_end = sr_.base = Psn(attr_.sq_psn);
  }
  if (mask & kRetryCnt) comp_.retry_cnt = attr_.retry_cnt;
  if (mask & kRnrRetry) comp_.rnr_retry = attr_.rnr_retry;
  if (to != QpState::kErr) attr_.qp_state = to;
  if (to != QpState::kErr) state_.store(to, std::memory_order_release);
  // SQD (IBA 10.3.1): the send queue starts no new message but
  // finishes the ones begun, resends included; drained once they are all
  // acknowledged. Notified only if asked for on entering SQD.
  if (from == QpState::kRts && to == QpState::kSqd) {
    if (!(mask & kEnSqdAsyncNotify)) attr_.en_sqd_async_notify = false;
    attr_.sq_draining = true;
    check_sq_drained();
  } else if (to != QpState::kSqd) {
    attr_.sq_draining = false;
  }
  if (shared_ != nullptr) shared_publish();
  // A new state may give the QP work: a flush in the error state, or WRs
  // posted while it could not send.
  ring_doorbell();
  return 0;
}

void Qp::reset_state() {
  // RESET discards every WQE without completing it (IBA 10.3.1).
  sq_head_.store(sq_tail(), std::memory_order_release);
  RecvWr drop;
  if (rq_ == &own_rq_) {
    while (own_rq_.take(drop)) {
    }
  }
  req_ = {};
  req_.wqe = sq_tail();
  comp_ = {};
  resp_ = {};
  write_data_ = nullptr;
  write_length_ = write_offset_ = 0;
  reset_resources(0);
  if (shared_ != nullptr) shared_epoch_ = ++shared_->epoch;
  jobs_.clear();
  jobs_head_ = jobs_count_ = 0;
  fatal_nak_ = false;
  shared_wait_since_ = shared_wait_poll_ = 0;
  sr_ = {};
  sr_clear_kept();
  attr_ = QpAttr{};
}

int Qp::post_send(const SendWr& wr) {
  const QpState s = state();
  if (s == QpState::kReset || s == QpState::kInit || s == QpState::kRtr) return EINVAL;
  if (wr.num_sge > max_send_sge_ || !opcode_allowed(type_, wr.opcode)) return EINVAL;
  // A bind or an invalidation carries no data.
  if (is_local_op(wr.opcode) && wr.num_sge != 0) return EINVAL;
  if (type_ == QpType::kUd && wr.ud.route == nullptr) return EINVAL;

  std::uint64_t length = 0;
  for (std::uint32_t i = 0; i < wr.num_sge; ++i) length += wr.sg_list[i].length;
  if (length > kMaxMessageSize) return EINVAL;
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
  if (atomic && (wr.num_sge != 1 || wr.sg_list[0].length < 8)) return EINVAL;
  const bool inl =
      (wr.send_flags & send_flags::kInline) && !atomic && wr.opcode != WrOpcode::kRdmaRead;
  if (inl && length > max_inline_) return EINVAL;

  const std::uint64_t tail = sq_tail_.load(std::memory_order_relaxed);
  if (tail - sq_head_.load(std::memory_order_acquire) >= sq_depth_) return ENOMEM;
  SendWqe& wqe = sq_at(tail);
  wqe = SendWqe{};
  wqe.wr = wr;
  wqe.length = static_cast<std::uint32_t>(length);
  const std::size_t slot = slot_of(wqe);
  // UD: the route is copied, so the address handle may be destroyed once
  // the post returns, as the verbs allow.
  if (type_ == QpType::kUd) sq_routes_[slot] = *wr.ud.route;
  if (inl) {
    // Inline data is copied now, from the program's own buffers: their
    // lkeys are not consulted (IBV_SEND_INLINE).
    std::uint8_t* to = sq_inline_.data() + slot * max_inline_;
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
      std::memcpy(to + wqe.inline_len, reinterpret_cast<const void*>(wr.sg_list[i].addr),
                  wr.sg_list[i].length);
      wqe.inline_len += wr.sg_list[i].length;
    }
  } else {
    std::copy_n(wr.sg_list.begin(), wr.num_sge,
                sq_sges_.begin() + static_cast<std::ptrdiff_t>(slot * sge_stride_));
  }
  if (atomic) wqe.length = 8;
  sq_tail_.store(tail + 1, std::memory_order_release);
  ring_doorbell();
  return 0;
}

int Qp::post_recv(const RecvWr& wr) {
  if (rq_ != &own_rq_) return EINVAL;  // the QP takes from an SRQ
  if (state() == QpState::kReset) return EINVAL;
  const int ret = own_rq_.post(wr);
  if (ret != 0) return ret;
  // In the error state a receive WR is flushed as soon as it is posted
  // (IBA 10.3.1; rxe's responder flushes it): the engine must hear of it.
  // The state is read after the WR is published, a full fence between,
  // paired with enter_error's: either the engine's flush sees the WR, or
  // this sees the error state and rings.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (state() == QpState::kErr) ring_doorbell();
  return 0;
}

void Qp::check_sq_drained() {
  if (!attr_.sq_draining || state() != QpState::kSqd) return;
  // Everything begun is complete: the completer has caught up with the
  // requester, which stands before a message not begun (or at the tail).
  const std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
  if (head != req_.wqe || (req_.wqe != sq_tail() && sq_at(req_.wqe).started)) return;
  attr_.sq_draining = false;
  if (attr_.en_sqd_async_notify && events_) events_->sq_drained(*this);
}

bool Qp::retire_head(WcStatus status) {
  const std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
  const SendWqe& wqe = sq_at(head);
  const bool signaled = sq_sig_all_ || (wqe.wr.send_flags & send_flags::kSignaled);
  // Error completions are generated even for unsignaled WRs (IBA 10.7.3.1).
  const bool report = status != WcStatus::kSuccess || signaled;
  Wc wc;
  if (report) {
    wc.wr_id = wqe.wr.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode_of(wqe.wr.opcode);
    wc.byte_len = wqe.length;
    wc.qp_num = qpn_;
  }
  // The slot goes back to post_send before the completion is seen: a
  // program that polls one CQE of a full queue may post one WR at once
  // (qperf does). Nothing reads the WQE after this store.
  sq_head_.store(head + 1, std::memory_order_release);
  check_sq_drained();
  if (!report) return true;
  if (status != WcStatus::kSuccess) counters_.inc(Counter::kSendErr);
  if (send_cq_ && send_cq_->push(wc)) return true;
  // A full CQ: the QP is in the error state now and its queue flushed.
  lost_completion();
  return false;
}

void Qp::complete_recv(const RecvWr& wr, WcStatus status, WcOpcode opcode, std::uint32_t byte_len,
                       unsigned flags, std::uint32_t imm, std::uint32_t src_qp, bool solicited,
                       std::uint8_t sl) {
  Wc wc;
  wc.wr_id = wr.wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = byte_len;
  wc.wc_flags = flags;
  wc.imm_data = imm;
  wc.qp_num = qpn_;
  wc.src_qp = src_qp;
  wc.sl = sl;
  if (!recv_cq_ || !recv_cq_->push(wc, solicited)) lost_completion();
}

void Qp::lost_completion() {
  // A completion that cannot be delivered is a catastrophic error of the
  // QP (IBA 11.4.2.1): to the error state, and the owner hears of it.
  if (state() == QpState::kErr) return;
  enter_error();
  if (events_) events_->qp_error(*this, QpError::kCatastrophic);
}

void Qp::enter_error() {
  state_.store(QpState::kErr, std::memory_order_release);
  // Paired with post_recv's: a receive WR posted while this runs is
  // either flushed below or rings the doorbell.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  attr_.qp_state = QpState::kErr;
  comp_.rto_deadline = 0;
  comp_.rnr_until = 0;
  flush();
  if (shared_ != nullptr) shared_publish();
}

void Qp::reset_resources(std::uint32_t n) {
  resp_.res_next = 0;
  if (shared_ != nullptr) {
    std::fill_n(shared_->res.begin(), n, RespResource{});
    shared_->res_count = n;
    res_ = {shared_->res.data(), n};
  } else {
    own_res_.assign(n, RespResource{});
    res_ = own_res_;
  }
}

void Qp::shared_enter() {
  shared_lock_->lock();
  resp_ = shared_->resp;
  // What another program wrote is checked as if it came off the wire.
  resp_.recv.num_sge = std::min(resp_.recv.num_sge, kMaxSge);
  const std::uint64_t generation =
      std::atomic_ref(shared_->generation).load(std::memory_order_relaxed);
  if (generation == shared_seen_) return;
  // Another process's Modify QP, or its responder's fatal error: adopt
  // the attributes and the state. The responder is the block's already;
  // what this process queued to send is its own.
  shared_seen_ = generation;
  attr_ = shared_->attr;
  // What another program wrote is checked as if it came off the wire.
  attr_.max_dest_rd_atomic =
      static_cast<std::uint8_t>(std::min<std::uint32_t>(attr_.max_dest_rd_atomic, kMaxRdAtomic));
  route_template_ = wire::RouteTemplate(attr_.route);
  res_ = {shared_->res.data(), std::min<std::size_t>(shared_->res_count, kMaxRdAtomic)};
  const QpState from = state();
  const QpState to = shared_->state;
  const bool new_epoch = shared_->epoch != shared_epoch_;
  if (to == from && !new_epoch) return;
  const bool responding = to == QpState::kRtr || to == QpState::kRts || to == QpState::kSqd;
  if (new_epoch || !responding || from == QpState::kReset || from == QpState::kInit) {
    shared_epoch_ = shared_->epoch;
    // Into RTR, as the modify that took it there sized them; out of it,
    // nothing left to send.
    jobs_.assign(responding ? 2 * attr_.max_dest_rd_atomic + 4 : 0, RespJob{});
    jobs_head_ = jobs_count_ = 0;
    fatal_nak_ = false;
    sr_clear_kept();
    shared_wait_since_ = shared_wait_poll_ = 0;
  }
  state_.store(to, std::memory_order_release);
  if (to == QpState::kErr) {
    flush();
    // Every process with the QP open hears of its error, as the kernel
    // tells each opener of a shared target QP.
    if (events_ && resp_.fatal_error) events_->qp_error(*this, *resp_.fatal_error);
  }
}

void Qp::shared_exit() {
  shared_->resp = resp_;
  shared_lock_->unlock();
}

void Qp::shared_publish() {
  shared_->attr = attr_;
  shared_->state = state();
  shared_seen_ = std::atomic_ref(shared_->generation).load(std::memory_order_relaxed) + 1;
  std::atomic_ref(shared_->generation).store(shared_seen_, std::memory_order_release);
}

void Qp::flush() {
  // Every WQE still queued completes with IBV_WC_WR_FLUSH_ERR, signaled or
  // not (IBA 10.3.1: the error state); only wr_id, status, opcode and
  // qp_num mean anything in them.
  std::uint64_t head = sq_head_.load(std::memory_order_relaxed);
  const std::uint64_t tail = sq_tail();
  // Flush completions the CQ has no room for are lost; the QP is in the
  // error state already.
  for (; head != tail; ++head) (void)retire_head(WcStatus::kWrFlushErr);
  req_.wqe = head;
  jobs_count_ = 0;
  sr_clear_kept();
  // An XRC target's WQE in progress goes back flushed to its SRQ's CQ,
  // unless that SRQ is gone.
  // A shared target's belongs to the process that has the SRQ, which
  // flushes it when it sees the error state.
  if (resp_.recv_taken && (xrc_ == nullptr || bind_xrc_srq(resp_.xrc_srqn))) {
    complete_recv(resp_.recv, WcStatus::kWrFlushErr, WcOpcode::kRecv, 0, 0, 0, 0);
    resp_.recv_taken = false;
  } else if (shared_ == nullptr) {
    resp_.recv_taken = false;
  }
  if (rq_ == &own_rq_) {
    RecvWr wr;
    while (own_rq_.take(wr)) complete_recv(wr, WcStatus::kWrFlushErr, WcOpcode::kRecv, 0, 0, 0, 0);
  }
}

void Qp::receive_shared(const wire::RocePacket& pkt, Nanos now) {
  SharedGuard guard(*this);
  receive_own(pkt, now);
}

std::uint32_t Qp::transmit_shared(TxSink& sink, std::uint32_t budget, Nanos now) {
  SharedGuard guard(*this);
  return transmit_own(sink, budget, now);
}

void Qp::receive_own(const wire::RocePacket& pkt, Nanos now) {
  const QpState s = state();
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.operation == wire::Operation::kCnp) {
    if (congestion_) congestion_->on_cnp(qpn_, now);
    return;
  }
  const bool request = info.is_request();
  // Requests need RTR or later; responses need RTS or SQD (IBA 10.3.1).
  const bool state_ok = request ? (s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd)
                                : (s == QpState::kRts || s == QpState::kSqd);
  // An XRC initiator takes only responses, a target only requests.
  const bool side_ok = request ? type_ != QpType::kXrcIni : type_ != QpType::kXrcTgt;
  // A selective acknowledgement answers only a QP that offered selective
  // repeat; its opcode is of no transport of the QP's.
  const bool transport_ok =
      wire::transport_of(pkt.bth.opcode) == wire_transport() ||
      (info.operation == wire::Operation::kSelectiveAcknowledge && selective_repeat_);
  if (!state_ok || !side_ok || !transport_ok || !pkey_match(pkt.bth.pkey, attr_.pkey) ||
      (type_ != QpType::kUd && pkt.src_ip != attr_.route.dst_ip)) {
    counters_.inc(Counter::kDroppedInvalid);
    return;
  }
  counters_.inc(Counter::kRcvdPkts);
  if (pkt.ecn == wire::Ecn::kCe) {
    counters_.inc(Counter::kEcnMarkedPkts);
    if (congestion_) congestion_->on_ce_marked(qpn_, pkt, now);
  }
  if (request) {
    responder_receive(pkt, now);
  } else {
    completer_receive(pkt, now);
  }
}

std::uint32_t Qp::transmit_own(TxSink& sink, std::uint32_t budget, Nanos now) {
  if (state() == QpState::kErr) {
    flush();
    return 0;
  }
  // Responses and requests take turns: a long READ response stream must
  // not starve this QP's own requests (their ACK timer is running).
  std::uint32_t sent = 0;
  while (sent < budget) {
    const bool response_first = !last_tx_was_response_;
    bool ok;
    if (response_first) {
      ok = responder_send_one(sink, now);
      last_tx_was_response_ = ok;
      if (!ok) ok = requester_send_one(sink, now);
    } else {
      ok = requester_send_one(sink, now);
      last_tx_was_response_ = !ok && responder_send_one(sink, now);
      ok = ok || last_tx_was_response_;
    }
    if (!ok) break;
    ++sent;
  }
  complete_local_done();
  return sent;
}

bool Qp::has_work(Nanos now) const {
  // Another process changed a shared target: its next turn adopts that.
  if (shared_ != nullptr &&
      std::atomic_ref(shared_->generation).load(std::memory_order_acquire) != shared_seen_)
    return true;
  const QpState s = state();
  if (s == QpState::kErr)
    return sq_head_.load(std::memory_order_relaxed) != sq_tail() ||
           (rq_ == &own_rq_ && !own_rq_.empty());
  // A fatal NAK sent: the next turn takes the QP to the error state
  // (responder_send_one), even when the NAK used the last of a turn.
  if (jobs_count_ > 0 || fatal_nak_) return true;
  if (s != QpState::kRts && s != QpState::kSqd) return false;
  // A recovery with PSNs left to resend (sr_resend_one may find every one
  // of them held by the responder since, and send nothing).
  if (sr_.round && sr_.next.before(sr_.end) && sr_.next.before(req_.psn) &&
      (comp_.rnr_until == 0 || now >= comp_.rnr_until) &&
      (req_.gate_retry_at == 0 || now >= req_.gate_retry_at))
    return true;
  if (req_.wqe == sq_tail()) return false;
  // SQD finishes (and resends) what it has begun, and begins nothing.
  if (s == QpState::kSqd && !sq_[req_.wqe & sq_mask_].started) return false;
  if (comp_.rnr_until != 0 && now < comp_.rnr_until) return false;
  if (req_.gate_retry_at != 0 && now < req_.gate_retry_at) return false;
  if (window_full()) return false;
  // No turn until what holds the next WQE clears (requester_send_one's
  // checks).
  return !next_wqe_held();
}

bool Qp::next_wqe_held() const {
  const SendWqe& next = sq_[req_.wqe & sq_mask_];
  // A bind or local invalidation waits for every earlier WR to complete.
  if (is_local_op(next.wr.opcode) && req_.wqe != sq_head_.load(std::memory_order_relaxed))
    return true;
  if (next.started) return false;
  if ((next.wr.send_flags & send_flags::kFence) && req_.rd_atomic > 0) return true;
  return is_rd_atomic(next.wr.opcode) &&
         req_.rd_atomic >= std::max<std::uint32_t>(1, attr_.max_rd_atomic);
}

std::size_t Qp::state_bytes() const {
  std::size_t kept_bytes = sr_kept_.capacity() * sizeof(sr_kept_[0]);
  for (const auto& k : sr_kept_)
    if (k) kept_bytes += sizeof(KeptRequest) + k->frame.capacity();
  return sizeof(Qp) + sq_.capacity() * sizeof(SendWqe) + sq_sges_.capacity() * sizeof(Sge) +
         sq_inline_.capacity() + sq_routes_.capacity() * sizeof(wire::RouteTemplate) +
         own_rq_.capacity_bytes() + own_res_.capacity() * sizeof(RespResource) +
         jobs_.capacity() * sizeof(RespJob) + kept_bytes;
}

Qp::Progress Qp::progress_state() const {
  Progress p;
  p.sq_psn = req_.psn.value();
  p.sq_unacked_psn = comp_.psn.value();
  p.rq_psn = resp_.epsn.value();
  p.sq_wqes = sq_tail() - sq_head_.load(std::memory_order_relaxed);
  p.retry_left = comp_.retry_cnt;
  p.rnr_retry_left = comp_.rnr_retry;
  return p;
}

Nanos Qp::next_deadline() const {
  Nanos d = 0;
  for (Nanos t : {comp_.rto_deadline, comp_.rnr_until, req_.gate_retry_at}) {
    if (t != 0 && (d == 0 || t < d)) d = t;
  }
  // A shared XRC target has no requester: its one timer is the wait for
  // another process's requests.
  if (shared_ != nullptr) [[unlikely]]
    return shared_wait_poll_;
  return d;
}

void Qp::on_timer(Nanos now) {
  if (shared_ != nullptr) [[unlikely]] {
    if (shared_wait_poll_ != 0 && now >= shared_wait_poll_) {
      SharedGuard guard(*this);
      resume_waiting(now);
    }
    return;
  }
  if (req_.gate_retry_at != 0 && now >= req_.gate_retry_at) req_.gate_retry_at = 0;
  if (comp_.rnr_until != 0 && now >= comp_.rnr_until) {
    comp_.rnr_until = 0;
    // A resend at this instant (before the wait was cleared) could not
    // start the timer.
    if (comp_.psn.before(req_.ack_req_end)) arm_retransmit(now);
  }
  if (comp_.rto_deadline != 0 && now >= comp_.rto_deadline) {
    comp_.rto_deadline = 0;
    const bool outstanding =
        sq_head_.load(std::memory_order_relaxed) != req_.wqe || comp_.psn != req_.psn;
    if (!outstanding || state() == QpState::kErr) return;
    if (comp_.tail) {
      sr_tail_probe(now);
      return;
    }
    counters_.inc(Counter::kLocalAckTimeoutErr);
    retry(comp_.psn, RetryCause::kTimeout, now);
  }
}

}  // namespace uroce::transport
