/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A queue pair: the transport's unit of state. One class, its methods split
// by concern over files as rxe splits its engines:
//   qp.cc         state machine, posting, completions, flushing
//   requester.cc  work requests -> request packets (rxe_req.c)
//   responder.cc  request packets -> execution, ACKs, read responses (rxe_resp.c)
//   completer.cc  ACKs and responses -> completions, go-back-N (rxe_comp.c)
//
// Threading: post_send/post_recv may run on the program's thread while
// everything else runs on the engine thread; the send and receive queues
// are single-producer single-consumer rings between the two. Every method
// whose name does not start with post_ belongs to the engine thread.
// Time is a parameter (Nanos) everywhere: the QP has no clock.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "transport/counters.h"
#include "transport/cq.h"
#include "transport/doorbell.h"
#include "transport/events.h"
#include "transport/memory.h"
#include "transport/recv_queue.h"
#include "transport/responder_state.h"
#include "transport/tx.h"
#include "transport/types.h"
#include "wire/psn.h"
#include "wire/roce_parser.h"

namespace uroce::transport {

namespace attr_mask = wire::qp_attr_mask;

/// The attributes modify_qp sets (the fields of ibv_qp_attr the transport
/// uses). The route is the address vector already resolved to Ethernet
/// and IP by the layer above.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  wire::Mtu path_mtu = wire::Mtu::k1024;
  std::uint32_t qkey = 0;
  std::uint32_t rq_psn = 0;
  std::uint32_t sq_psn = 0;
  std::uint32_t dest_qp_num = 0;
  unsigned qp_access_flags = 0;
  std::uint16_t pkey = wire::kDefaultPkey;
  std::uint8_t max_rd_atomic = 0;
  std::uint8_t max_dest_rd_atomic = 0;
  std::uint8_t min_rnr_timer = 0;  ///< RNR NAK timer code (wire/aeth_syndrome.h)
  std::uint8_t timeout = 0;        ///< local ACK timeout: 4.096 us << timeout; 0 = infinite
  std::uint8_t retry_cnt = 0;      ///< 0..7
  std::uint8_t rnr_retry = 0;      ///< 0..7, 7 = infinite
  /// RTS to SQD: report IBV_EVENT_SQ_DRAINED once the drain is over.
  bool en_sqd_async_notify = false;
  /// Reported, never set: in SQD, a message begun before it is not yet
  /// acknowledged (ibv_qp_attr's sq_draining).
  bool sq_draining = false;
  wire::RoceRoute route;
};

/// The block an XRC target QP's processes share (responder_state.h): its
/// responder, and the state and attributes every Qp of it adopts. Made
/// once, zeroed, in memory each process maps, and used holding its lock.
struct SharedResponder {
  /// One more with each change of `state` or `attr` (read and written
  /// through std::atomic_ref: has_work looks without the lock).
  std::uint64_t generation = 0;
  /// One more with each reset: a Qp that adopts a new epoch drops what it
  /// queued before, whatever states it missed between.
  std::uint64_t epoch = 0;
  QpState state = QpState::kReset;
  QpAttr attr;
  ResponderState resp;
  std::uint32_t res_count = 0;  ///< resources in use: max_dest_rd_atomic
  std::array<ResponderResource, kMaxRdAtomic> res{};
};
static_assert(std::is_trivially_copyable_v<SharedResponder>,
              "shared between processes: no pointer, nothing to construct");

/// Sizes a QP is created with.
struct QpInit {
  QpType type = QpType::kRc;
  std::uint32_t qpn = 0;
  std::uint32_t max_send_wr = 64;
  std::uint32_t max_send_sge = 1;
  std::uint32_t max_inline_data = 0;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  RecvQueue* srq = nullptr;  ///< shared receive queue, or null for a QP's own
  /// XRC target: its domain, whose SRQs each message names (send_cq,
  /// recv_cq, srq and memory are then unused: the SRQ brings its own).
  XrcDomain* xrc = nullptr;
  /// XRC target of a domain other processes share: the responder in
  /// their common block, and the lock that orders them (both outlive the
  /// QP). Null: the QP's responder is its own.
  SharedResponder* shared = nullptr;
  SharedResponderLock* shared_lock = nullptr;
  std::uint32_t max_recv_wr = 64;
  std::uint32_t max_recv_sge = 1;
  bool sq_sig_all = false;
  MemoryAccess* memory = nullptr;
  /// UD: the largest message (IBA C10-93.1.1), the port's active MTU;
  /// UD has no path MTU attribute of its own.
  wire::Mtu port_mtu = wire::Mtu::k1024;
  /// Offer selective repeat (RC only; selective_repeat.cc): a peer that
  /// offers it too keeps what it receives out of order and says what it
  /// holds; any other peer gets go-back-N.
  bool selective_repeat = false;
  EventSink* events = nullptr;               ///< optional: asynchronous events
  TxGate* gate = nullptr;                    ///< optional
  CongestionObserver* congestion = nullptr;  ///< optional
};

