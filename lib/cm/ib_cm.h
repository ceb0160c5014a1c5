/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The IB connection manager (IBA 12): the communication state machine of
// each connection, driven by MADs received, calls of the layer above and
// time, as Linux's drivers/infiniband/core/cm.c implements it, and the
// part of the kernel's MAD layer it relies on (a message sent with a
// timeout is resent until answered or out of retries). Pure: MADs arrive
// as bytes through receive(), leave through a MadSender; time is a
// parameter; next_deadline() says when on_timer() must run. What happens
// to a connection is reported as CmEvents, taken with poll_event(), in
// the order they happened, as the kernel's cm_work queue delivers them.
//
// Files: ib_cm.cc (ids, resends, timewait, QP attributes), ib_cm_send.cc
// (the messages the layer above sends), ib_cm_recv.cc (one handler per
// received message).
//
// A connection is named by its local communication ID, a random 32-bit
// number (the kernel XORs a counter with a random operand for the same
// unpredictability). One thread drives an IbCm.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cm/counters.h"
#include "cm/mad.h"
#include "cm/types.h"

namespace uroce::cm {

/// Communication states (ib_cm.h enum ib_cm_state, in its order).
enum class CmState : std::uint8_t {
  kIdle,
  kListen,
  kReqSent,
  kReqRcvd,
  kMraReqSent,
  kMraReqRcvd,
  kRepSent,
  kRepRcvd,
  kMraRepSent,
  kMraRepRcvd,
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kTimewait,
  kSidrReqSent,
  kSidrReqRcvd,
};

constexpr std::string_view name(CmState s) {
  switch (s) {
    case CmState::kIdle:
      return "IDLE";
    case CmState::kListen:
      return "LISTEN";
    case CmState::kReqSent:
      return "REQ_SENT";
    case CmState::kReqRcvd:
      return "REQ_RCVD";
    case CmState::kMraReqSent:
      return "MRA_REQ_SENT";
    case CmState::kMraReqRcvd:
      return "MRA_REQ_RCVD";
    case CmState::kRepSent:
      return "REP_SENT";
    case CmState::kRepRcvd:
      return "REP_RCVD";
    case CmState::kMraRepSent:
      return "MRA_REP_SENT";
    case CmState::kMraRepRcvd:
      return "MRA_REP_RCVD";
    case CmState::kEstablished:
      return "ESTABLISHED";
    case CmState::kDreqSent:
      return "DREQ_SENT";
    case CmState::kDreqRcvd:
      return "DREQ_RCVD";
    case CmState::kTimewait:
      return "TIMEWAIT";
    case CmState::kSidrReqSent:
      return "SIDR_REQ_SENT";
    case CmState::kSidrReqRcvd:
      return "SIDR_REQ_RCVD";
  }
  return {};
}

/// What an IbCm reports (ib_cm.h enum ib_cm_event_type, without LAP/APR).
enum class CmEventType : std::uint8_t {
  kReqError,  ///< the REQ went unanswered through every resend
  kReqReceived,
  kRepError,  ///< the REP went unanswered through every resend
  kRepReceived,
  kRtuReceived,
  kUserEstablished,  ///< notify_established(): the QP saw traffic before the RTU
  kDreqError,        ///< the DREQ went unanswered; the connection is in timewait
  kDreqReceived,
  kDrepReceived,
  kTimewaitExit,
  kMraReceived,
  kRejReceived,
  kSidrReqError,
  kSidrReqReceived,
  kSidrRepReceived,
};

constexpr std::string_view name(CmEventType t) {
  switch (t) {
    case CmEventType::kReqError:
      return "REQ_ERROR";
    case CmEventType::kReqReceived:
      return "REQ_RECEIVED";
    case CmEventType::kRepError:
      return "REP_ERROR";
    case CmEventType::kRepReceived:
      return "REP_RECEIVED";
    case CmEventType::kRtuReceived:
      return "RTU_RECEIVED";
    case CmEventType::kUserEstablished:
      return "USER_ESTABLISHED";
    case CmEventType::kDreqError:
      return "DREQ_ERROR";
    case CmEventType::kDreqReceived:
      return "DREQ_RECEIVED";
    case CmEventType::kDrepReceived:
      return "DREP_RECEIVED";
    case CmEventType::kTimewaitExit:
      return "TIMEWAIT_EXIT";
    case CmEventType::kMraReceived:
      return "MRA_RECEIVED";
    case CmEventType::kRejReceived:
      return "REJ_RECEIVED";
    case CmEventType::kSidrReqError:
      return "SIDR_REQ_ERROR";
    case CmEventType::kSidrReqReceived:
      return "SIDR_REQ_RECEIVED";
    case CmEventType::kSidrRepReceived:
      return "SIDR_REP_RECEIVED";
  }
  return {};
}

/// One event. For the *_RECEIVED events `mad` is the message and `from`
/// where it came from; for REQ and SIDR_REQ `id` is a new connection
/// created on `listen_id`, whose `context` it inherits.
struct CmEvent {
  CmEventType type = CmEventType::kReqError;
  std::uint32_t id = 0;
  std::uint32_t listen_id = 0;
  std::uint64_t context = 0;  ///< the id's context, as given to create_id()
  int status = 0;             ///< *_ERROR: -ETIMEDOUT
  GsiAddress from;
  Mad mad;
};

/// What a host's CM knows of its device.
struct IbCmConfig {
  std::uint64_t ca_guid = 0;       ///< the node GUID a peer keys its timewait tables by
  std::uint8_t ca_ack_delay = 15;  ///< local_ca_ack_delay; rxe's RXE_LOCAL_CA_ACK_DELAY is 15
  std::uint32_t hi_tid = 1;        ///< the MAD agent's high TID word (cm_form_tid)
  std::uint8_t port_num = 1;
  std::vector<Gid> gids;  ///< the GID table: sgid_index i is gids[i]
};

/// The primary path of a connection, as the route resolution gave it
/// (the fields of a struct sa_path_rec a RoCE REQ uses).
struct PathRecord {
  Gid sgid;
  Gid dgid;
  std::uint32_t flow_label = 0;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t sl = 0;
  std::uint8_t rate = 0;
  wire::Mtu mtu = wire::Mtu::k1024;
  std::uint8_t packet_life_time = 18;  ///< CMA_IBOE_PACKET_LIFETIME
  std::uint16_t pkey = wire::kDefaultPkey;
  std::optional<wire::MacAddr> dmac;  ///< the peer's MAC, when resolved
};

/// ib_cm_req_param.
struct ReqParam {
  PathRecord path;
  std::uint64_t service_id = 0;
  std::uint32_t qp_num = 0;
  QpType qp_type = QpType::kRc;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t remote_cm_response_timeout = 20;
  std::uint8_t local_cm_response_timeout = 20;
  std::uint8_t max_cm_retries = 15;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
  bool flow_control = false;
  bool srq = false;
  std::span<const std::uint8_t> private_data;  ///< at most 92 bytes
};

/// ib_cm_rep_param.
struct RepParam {
  std::uint32_t qp_num = 0;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t failover_accepted = 0;
  bool flow_control = false;
  std::uint8_t rnr_retry_count = 7;
  bool srq = false;
  std::span<const std::uint8_t> private_data;  ///< at most 196 bytes
};

/// ib_cm_sidr_req_param.
struct SidrReqParam {
  PathRecord path;
  std::uint64_t service_id = 0;
  std::uint32_t timeout_ms = 4096;
  std::uint8_t max_cm_retries = 15;
  std::span<const std::uint8_t> private_data;  ///< at most 216 bytes
};

/// ib_cm_sidr_rep_param.
struct SidrRepParam {
  SidrStatus status = SidrStatus::kSuccess;
  std::uint32_t qp_num = 0;
  std::uint32_t qkey = 0;
  std::span<const std::uint8_t> info;          ///< at most 72 bytes
  std::span<const std::uint8_t> private_data;  ///< at most 136 bytes
};

/// The kernel's cm_ack_timeout: the local ACK timeout (IBA 12.7.34:
/// 2 * PacketLifeTime + the CA's ACK delay) in IBA time units, rounding
/// the larger term up only when the other is within 50%.
constexpr std::uint8_t cm_ack_timeout(std::uint8_t ca_ack_delay, std::uint8_t packet_life_time) {
  int ack_timeout = packet_life_time + 1;
  if (ack_timeout >= ca_ack_delay)
    ack_timeout += (ca_ack_delay >= ack_timeout - 1);
  else
    ack_timeout = ca_ack_delay + (ack_timeout >= ca_ack_delay - 1);
  return static_cast<std::uint8_t>(ack_timeout < 31 ? ack_timeout : 31);
}
static_assert(cm_ack_timeout(15, 18) == 19 && cm_ack_timeout(0, 18) == 19 &&
              cm_ack_timeout(20, 18) == 21);

class IbCm {
 public:
  IbCm(const IbCmConfig& config, MadSender& sender, RandomSource& random);
  IbCm(const IbCm&) = delete;
  IbCm& operator=(const IbCm&) = delete;