class Qp {
 public:
  explicit Qp(const QpInit& init);
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  std::uint32_t qpn() const { return qpn_; }
  QpType type() const { return type_; }
  /// Acknowledged and retransmitted, as RC is: RC and both XRC ends.
  bool reliable() const {
    return type_ == QpType::kRc || type_ == QpType::kXrcIni || type_ == QpType::kXrcTgt;
  }
  /// The transport bits of the opcodes the QP sends and accepts.
  wire::Transport wire_transport() const { return transport_; }
  QpState state() const { return state_.load(std::memory_order_acquire); }
  const QpAttr& attr() const { return attr_; }
  /// The transmit gate congestion control installed, if any.
  const TxGate* gate() const { return gate_; }

  /// Where the QP rings when a post or a modify gives it work (the
  /// engine's, set when it takes the QP up, before the program may post;
  /// null when none runs it).
  void set_doorbell(Doorbell* doorbell) { doorbell_ = doorbell; }
  /// The engine took the QP up after it rang: the next post rings again.
  void answer_doorbell() { rung_.exchange(false, std::memory_order_acq_rel); }
  /// Whether the doorbell rang and the engine has not answered yet.
  bool doorbell_rung() const { return rung_.load(std::memory_order_acquire); }
  /// The engine's marks: the QP waits in its transmit queue; its last
  /// rescan found it with work that nothing had queued; the deadline its
  /// timer wheel holds for it (0: none). Engine thread only.
  bool tx_queued() const { return tx_queued_; }
  void set_tx_queued(bool queued) { tx_queued_ = queued; }
  bool rescan_seen() const { return rescan_seen_; }
  void set_rescan_seen(bool seen) { rescan_seen_ = seen; }
  Nanos armed_at() const { return armed_at_; }
  void set_armed_at(Nanos deadline) { armed_at_ = deadline; }
  const Counters& counters() const { return counters_; }

  /// Moves the QP through the IBA state machine (IBA 10.3.1, the kernel's
  /// ib_modify_qp_is_ok). Returns 0 or EINVAL for a transition or mask
  /// the state machine does not allow.
  int modify(const QpAttr& attr, unsigned mask, Nanos now);

  /// Posts a send WR. Returns 0, EINVAL (bad WR or QP state), or ENOMEM
  /// (queue full). In the error state the WR completes with
  /// IBV_WC_WR_FLUSH_ERR, as on hardware.
  int post_send(const SendWr& wr);
  /// Posts a receive WR to the QP's own receive queue.
  int post_recv(const RecvWr& wr);
  /// Send WRs posted and not retired yet. The posting thread may read it
  /// without the engine: a snapshot, which the engine may lower meanwhile.
  std::uint64_t sq_outstanding() const {
    return sq_tail_.load(std::memory_order_relaxed) - sq_head_.load(std::memory_order_relaxed);
  }

  /// An XRC target whose responder other processes share (QpInit::shared).
  bool shared() const { return shared_ != nullptr; }
  /// A shared target: adopts now what another process's modify changed
  /// (the state and attributes a query reports). Engine thread or not:
  /// holds the block's lock.
  void sync_shared() {
    if (shared_ != nullptr) SharedGuard guard(*this);
  }
  ~Qp();

  /// Delivers a received, validated packet addressed to this QP.
  void receive(const wire::RocePacket& pkt, Nanos now) {
    if (shared_ != nullptr) [[unlikely]] {
      receive_shared(pkt, now);
      return;
    }
    receive_own(pkt, now);
  }

  /// Sends up to `budget` packets (responses first, then requests) and
  /// returns how many went out. Stops early when the sink is full, the
  /// window is closed, the gate says wait, or there is nothing to send.
  std::uint32_t transmit(TxSink& sink, std::uint32_t budget, Nanos now) {
    if (shared_ != nullptr) [[unlikely]]
      return transmit_shared(sink, budget, now);
    return transmit_own(sink, budget, now);
  }

  /// True when transmit() would do something now: send, flush the queues
  /// in the error state, or take the QP to it after a fatal NAK.
  bool has_work(Nanos now) const;

  /// The next time on_timer() must run (local ACK timeout, RNR wait, gate
  /// retry), or 0 when no timer is armed.
  Nanos next_deadline() const;
  /// Runs the timers due at `now`.
  void on_timer(Nanos now);

  /// Bytes of memory this QP holds: its object, queues and responder
  /// resources.
  std::size_t state_bytes() const;

  /// Where the QP stands (what `rdma resource show qp` says of a kernel
  /// QP, and more): read with the engine held, as every other field.
  struct Progress {
    std::uint32_t sq_psn;          ///< the next PSN the requester sends
    std::uint32_t sq_unacked_psn;  ///< the oldest PSN not acknowledged yet
    std::uint32_t rq_psn;          ///< the PSN the responder expects
    std::uint64_t sq_wqes;         ///< send WRs posted and not completed
    std::uint8_t retry_left;       ///< of retry_cnt, since the last progress
    std::uint8_t rnr_retry_left;   ///< of rnr_retry, likewise
  };
  Progress progress_state() const;

 private:
  // A send WQE: the WR, and the requester's and completer's progress on
  // it. Its gather list, inline data and UD route are in the QP's tables
  // (sges_of, inline_of, ud_route_of), sized for the QP's caps.
  struct SendWqe {
    SendWrFields wr;
    std::uint32_t length = 0;  ///< message length in bytes
    std::uint32_t inline_len = 0;
    bool started = false;  ///< PSNs assigned
    bool sent = false;     ///< every packet (or the READ request) sent at least once
    bool counted_rd_atomic = false;
    bool done = false;  ///< completed locally (UC/UD), waiting for the completer
    wire::Psn first_psn;
    wire::Psn last_psn;
  };

  using RespResource = ResponderResource;

  // What the responder sends, in PSN order: ACKs and NAKs, read response
  // streams, atomic acknowledgements, selective acknowledgements.
  struct RespJob {
    enum class Kind : std::uint8_t { kAck, kRead, kAtomicAck, kSack } kind = Kind::kAck;
    wire::Psn psn;    ///< ACK/NAK PSN, or the next read response PSN
    wire::Psn start;  ///< READ: the PSN this response stream began at
    wire::AethSyndrome syndrome;
    std::uint32_t msn = 0;
    std::uint32_t res = 0;  ///< responder resource index
    /// A job that holds a responder resource (a response stream).
    bool holds_resource() const { return kind == Kind::kRead || kind == Kind::kAtomicAck; }
  };

  // A request the responder received ahead of the expected PSN and keeps
  // (selective repeat): its frame, and the packet parsed from it. Each is
  // allocated when it comes and freed when it runs or is forgotten, so a
  // QP holds frames only while a gap is open.
  struct KeptRequest {
    std::vector<std::uint8_t> frame;
    wire::RocePacket pkt;  ///< spans into `frame`
  };

  static bool is_rd_atomic(WrOpcode op) {
    return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp ||
           op == WrOpcode::kAtomicFetchAndAdd;
  }

  /// Operations on this host's memory keys, with no packet on the wire.
  static bool is_local_op(WrOpcode op) {
    return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv;
  }