  // --- ids -----------------------------------------------------------------
  /// A new id in IDLE; `context` comes back in its events.
  std::uint32_t create_id(std::uint64_t context = 0);
  /// Destroys an id as ib_destroy_cm_id does: a connection being set up is
  /// rejected (REJ TIMEOUT from the active side, CONSUMER_DEFINED from the
  /// passive one, nothing when `err` is ENOMEM so that the peer's resend
  /// finds room later), an established one disconnected (one DREQ, then
  /// timewait), a received DREQ answered. Its queued events are dropped.
  void destroy_id(std::uint32_t id, Nanos now, int err = 0);
  bool exists(std::uint32_t id) const { return ids_.contains(id); }
  CmState state(std::uint32_t id) const;
  std::uint32_t remote_id(std::uint32_t id) const;

  /// Listens for REQs and SIDR_REQs whose ServiceID & mask equals
  /// service_id (mask 0: exact). EBUSY when another listener covers it.
  int listen(std::uint32_t id, std::uint64_t service_id, std::uint64_t mask = 0);

  // --- messages (0 or an errno value: EINVAL for a call the state forbids) ----
  int send_req(std::uint32_t id, const ReqParam& param, Nanos now);
  int send_rep(std::uint32_t id, const RepParam& param, Nanos now);
  int send_rtu(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now);
  int send_dreq(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now);
  int send_drep(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now);
  int send_rej(std::uint32_t id, RejReason reason, std::span<const std::uint8_t> ari,
               std::span<const std::uint8_t> private_data, Nanos now);
  /// `service_timeout` may carry kMraFlagDelay: the MRA is then sent only
  /// in answer to a duplicate of the REQ or REP (IB_CM_MRA_FLAG_DELAY).
  int send_mra(std::uint32_t id, std::uint8_t service_timeout,
               std::span<const std::uint8_t> private_data, Nanos now);
  int send_sidr_req(std::uint32_t id, const SidrReqParam& param, Nanos now);
  int send_sidr_rep(std::uint32_t id, const SidrRepParam& param, Nanos now);
  /// ib_cm_notify(IB_EVENT_COMM_EST): the QP received before the RTU did.
  int notify_established(std::uint32_t id, Nanos now);