  // qp.cc
  /// Rings the doorbell unless it rang since the engine last answered.
  /// After the WQE's tail is published: the exchange pairs with the
  /// engine's in answer_doorbell, so an engine that answers after a ring
  /// it did not hear of sees the WQE anyway.
  void ring_doorbell() {
    if (doorbell_ != nullptr && !rung_.exchange(true, std::memory_order_acq_rel))
      doorbell_->ring(*this);
  }
  bool transition_allowed(QpState from, QpState to, unsigned mask) const;
  void reset_state();
  /// Completes the WQE at the head of the send queue with `status` and
  /// hands its slot back. False when the completion found its CQ full: the
  /// QP is then in the error state and its send queue flushed, so the
  /// caller stops walking it.
  [[nodiscard]] bool retire_head(WcStatus status);
  void complete_recv(const RecvWr& wr, WcStatus status, WcOpcode opcode, std::uint32_t byte_len,
                     unsigned flags, std::uint32_t imm, std::uint32_t src_qp,
                     bool solicited = false, std::uint8_t sl = 0);
  void enter_error();
  /// In SQD: once every message begun before it is acknowledged, the
  /// drain is over (and reported, if asked for).
  void check_sq_drained();
  void lost_completion();
  void flush();
  SendWqe& sq_at(std::uint64_t index) { return sq_[index & sq_mask_]; }
  const SendWqe& sq_at(std::uint64_t index) const { return sq_[index & sq_mask_]; }
  std::size_t slot_of(const SendWqe& wqe) const {
    return static_cast<std::size_t>(&wqe - sq_.data());
  }
  const Sge* sges_of(const SendWqe& wqe) const {
    return sq_sges_.data() + slot_of(wqe) * sge_stride_;
  }
  const std::uint8_t* inline_of(const SendWqe& wqe) const {
    return sq_inline_.data() + slot_of(wqe) * max_inline_;
  }
  const wire::RouteTemplate& ud_route_of(const SendWqe& wqe) const {
    return sq_routes_[slot_of(wqe)];
  }
  std::uint64_t sq_tail() const { return sq_tail_.load(std::memory_order_acquire); }
  std::uint32_t mtu() const {
    return wire::mtu_bytes(type_ == QpType::kUd ? port_mtu_ : attr_.path_mtu);
  }
  std::uint32_t packets_of(const SendWqe& wqe) const;
  /// Whether as many PSNs are unacknowledged as a requester may have.
  bool window_full() const {
    return reliable() && static_cast<std::uint32_t>(req_.psn - comp_.psn) >= kMaxUnackedPsns;
  }
  /// Whether the next WQE to send, not begun, must wait for earlier ones:
  /// a fence or the initiator depth behind READs and atomics, or a bind or
  /// local invalidation behind anything. There must be one (req_.wqe !=
  /// sq_tail()).
  bool next_wqe_held() const;

  // requester.cc
  bool requester_send_one(TxSink& sink, Nanos now);
  bool execute_local_ops();
  /// The packet of `wqe` at `psn`, `offset` bytes into its message (for a
  /// READ, the bytes already received).
  bool build_request(SendWqe& wqe, wire::Psn psn, std::uint32_t offset, TxPacket& pkt,
                     std::uint32_t& len, bool& last);
  bool gather(const SendWqe& wqe, std::uint32_t offset, std::uint32_t len, TxPacket& pkt);
  void go_back_n(wire::Psn psn);
  /// Starts the local ACK timer unless it runs (inline: every AckReq
  /// packet asks, and it almost always does). With selective repeat, a
  /// running timer may also turn into a tail probe's, or back.
  void arm_retransmit(Nanos now) {
    if (comp_.rto_deadline != 0 && !comp_.tail && !sr_.peer) return;
    start_retransmit_timer(now);
  }
  void start_retransmit_timer(Nanos now);

  // completer.cc
  void completer_receive(const wire::RocePacket& pkt, Nanos now);
  bool complete_acked(wire::Psn psn, bool inclusive, Nanos now);
  void on_read_response(const wire::RocePacket& pkt, SendWqe& wqe, Nanos now);
  void on_atomic_ack(const wire::RocePacket& pkt, SendWqe& wqe, Nanos now);
  void on_nak(const wire::RocePacket& pkt, Nanos now);
  enum class RetryCause : std::uint8_t { kTimeout, kNak, kImpliedNak, kRnr };
  void retry(wire::Psn from, RetryCause cause, Nanos now);
  /// Sends again from `from`: go-back-N, or a recovery (selective repeat).
  void restart(wire::Psn from, RetryCause cause);
  void progress(Nanos now);
  void complete_local_done();
  void fail_head(WcStatus status);

  // selective_repeat.cc
  enum class Resend : std::uint8_t { kNone, kSent, kBlocked };
  Resend sr_resend_one(TxSink& sink, Nanos now);
  void sr_slide();
  bool sr_sacked(wire::Psn psn) const;
  /// Opens a recovery over [comp_.psn, end). A `probe` resends comp_.psn
  /// even if the responder holds it; `reask` asks again for what a READ
  /// part answered still misses.
  void sr_begin(wire::Psn end, bool probe, bool reask);
  /// The responder acknowledged everything before `to`; true if that is
  /// more than it had.
  bool sr_acked_to(wire::Psn to);
  /// comp_.psn moved on: the SACK marks and acked_to follow, and the
  /// round trip timed ends if it reached the PSN timed.
  void sr_progress(Nanos now);
  /// A response said the responder keeps what comes out of order.
  void sr_learn_peer();
  /// Whether the requester is at its tail: nothing it may send until an
  /// answer comes (nothing posted, the window full, the next WQE held), or
  /// few packets unacknowledged. A loss there draws no SACK.
  bool sr_tail() const;
  /// How long the next tail probe waits (doubling with each one that
  /// went unanswered); 0 while no round trip was timed.
  Nanos sr_probe_timeout() const;
  /// The local ACK timer of a tail expired: resend the oldest PSN.
  void sr_tail_probe(Nanos now);
  void on_selective_ack(const wire::RocePacket& pkt, Nanos now);
  void sr_keep(const wire::RocePacket& pkt);
  /// Keeps `pkt`, a request ahead of the expected PSN, in its slot (a
  /// copy of its frame), to run when the expected PSN reaches it.
  void keep_request(const wire::RocePacket& pkt);
  bool sr_holds(wire::Psn psn) const;
  /// Frees the slot of `psn` (whatever PSN it holds).
  void sr_forget(wire::Psn psn);
  /// Takes the request kept for `psn` out of its slot, which it frees.
  std::unique_ptr<KeptRequest> sr_take(wire::Psn psn);
  /// Executes the expected request `pkt`, then the kept ones it lets run.
  void sr_execute_with_kept(const wire::RocePacket& pkt, Nanos now);
  void sr_drain(Nanos now);
  void sr_clear_kept();
  /// Writes the SACKETH of a SACK acknowledging `acked` to `bytes`.
  void sr_sack(wire::Psn acked, std::uint8_t* bytes) const;
  void sr_forget_skipped(wire::Psn from);
  wire::Psn sr_cumulative() const;
  void queue_sack();
  std::unique_ptr<KeptRequest>& kept_at(wire::Psn psn) {
    return sr_kept_[psn.value() % kMaxUnackedPsns];
  }
  const std::unique_ptr<KeptRequest>& kept_at(wire::Psn psn) const {
    return sr_kept_[psn.value() % kMaxUnackedPsns];
  }

  // responder.cc
  /// XRC target: points the receive queue, the receive CQ and the memory
  /// at the SRQ `srqn` of the QP's domain; false when it has none such.
  bool bind_xrc_srq(std::uint32_t srqn, wire::NakCode* code = nullptr);
  void responder_receive(const wire::RocePacket& pkt, Nanos now);
  void responder_duplicate(const wire::RocePacket& pkt, Nanos now);
  void responder_execute(const wire::RocePacket& pkt, Nanos now);
  void responder_uc(const wire::RocePacket& pkt, Nanos now);
  void responder_ud(const wire::RocePacket& pkt, Nanos now);
  bool take_recv(wire::Psn psn);
  bool execute_send(const wire::RocePacket& pkt);
  bool execute_write(const wire::RocePacket& pkt);
  bool execute_read(const wire::RocePacket& pkt);
  bool execute_atomic(const wire::RocePacket& pkt);
  bool check_opcode_sequence(const wire::OpcodeInfo& info) const;
  bool check_length(const wire::RocePacket& pkt) const;
  bool copy_to_recv(wire::ConstBytes data, std::uint32_t offset, WcStatus* err);
  void queue_ack(wire::Psn psn, bool ack_req);
  void queue_nak(wire::Psn psn, wire::AethSyndrome syndrome);
  bool push_job(const RespJob& job);
  RespJob* find_job(RespJob::Kind kind, std::uint32_t res);
  bool drop_jobs_after(wire::Psn psn, wire::Psn* earliest);
  void responder_error(wire::Psn psn, wire::NakCode code, WcStatus local_status);
  void write_grh(const wire::RocePacket& pkt, std::uint8_t* grh) const;
  bool responder_send_one(TxSink& sink, Nanos now);
  std::uint32_t alloc_resource();
  /// A shared XRC target, `pkt` ahead of the expected PSN: the requests
  /// before it may be another process's, on their way through its
  /// engine. Keeps it and looks again shortly (on_timer), unless it has
  /// waited kSharedWaitNs for them already: false, NAK it.
  bool wait_for_other_process(const wire::RocePacket& pkt, Nanos now);
  /// Runs what waits once the expected PSN reached it; NAKs a sequence
  /// error if the wait is over and it has not.
  void resume_waiting(Nanos now);
  /// Gives the responder `n` resources, all free.
  void reset_resources(std::uint32_t n);