  /// The QP attributes for moving the id's QP to `state` (INIT, RTR, RTS),
  /// as the kernel's ib_cm_init_qp_attr gives them; EINVAL in a state
  /// that has none.
  int init_qp_attr(std::uint32_t id, QpState state, QpAttr& attr, unsigned& mask) const;

  // --- I/O -------------------------------------------------------------------
  /// A MAD received on QP 1 (its payload), from `from`.
  void receive(wire::ConstBytes mad, const GsiAddress& from, Nanos now);
  /// Runs the resends and timewaits due at `now`.
  void on_timer(Nanos now);
  /// When on_timer() must next run, or 0 when nothing is armed.
  Nanos next_deadline() const;
  /// Takes the oldest event; false when there is none.
  bool poll_event(CmEvent& event);
  bool has_events() const { return !events_.empty(); }

  const CmCounters& counters() const { return counters_; }
  const IbCmConfig& config() const { return config_; }
  /// The port's GID table changed (an address came or went): REQs and
  /// REPs name their GIDs by the new indices.
  void set_gids(std::vector<Gid> gids) { config_.gids = std::move(gids); }

 private:
  // A message sent with a timeout: resent until cancelled or out of
  // retries (the kernel's ib_mad_send_buf with timeout_ms and retries).
  struct OutstandingSend {
    bool active = false;
    OutMad mad;
    CmAttr attr = CmAttr::kReq;
    CmState state = CmState::kIdle;  ///< the state it was sent in (msg->context[1])
    std::uint32_t timeout_ms = 0;
    std::uint8_t retries_left = 0;
    Nanos deadline = 0;
  };

  // The entries a connection holds in the remote tables (the kernel's
  // cm_timewait_info): live from REQ (passive) or REP (active) until its
  // timewait ends or it falls back to IDLE.
  struct RemoteKeys {
    std::uint32_t remote_id = 0;
    std::uint64_t remote_ca_guid = 0;
    std::uint32_t remote_qpn = 0;
    bool in_remote_id = false;
    bool in_remote_qpn = false;
  };