  // A shared XRC target (responder_state.h): held around a receive, a
  // transmit and a modify, the block's lock, and what another process's
  // modify changed adopted; a change of this QP's published.
  class SharedGuard {
   public:
    explicit SharedGuard(Qp& qp) : qp_(qp.shared_ != nullptr ? &qp : nullptr) {
      if (qp_ != nullptr) qp_->shared_enter();
    }
    ~SharedGuard() {
      if (qp_ != nullptr) qp_->shared_exit();
    }
    SharedGuard(const SharedGuard&) = delete;
    SharedGuard& operator=(const SharedGuard&) = delete;

   private:
    Qp* const qp_;
  };
  void receive_own(const wire::RocePacket& pkt, Nanos now);
  std::uint32_t transmit_own(TxSink& sink, std::uint32_t budget, Nanos now);
  // The same, for a shared XRC target: holding its block's lock.
  [[gnu::noinline]] void receive_shared(const wire::RocePacket& pkt, Nanos now);
  [[gnu::noinline]] std::uint32_t transmit_shared(TxSink& sink, std::uint32_t budget, Nanos now);
  void shared_enter();
  void shared_exit();
  void shared_publish();

  const QpType type_;
  const wire::Transport transport_;
  const std::uint32_t qpn_;
  const bool sq_sig_all_;
  const std::uint32_t max_send_sge_;
  const std::uint32_t max_inline_;
  const wire::Mtu port_mtu_;
  const bool selective_repeat_;
  Cq* const send_cq_;
  // The receive side: the QP's own, or an XRC target's current SRQ's
  // (bind_xrc_srq moves them, on the engine thread, per request).
  Cq* recv_cq_;
  RecvQueue* rq_;  ///< own or shared
  RecvQueue own_rq_;
  MemoryAccess* memory_;
  XrcDomain* const xrc_;
  EventSink* const events_;
  Doorbell* doorbell_ = nullptr;
  std::atomic<bool> rung_{false};
  bool tx_queued_ = false;
  bool rescan_seen_ = false;
  Nanos armed_at_ = 0;
  TxGate* const gate_;
  CongestionObserver* const congestion_;

  std::atomic<QpState> state_{QpState::kReset};
  QpAttr attr_;
  /// attr_.route's headers, laid out when the route is set: what the
  /// engine copies into each frame this QP sends (roce_frame.h).
  wire::RouteTemplate route_template_;
  Counters counters_;

  // Send queue: WQEs in [sq_head_, sq_tail_). The program advances the
  // tail; the completer advances the head. Room for sq_depth_ WQEs in a
  // power of two of slots: a slot is an index's low bits, not a division.
  const std::uint32_t sq_depth_;
  std::vector<SendWqe> sq_;
  const std::uint64_t sq_mask_;
  // The send WQEs' gather lists, inline data and (UD) routes: sge_stride_
  // SGEs and max_inline_ bytes to a slot of sq_, as a hardware QP's WQEs
  // are as large as its caps make them, not the device's limits.
  const std::uint32_t sge_stride_;
  std::vector<Sge> sq_sges_;
  std::vector<std::uint8_t> sq_inline_;
  std::vector<wire::RouteTemplate> sq_routes_;
  std::atomic<std::uint64_t> sq_head_{0};
  std::atomic<std::uint64_t> sq_tail_{0};

  // Requester (rxe req.*).
  struct {
    std::uint64_t wqe = 0;     ///< next WQE to send from
    std::uint32_t offset = 0;  ///< bytes of it already sent
    wire::Psn psn;             ///< next PSN to send
    /// One past the last PSN a sent AckReq asks to be acknowledged (a
    /// READ's, past its last response): while the completer has not
    /// reached it, the local ACK timer runs.
    wire::Psn ack_req_end;
    std::uint32_t since_ack_req = 0;
    std::uint32_t rd_atomic = 0;  ///< outstanding READ/ATOMIC requests
    Nanos gate_retry_at = 0;
  } req_;