  struct Conn {
    std::uint32_t local_id = 0;
    std::uint32_t remote_id = 0;
    std::uint64_t context = 0;
    CmState state = CmState::kIdle;
    std::uint64_t service_id = 0;
    std::uint64_t service_mask = 0;
    std::uint64_t tid = 0;
    std::uint32_t local_qpn = 0;
    std::uint32_t remote_qpn = 0;
    QpType qp_type = QpType::kRc;
    bool qp_type_known = true;  ///< false for a REQ transport uroce does not serve (XRC)
    std::uint32_t sq_psn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t timeout_ms = 0;
    std::uint8_t path_mtu = 0;  ///< IBV_MTU code, as received or sent
    std::uint16_t pkey = wire::kDefaultPkey;
    std::uint8_t max_cm_retries = 0;
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry_count = 0;
    std::uint8_t service_timeout = 0;
    std::uint8_t target_ack_delay = 0;
    GsiAddress peer;              ///< where this connection's MADs go
    AhAttr ah;                    ///< the QP's address vector
    std::uint8_t av_timeout = 0;  ///< cm_av.timeout: the local ACK timeout, also timewait
    std::array<std::uint8_t, 224> private_data{};  ///< of the last MRA, RTU or DREP sent
    std::uint8_t private_data_len = 0;
    bool has_keys = false;  ///< `keys` belongs to this connection (not yet in timewait)
    RemoteKeys keys;
    bool in_sidr_table = false;
    OutstandingSend msg;
  };

  struct Timewait {
    RemoteKeys keys;
    Nanos expires = 0;
  };

  // ib_cm.cc and ib_cm_send.cc
  Conn* find(std::uint32_t id);
  const Conn* find(std::uint32_t id) const;
  /// cm_acquire_id: the connection `local_id` if its remote ID is `remote_id`.
  Conn* acquire(std::uint32_t local_id, std::uint32_t remote_id);
  std::uint32_t alloc_local_id();
  std::uint64_t form_tid(const Conn& c) const;
  std::uint8_t sgid_index(const Gid& gid) const;
  void arm(std::uint64_t key, Nanos deadline);
  void disarm(std::uint64_t key, Nanos deadline);
  /// Sends a MAD now; `retry` marks an answer to a duplicate (cm_tx_retries).
  void transmit(const OutMad& out, CmAttr attr, bool retry);
  /// Sends the connection's message with a timeout and its retries.
  void send_with_timeout(Conn& c, const OutMad& out, CmAttr attr, Nanos now);
  void cancel_send(Conn& c);
  void modify_send(Conn& c, std::uint32_t timeout_ms, Nanos now);
  void send_timeout(Conn& c, Nanos now);
  OutMad make_out(const GsiAddress& to, const MadHdr& hdr, const CmMessage& msg) const;
  MadHdr hdr_with_tid(std::uint64_t tid) const;
  void set_private_data(Conn& c, std::span<const std::uint8_t> data);
  void remove_keys(RemoteKeys& keys, std::uint32_t local_id);
  void enter_timewait(Conn& c, Nanos now);
  void reset_to_idle(Conn& c);
  void timewait_expired(std::uint32_t local_id);
  void queue_event(const Conn& c, CmEventType type, int status = 0);
  void queue_received(const Conn& c, CmEventType type, const Mad& mad, const GsiAddress& from,
                      std::uint32_t listen_id = 0);
  RejMsg format_rej(const Conn& c, RejReason reason, std::span<const std::uint8_t> ari,
                    std::span<const std::uint8_t> private_data) const;
  MraMsg format_mra(const Conn& c, MsgResponse what) const;
  RtuMsg format_rtu(const Conn& c) const;
  DrepMsg format_drep(const Conn& c) const;
  void erase_conn(std::uint32_t id);

  // ib_cm_recv.cc
  void req_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void dup_req_handler(Conn& existing, const GsiAddress& from);
  void mra_handler(const Mad& mad, Nanos now);
  void rej_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void rep_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void dup_rep_handler(const Mad& mad, const GsiAddress& from);
  void rtu_handler(const Mad& mad, const GsiAddress& from);
  void dreq_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void drep_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void sidr_req_handler(const Mad& mad, const GsiAddress& from, Nanos now);
  void sidr_rep_handler(const Mad& mad, const GsiAddress& from);
  /// cm_issue_rej: a REJ answering a received message no connection owns.
  void issue_rej(const Mad& received, const GsiAddress& from, RejReason reason, MsgResponse what);
  /// cm_issue_drep: a DREP for a DREQ of no connection here.
  void issue_drep(const Mad& received, const GsiAddress& from);
  Conn* find_listener(std::uint64_t service_id);
  void drop(CmDrop why) { counters_.rx_dropped.inc(why); }

  IbCmConfig config_;
  MadSender& sender_;
  RandomSource& random_;
  std::unordered_map<std::uint32_t, Conn> ids_;
  std::map<std::uint32_t, Timewait> timewaits_;  ///< by local ID, after their ids moved on
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> remote_id_table_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> remote_qpn_table_;
  std::map<std::pair<std::uint32_t, std::array<std::uint8_t, 16>>, std::uint32_t>
      remote_sidr_table_;
  std::vector<std::uint32_t> listeners_;
  std::set<std::pair<Nanos, std::uint64_t>> timers_;
  std::deque<CmEvent> events_;
  CmCounters counters_;
};

}  // namespace uroce::cm