  // Completer (rxe comp.*).
  struct {
    wire::Psn psn;  ///< oldest PSN not yet acknowledged
    std::uint8_t retry_cnt = 0;
    std::uint8_t rnr_retry = 0;
    Nanos rto_deadline = 0;        ///< 0: timer disarmed
    bool tail = false;             ///< the deadline armed is a tail probe's (selective repeat)
    std::uint8_t tail_probes = 0;  ///< tail probes sent with no progress since
    Nanos rnr_until = 0;           ///< 0: not waiting out an RNR NAK
    bool retry_pending = false;    ///< restarted from retry_psn, no progress since
    wire::Psn retry_psn;
    bool rerequested = false;  ///< the one free READ re-request of this retry
  } comp_;

  // Responder (rxe resp.*). A shared XRC target's is the block's, copied
  // in and out under its lock (SharedGuard), and its resources are the
  // block's (res_ points there). Its jobs, what this process sends, are
  // its own either way.
  ResponderState resp_;
  std::vector<RespResource> own_res_;
  std::span<RespResource> res_;
  SharedResponder* const shared_;
  SharedResponderLock* const shared_lock_;
  /// The block's generation and epoch this QP last adopted.
  std::uint64_t shared_seen_ = 0;
  std::uint64_t shared_epoch_ = 0;
  /// Which Qp began the WRITE in progress (resp_.write_token), unique
  /// across the processes sharing a target; where that WRITE goes, in this
  /// process's memory.
  const std::uint64_t token_;
  std::uint8_t* write_data_ = nullptr;
  std::uint32_t write_length_ = 0;
  std::uint32_t write_offset_ = 0;
  /// Requests kept for another process's to run first
  /// (wait_for_other_process): since when, and the next look.
  Nanos shared_wait_since_ = 0;
  Nanos shared_wait_poll_ = 0;
  std::vector<RespJob> jobs_;  ///< ring
  /// This QP queued the NAK that ends it (resp_.fatal): it enters the
  /// error state once the NAK is sent. (A shared target's other processes
  /// see resp_.fatal, and leave the state to the one with the NAK.)
  bool fatal_nak_ = false;
  bool last_tx_was_response_ = false;
  std::uint32_t jobs_head_ = 0;
  std::uint32_t jobs_count_ = 0;

  // Selective repeat, the requester's side: what the responder holds,
  // and the recovery under way.
  struct {
    bool peer = false;  ///< an answer offered it: the responder keeps what comes out of order
    /// Bit psn % kMaxUnackedPsns: the responder holds that PSN. Valid from
    /// `base` (sr_slide moves it up to comp_.psn, clearing behind it).
    std::array<std::uint64_t, kMaxUnackedPsns / 64> sacked{};
    wire::Psn base;
    bool round = false;  ///< a recovery is open
    /// Everything before it executed, as the responder's latest ACK or SACK
    /// said (ahead of comp_.psn while a READ or ATOMIC misses its answer).
    wire::Psn acked_to;
    bool reask = false;       ///< it asks again for what a READ part answered misses
    bool probe = false;       ///< it resends comp_.psn, held or not (after a timeout)
    bool tail_probe = false;  ///< that resend is a tail probe's (counted when sent)
    wire::Psn next;           ///< the next PSN it may resend
    wire::Psn end;            ///< one past the last PSN it resends
    wire::Psn mark;           ///< req_.psn when it began
    // The round-trip time, from one AckReq packet at a time (never a
    // resent one): what a tail probe waits.
    bool timing = false;
    wire::Psn timed;  ///< one past the PSN timed
    Nanos timed_at = 0;
    Nanos srtt = 0;  ///< 0: no sample yet
    Nanos rttvar = 0;
    /// Going back N: PSNs before resent_to are resent, not timed.
    bool resending = false;
    wire::Psn resent_to;
  } sr_;
  // The responder's side: requests kept out of order, at slot
  // psn % kMaxUnackedPsns (the slots allocated the first time one comes),
  // and which slots hold one.
  std::vector<std::unique_ptr<KeptRequest>> sr_kept_;
  std::array<std::uint64_t, kMaxUnackedPsns / 64> sr_held_{};
  std::uint32_t sr_kept_count_ = 0;
};

}  // namespace uroce::transport
