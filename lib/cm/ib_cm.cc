/* SPDX-License-Identifier: BSD-3-Clause */
// IbCm: ids, the messages the layer above sends, the resend and timewait
// timers, and the QP attributes. What arrives from the wire is in
// ib_cm_recv.cc.

#include "cm/ib_cm.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uroce::cm {

namespace {

constexpr std::uint64_t kSendTimer = 0;
constexpr std::uint64_t kTimewaitTimer = 1;
constexpr std::uint64_t timer_key(std::uint64_t kind, std::uint32_t id) { return kind << 32 | id; }

template <std::size_t N>
void copy_private(std::array<std::uint8_t, N>& dst, std::span<const std::uint8_t> src) {
  // An empty span may have no data pointer, which memcpy may not be given.
  if (!src.empty()) std::memcpy(dst.data(), src.data(), std::min(N, src.size()));
}

}  // namespace

IbCm::IbCm(const IbCmConfig& config, MadSender& sender, RandomSource& random)
    : config_(config), sender_(sender), random_(random) {}

// --- ids ---------------------------------------------------------------------

IbCm::Conn* IbCm::find(std::uint32_t id) {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &it->second;
}

const IbCm::Conn* IbCm::find(std::uint32_t id) const {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &it->second;
}

IbCm::Conn* IbCm::acquire(std::uint32_t local_id, std::uint32_t remote_id) {
  Conn* c = find(local_id);
  return c && c->remote_id == remote_id ? c : nullptr;
}

std::uint32_t IbCm::alloc_local_id() {
  // Never 0 (a REJ of a REQ carries LocalCommID 0), never one in use or
  // still in timewait, where the peer may yet send to it.
  for (;;) {
    const std::uint32_t id = random_.u32();
    if (id != 0 && !ids_.contains(id) && !timewaits_.contains(id)) return id;
  }
}

std::uint32_t IbCm::create_id(std::uint64_t context) {
  const std::uint32_t id = alloc_local_id();
  Conn& c = ids_[id];
  c.local_id = id;
  c.context = context;
  return id;
}

CmState IbCm::state(std::uint32_t id) const {
  const Conn* c = find(id);
  return c ? c->state : CmState::kIdle;
}

std::uint32_t IbCm::remote_id(std::uint32_t id) const {
  const Conn* c = find(id);
  return c ? c->remote_id : 0;
}

std::uint64_t IbCm::form_tid(const Conn& c) const {
  return std::uint64_t{config_.hi_tid} << 32 | c.local_id;
}

std::uint8_t IbCm::sgid_index(const Gid& gid) const {
  for (std::size_t i = 0; i < config_.gids.size(); ++i)
    if (config_.gids[i] == gid) return static_cast<std::uint8_t>(i);
  return 0;
}

int IbCm::listen(std::uint32_t id, std::uint64_t service_id, std::uint64_t mask) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kIdle) return EINVAL;
  mask = mask ? mask : ~std::uint64_t{0};
  service_id &= mask;
  for (std::uint32_t l : listeners_) {
    const Conn& other = ids_.at(l);
    if ((other.service_mask & service_id) == (mask & other.service_id)) return EBUSY;
  }
  c->service_id = service_id;
  c->service_mask = mask;
  c->state = CmState::kListen;
  listeners_.push_back(id);
  return 0;
}

IbCm::Conn* IbCm::find_listener(std::uint64_t service_id) {
  for (std::uint32_t l : listeners_) {
    Conn& c = ids_.at(l);
    if ((c.service_mask & service_id) == c.service_id) return &c;
  }
  return nullptr;
}

void IbCm::erase_conn(std::uint32_t id) {
  Conn* c = find(id);
  if (!c) return;
  cancel_send(*c);
  if (c->has_keys) remove_keys(c->keys, id);
  if (c->in_sidr_table) remote_sidr_table_.erase({c->remote_id, c->peer.remote_ip.bytes});
  std::erase(listeners_, id);
  std::erase_if(events_, [id](const CmEvent& e) { return e.id == id; });
  ids_.erase(id);
}

void IbCm::destroy_id(std::uint32_t id, Nanos now, int err) {
  Conn* c = find(id);
  if (!c) return;
  static constexpr std::array<std::uint8_t, 0> kNone{};
  switch (c->state) {
    case CmState::kSidrReqSent:
      cancel_send(*c);
      c->state = CmState::kIdle;
      break;
    case CmState::kSidrReqRcvd: {
      SidrRepParam p;
      p.status = SidrStatus::kReject;
      send_sidr_rep(id, p, now);
      break;
    }
    case CmState::kReqSent:
    case CmState::kMraReqRcvd: {
      // The active side gives up: REJ TIMEOUT with our CA GUID in the ARI,
      // by which the passive side finds its half (cm_acquire_rejected_id).
      cancel_send(*c);
      std::array<std::uint8_t, 8> guid;
      wire::store_be64(guid.data(), config_.ca_guid);
      send_rej(id, RejReason::kTimeout, guid, kNone, now);
      break;
    }
    case CmState::kReqRcvd:
      if (err == ENOMEM) {
        reset_to_idle(*c);  // no REJ: the REQ's resend may find room
        drop(CmDrop::kBacklogFull);
      } else {
        send_rej(id, RejReason::kConsumerDefined, kNone, kNone, now);
      }
      break;
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      cancel_send(*c);
      [[fallthrough]];
    case CmState::kMraReqSent:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      send_rej(id, RejReason::kConsumerDefined, kNone, kNone, now);
      break;
    case CmState::kEstablished:
      // One DREQ, then timewait without waiting for the DREP.
      send_dreq(id, kNone, now);
      cancel_send(*c);
      enter_timewait(*c, now);
      break;
    case CmState::kDreqSent:
      cancel_send(*c);
      enter_timewait(*c, now);
      break;
    case CmState::kDreqRcvd:
      send_drep(id, kNone, now);
      break;
    case CmState::kIdle:
    case CmState::kListen:
    case CmState::kTimewait:
      break;
  }
  erase_conn(id);
}

// --- sending -------------------------------------------------------------------

MadHdr IbCm::hdr_with_tid(std::uint64_t tid) const {
  MadHdr h;
  h.tid = tid;
  return h;
}

OutMad IbCm::make_out(const GsiAddress& to, const MadHdr& hdr, const CmMessage& msg) const {
  OutMad out;
  encode(hdr, msg, out.mad);
  out.to = to;
  out.to.remote_qpn = 1;  // the kernel's CM always sends to the peer's QP 1
  return out;
}

void IbCm::transmit(const OutMad& out, CmAttr attr, bool retry) {
  counters_.tx_msgs.inc(attr);
  if (retry) counters_.tx_retries.inc(attr);
  sender_.send_mad(out);
}

void IbCm::arm(std::uint64_t key, Nanos deadline) { timers_.insert({deadline, key}); }

void IbCm::disarm(std::uint64_t key, Nanos deadline) { timers_.erase({deadline, key}); }

void IbCm::send_with_timeout(Conn& c, const OutMad& out, CmAttr attr, Nanos now) {
  cancel_send(c);
  OutstandingSend& m = c.msg;
  m.active = true;
  m.mad = out;
  m.attr = attr;
  m.state = c.state;
  m.timeout_ms = c.timeout_ms;
  m.retries_left = c.max_cm_retries;
  m.deadline = now + Nanos{c.timeout_ms} * kNanosPerMs;
  arm(timer_key(kSendTimer, c.local_id), m.deadline);
  transmit(out, attr, false);
}

void IbCm::cancel_send(Conn& c) {
  if (!c.msg.active) return;
  disarm(timer_key(kSendTimer, c.local_id), c.msg.deadline);
  c.msg.active = false;
}

void IbCm::modify_send(Conn& c, std::uint32_t timeout_ms, Nanos now) {
  // ib_modify_mad: the wait restarts with the new timeout, which the
  // remaining resends keep.
  disarm(timer_key(kSendTimer, c.local_id), c.msg.deadline);
  c.msg.timeout_ms = timeout_ms;
  c.msg.deadline = now + Nanos{timeout_ms} * kNanosPerMs;
  arm(timer_key(kSendTimer, c.local_id), c.msg.deadline);
}

void IbCm::send_timeout(Conn& c, Nanos now) {
  OutstandingSend& m = c.msg;
  if (m.retries_left > 0) {
    --m.retries_left;
    m.deadline = now + Nanos{m.timeout_ms} * kNanosPerMs;
    arm(timer_key(kSendTimer, c.local_id), m.deadline);
    transmit(m.mad, m.attr, true);
    return;
  }
  m.active = false;
  // cm_process_send_error: only the message of the state the connection is
  // still in fails it.
  if (m.state != c.state) return;
  constexpr int kTimedOut = -ETIMEDOUT;
  switch (c.state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
      reset_to_idle(c);
      queue_event(c, CmEventType::kReqError, kTimedOut);
      break;
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      reset_to_idle(c);
      queue_event(c, CmEventType::kRepError, kTimedOut);
      break;
    case CmState::kDreqSent:
      enter_timewait(c, now);
      queue_event(c, CmEventType::kDreqError, kTimedOut);
      break;
    case CmState::kSidrReqSent:
      c.state = CmState::kIdle;
      queue_event(c, CmEventType::kSidrReqError, kTimedOut);
      break;
    default:
      break;
  }
}

void IbCm::set_private_data(Conn& c, std::span<const std::uint8_t> data) {
  c.private_data.fill(0);
  const std::size_t n = std::min(c.private_data.size(), data.size());
  if (n) std::memcpy(c.private_data.data(), data.data(), n);
  c.private_data_len = static_cast<std::uint8_t>(n);
}

// --- timewait --------------------------------------------------------------------

void IbCm::remove_keys(RemoteKeys& keys, std::uint32_t local_id) {
  if (keys.in_remote_id) {
    auto it = remote_id_table_.find({keys.remote_id, keys.remote_ca_guid});
    if (it != remote_id_table_.end() && it->second == local_id) remote_id_table_.erase(it);
    keys.in_remote_id = false;
  }
  if (keys.in_remote_qpn) {
    auto it = remote_qpn_table_.find({keys.remote_qpn, keys.remote_ca_guid});
    if (it != remote_qpn_table_.end() && it->second == local_id) remote_qpn_table_.erase(it);
    keys.in_remote_qpn = false;
  }
}

void IbCm::enter_timewait(Conn& c, Nanos now) {
  // Timewait: the connection's QPN and remote IDs stay reserved for a
  // while, so that stray packets and MADs of the old connection are not
  // taken for a new one. The entries stay in the remote tables through
  // the wait: a REQ from the same remote QPN and CA GUID meanwhile is a
  // stale connection (REJ STALE_CONN), a late duplicate REQ is answered
  // as one. (The kernel's cm_enter_timewait takes them out at entry; uroce keeps
  // the rule its own cm_dup_req_handler still expects, a TIMEWAIT case.)
  Timewait& tw = timewaits_[c.local_id];
  if (tw.expires) disarm(timer_key(kTimewaitTimer, c.local_id), tw.expires);
  if (c.has_keys) {
    tw.keys = c.keys;
    c.has_keys = false;
    c.keys = {};
  }
  // cm_enter_timewait waits cm_convert_to_ms(av.timeout): the local ACK
  // timeout, the time a packet of the connection may still be in flight.
  tw.expires = now + Nanos{iba_time_ms(c.av_timeout)} * kNanosPerMs;
  arm(timer_key(kTimewaitTimer, c.local_id), tw.expires);
  c.state = CmState::kTimewait;
}

void IbCm::reset_to_idle(Conn& c) {
  c.state = CmState::kIdle;
  if (c.has_keys) {
    remove_keys(c.keys, c.local_id);
    c.has_keys = false;
    c.keys = {};
  }
}

void IbCm::timewait_expired(std::uint32_t local_id) {
  auto it = timewaits_.find(local_id);
  if (it == timewaits_.end()) return;
  remove_keys(it->second.keys, local_id);
  timewaits_.erase(it);
  Conn* c = find(local_id);
  if (!c || c->state != CmState::kTimewait) return;
  c->state = CmState::kIdle;
  queue_event(*c, CmEventType::kTimewaitExit);
}

// --- timers ------------------------------------------------------------------------

void IbCm::on_timer(Nanos now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const std::uint64_t key = timers_.begin()->second;
    timers_.erase(timers_.begin());
    const auto id = static_cast<std::uint32_t>(key);
    if (key >> 32 == kTimewaitTimer) {
      timewait_expired(id);
    } else if (Conn* c = find(id); c && c->msg.active) {
      send_timeout(*c, now);
    }
  }
}

Nanos IbCm::next_deadline() const { return timers_.empty() ? 0 : timers_.begin()->first; }

bool IbCm::poll_event(CmEvent& event) {
  if (events_.empty()) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void IbCm::queue_event(const Conn& c, CmEventType type, int status) {
  CmEvent e;
  e.type = type;
  e.id = c.local_id;
  e.context = c.context;
  e.status = status;
  e.from = c.peer;
  events_.push_back(std::move(e));
}

void IbCm::queue_received(const Conn& c, CmEventType type, const Mad& mad, const GsiAddress& from,
                          std::uint32_t listen_id) {
  CmEvent e;
  e.type = type;
  e.id = c.local_id;
  e.listen_id = listen_id;
  e.context = c.context;
  e.from = from;
  e.mad = mad;
  events_.push_back(std::move(e));
}

// --- messages ------------------------------------------------------------------------

int IbCm::send_req(std::uint32_t id, const ReqParam& p, Nanos now) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kIdle) return EINVAL;
  if (p.private_data.size() > ReqMsg{}.private_data.size()) return EINVAL;
  if (p.qp_type != QpType::kRc && p.qp_type != QpType::kUc) return EINVAL;
  const PathRecord& path = p.path;

  c->peer = {};
  c->peer.local_ip = path.sgid;
  c->peer.remote_ip = path.dgid;
  c->peer.remote_mac = path.dmac;
  c->peer.pkey = path.pkey;
  c->peer.traffic_class = path.traffic_class;
  c->peer.hop_limit = path.hop_limit;
  c->peer.flow_label = path.flow_label;
  c->ah = {};
  c->ah.grh.dgid = path.dgid;
  c->ah.grh.flow_label = path.flow_label;
  c->ah.grh.sgid_index = sgid_index(path.sgid);
  c->ah.grh.hop_limit = path.hop_limit;
  c->ah.grh.traffic_class = path.traffic_class;
  c->ah.sl = path.sl;
  c->ah.static_rate = path.rate;
  c->ah.port_num = config_.port_num;
  c->ah.dmac = path.dmac;
  c->av_timeout = static_cast<std::uint8_t>(path.packet_life_time + 1);  // cm_init_av_by_path

  c->remote_id = 0;
  c->service_id = p.service_id;
  c->service_mask = ~std::uint64_t{0};
  // The REQ waits a round trip plus the time the peer says it needs.
  c->timeout_ms =
      iba_time_ms(path.packet_life_time) * 2 + iba_time_ms(p.remote_cm_response_timeout);
  c->max_cm_retries = p.max_cm_retries;
  c->initiator_depth = p.initiator_depth;
  c->responder_resources = p.responder_resources;
  c->retry_count = p.retry_count;
  c->rnr_retry_count = 0;  // from the REP
  c->path_mtu = static_cast<std::uint8_t>(path.mtu);
  c->pkey = path.pkey;
  c->qp_type = p.qp_type;
  c->qp_type_known = true;
  c->local_qpn = p.qp_num & 0xFFFFFF;
  c->rq_psn = p.starting_psn & 0xFFFFFF;
  c->tid = form_tid(*c);
  c->has_keys = true;
  c->keys = {};

  ReqMsg r;
  r.local_comm_id = c->local_id;
  r.service_id = p.service_id;
  r.local_ca_guid = config_.ca_guid;
  r.local_qpn = c->local_qpn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.remote_cm_response_timeout = p.remote_cm_response_timeout;
  r.transport_type = p.qp_type == QpType::kUc ? TransportType::kUc : TransportType::kRc;
  r.end_to_end_flow_control = p.flow_control;
  r.starting_psn = c->rq_psn;
  r.local_cm_response_timeout = p.local_cm_response_timeout;
  r.retry_count = p.retry_count;
  r.pkey = path.pkey;
  r.path_mtu = c->path_mtu;
  r.rnr_retry_count = p.rnr_retry_count;
  r.max_cm_retries = p.max_cm_retries;
  r.srq = p.srq;
  // RoCE has no LIDs: the kernel sends the permissive LID when the path
  // leaves the subnet (hop limit > 1), as it always does over RoCEv2.
  const bool routed = path.hop_limit > 1;
  r.primary.local_lid = routed ? 0xFFFF : 0;
  r.primary.remote_lid = routed ? 0xFFFF : 0;
  r.primary.local_gid = path.sgid;
  r.primary.remote_gid = path.dgid;
  r.primary.flow_label = path.flow_label & 0xFFFFF;
  r.primary.packet_rate = path.rate;
  r.primary.traffic_class = path.traffic_class;
  r.primary.hop_limit = path.hop_limit;
  r.primary.sl = path.sl;
  r.primary.subnet_local = !routed;
  r.primary.local_ack_timeout = cm_ack_timeout(config_.ca_ack_delay, path.packet_life_time);
  copy_private(r.private_data, p.private_data);

  c->state = CmState::kReqSent;
  send_with_timeout(*c, make_out(c->peer, hdr_with_tid(c->tid), r), CmAttr::kReq, now);
  return 0;
}

int IbCm::send_rep(std::uint32_t id, const RepParam& p, Nanos now) {
  Conn* c = find(id);
  if (!c || (c->state != CmState::kReqRcvd && c->state != CmState::kMraReqSent)) return EINVAL;
  if (p.private_data.size() > RepMsg{}.private_data.size()) return EINVAL;
  RepMsg r;
  r.local_comm_id = c->local_id;
  r.remote_comm_id = c->remote_id;
  r.local_qpn = p.qp_num & 0xFFFFFF;
  r.starting_psn = p.starting_psn & 0xFFFFFF;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.target_ack_delay = config_.ca_ack_delay;
  r.failover_accepted = p.failover_accepted;
  r.end_to_end_flow_control = p.flow_control;
  r.rnr_retry_count = p.rnr_retry_count;
  r.srq = p.srq;
  r.local_ca_guid = config_.ca_guid;
  copy_private(r.private_data, p.private_data);

  c->state = CmState::kRepSent;
  c->initiator_depth = p.initiator_depth;
  c->responder_resources = p.responder_resources;
  c->rq_psn = r.starting_psn;
  c->local_qpn = r.local_qpn;
  send_with_timeout(*c, make_out(c->peer, hdr_with_tid(c->tid), r), CmAttr::kRep, now);
  return 0;
}

RtuMsg IbCm::format_rtu(const Conn& c) const {
  RtuMsg r;
  r.local_comm_id = c.local_id;
  r.remote_comm_id = c.remote_id;
  std::memcpy(r.private_data.data(), c.private_data.data(), c.private_data_len);
  return r;
}

int IbCm::send_rtu(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos) {
  Conn* c = find(id);
  if (!c || (c->state != CmState::kRepRcvd && c->state != CmState::kMraRepSent)) return EINVAL;
  if (private_data.size() > RtuMsg{}.private_data.size()) return EINVAL;
  set_private_data(*c, private_data);
  c->state = CmState::kEstablished;
  transmit(make_out(c->peer, hdr_with_tid(c->tid), format_rtu(*c)), CmAttr::kRtu, false);
  return 0;
}

int IbCm::send_dreq(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kEstablished) return EINVAL;
  if (private_data.size() > DreqMsg{}.private_data.size()) return EINVAL;
  DreqMsg d;
  d.local_comm_id = c->local_id;
  d.remote_comm_id = c->remote_id;
  d.remote_qpn = c->remote_qpn;
  copy_private(d.private_data, private_data);
  c->state = CmState::kDreqSent;
  send_with_timeout(*c, make_out(c->peer, hdr_with_tid(form_tid(*c)), d), CmAttr::kDreq, now);
  return 0;
}

DrepMsg IbCm::format_drep(const Conn& c) const {
  DrepMsg d;
  d.local_comm_id = c.local_id;
  d.remote_comm_id = c.remote_id;
  std::memcpy(d.private_data.data(), c.private_data.data(), c.private_data_len);
  return d;
}

int IbCm::send_drep(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kDreqRcvd) return EINVAL;
  if (private_data.size() > DrepMsg{}.private_data.size()) return EINVAL;
  set_private_data(*c, private_data);
  enter_timewait(*c, now);
  transmit(make_out(c->peer, hdr_with_tid(c->tid), format_drep(*c)), CmAttr::kDrep, false);
  return 0;
}

RejMsg IbCm::format_rej(const Conn& c, RejReason reason, std::span<const std::uint8_t> ari,
                        std::span<const std::uint8_t> private_data) const {
  // cm_format_rej: a REQ not yet answered is rejected with LocalCommID 0.
  RejMsg r;
  r.remote_comm_id = c.remote_id;
  switch (c.state) {
    case CmState::kReqRcvd:
      r.local_comm_id = 0;
      r.message_rejected = MsgResponse::kReq;
      break;
    case CmState::kMraReqSent:
      r.local_comm_id = c.local_id;
      r.message_rejected = MsgResponse::kReq;
      break;
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      r.local_comm_id = c.local_id;
      r.message_rejected = MsgResponse::kRep;
      break;
    default:
      r.local_comm_id = c.local_id;
      r.message_rejected = MsgResponse::kOther;
      break;
  }
  r.reason = static_cast<std::uint16_t>(reason);
  const std::size_t ari_len = std::min(ari.size(), r.ari.size());
  r.reject_info_length = static_cast<std::uint8_t>(ari_len);
  if (ari_len) std::memcpy(r.ari.data(), ari.data(), ari_len);
  copy_private(r.private_data, private_data);
  return r;
}

int IbCm::send_rej(std::uint32_t id, RejReason reason, std::span<const std::uint8_t> ari,
                   std::span<const std::uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c) return EINVAL;
  if (private_data.size() > RejMsg{}.private_data.size() || ari.size() > RejMsg{}.ari.size())
    return EINVAL;
  RejMsg r;
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      r = format_rej(*c, reason, ari, private_data);
      // The REQ this side may still be resending answers nothing now.
      cancel_send(*c);
      reset_to_idle(*c);
      break;
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      r = format_rej(*c, reason, ari, private_data);
      cancel_send(*c);
      enter_timewait(*c, now);
      break;
    default:
      return EINVAL;
  }
  transmit(make_out(c->peer, hdr_with_tid(c->tid), r), CmAttr::kRej, false);
  return 0;
}

MraMsg IbCm::format_mra(const Conn& c, MsgResponse what) const {
  MraMsg m;
  m.local_comm_id = c.local_id;
  m.remote_comm_id = c.remote_id;
  m.message_mraed = what;
  m.service_timeout = c.service_timeout & 0x1F;
  std::memcpy(m.private_data.data(), c.private_data.data(),
              std::min<std::size_t>(c.private_data_len, m.private_data.size()));
  return m;
}

int IbCm::send_mra(std::uint32_t id, std::uint8_t service_timeout,
                   std::span<const std::uint8_t> private_data, Nanos) {
  Conn* c = find(id);
  if (!c) return EINVAL;
  if (private_data.size() > MraMsg{}.private_data.size()) return EINVAL;
  MsgResponse what;
  switch (c->state) {
    case CmState::kReqRcvd:
      c->state = CmState::kMraReqSent;
      what = MsgResponse::kReq;
      break;
    case CmState::kRepRcvd:
      c->state = CmState::kMraRepSent;
      what = MsgResponse::kRep;
      break;
    default:
      return EINVAL;
  }
  c->service_timeout = service_timeout;
  set_private_data(*c, private_data);
  if (!(service_timeout & kMraFlagDelay))
    transmit(make_out(c->peer, hdr_with_tid(c->tid), format_mra(*c, what)), CmAttr::kMra, false);
  return 0;
}

int IbCm::send_sidr_req(std::uint32_t id, const SidrReqParam& p, Nanos now) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kIdle) return EINVAL;
  if (p.private_data.size() > SidrReqMsg{}.private_data.size()) return EINVAL;
  c->peer = {};
  c->peer.local_ip = p.path.sgid;
  c->peer.remote_ip = p.path.dgid;
  c->peer.remote_mac = p.path.dmac;
  c->peer.pkey = p.path.pkey;
  c->peer.traffic_class = p.path.traffic_class;
  c->peer.hop_limit = p.path.hop_limit;
  c->peer.flow_label = p.path.flow_label;
  c->av_timeout = static_cast<std::uint8_t>(p.path.packet_life_time + 1);
  c->remote_id = 0;
  c->service_id = p.service_id;
  c->service_mask = ~std::uint64_t{0};
  c->timeout_ms = p.timeout_ms;
  c->max_cm_retries = p.max_cm_retries;
  c->tid = form_tid(*c);

  SidrReqMsg r;
  r.request_id = c->local_id;
  r.pkey = p.path.pkey;
  r.service_id = p.service_id;
  copy_private(r.private_data, p.private_data);
  c->state = CmState::kSidrReqSent;
  send_with_timeout(*c, make_out(c->peer, hdr_with_tid(c->tid), r), CmAttr::kSidrReq, now);
  return 0;
}

int IbCm::send_sidr_rep(std::uint32_t id, const SidrRepParam& p, Nanos) {
  Conn* c = find(id);
  if (!c || c->state != CmState::kSidrReqRcvd) return EINVAL;
  if (p.info.size() > SidrRepMsg{}.add_info.size() ||
      p.private_data.size() > SidrRepMsg{}.private_data.size())
    return EINVAL;
  SidrRepMsg r;
  r.request_id = c->remote_id;
  r.status = static_cast<std::uint8_t>(p.status);
  r.qpn = p.qp_num & 0xFFFFFF;
  r.service_id = c->service_id;
  r.qkey = p.qkey;
  r.add_info_length = static_cast<std::uint8_t>(p.info.size());
  copy_private(r.add_info, p.info);
  copy_private(r.private_data, p.private_data);
  c->state = CmState::kIdle;
  if (c->in_sidr_table) {
    remote_sidr_table_.erase({c->remote_id, c->peer.remote_ip.bytes});
    c->in_sidr_table = false;
  }
  transmit(make_out(c->peer, hdr_with_tid(c->tid), r), CmAttr::kSidrRep, false);
  return 0;
}

int IbCm::notify_established(std::uint32_t id, Nanos) {
  Conn* c = find(id);
  if (!c) return EINVAL;
  switch (c->state) {
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      c->state = CmState::kEstablished;
      cancel_send(*c);
      queue_event(*c, CmEventType::kUserEstablished);
      return 0;
    case CmState::kEstablished:
      return EISCONN;
    default:
      return EINVAL;
  }
}

// --- QP attributes ----------------------------------------------------------------

int IbCm::init_qp_attr(std::uint32_t id, QpState state, QpAttr& attr, unsigned& mask) const {
  const Conn* c = find(id);
  if (!c) return EINVAL;
  using namespace qp_attr_mask;
  const CmState s = c->state;
  const bool after_req = s == CmState::kReqRcvd || s == CmState::kMraReqSent ||
                         s == CmState::kRepRcvd || s == CmState::kMraRepSent ||
                         s == CmState::kRepSent || s == CmState::kMraRepRcvd ||
                         s == CmState::kEstablished;
  attr.qp_state = state;
  switch (state) {
    case QpState::kInit:
      // cm_init_qp_init_attr: READ and ATOMIC only when the peer may send them.
      if (!after_req && s != CmState::kReqSent && s != CmState::kMraReqRcvd) return EINVAL;
      mask = kState | kAccessFlags | kPkeyIndex | kPort;
      attr.qp_access_flags = qp_access::kRemoteWrite;
      if (c->responder_resources)
        attr.qp_access_flags |= qp_access::kRemoteRead | qp_access::kRemoteAtomic;
      attr.pkey_index = 0;  // 0xFFFF, the only P_Key of a RoCE port
      attr.port_num = config_.port_num;
      return 0;
    case QpState::kRtr:
      if (!after_req) return EINVAL;
      mask = kState | kAv | kPathMtu | kDestQpn | kRqPsn;
      attr.ah_attr = c->ah;
      attr.path_mtu = wire::mtu_from_code(c->path_mtu).value_or(wire::Mtu::k256);
      attr.dest_qp_num = c->remote_qpn;
      attr.rq_psn = c->rq_psn;
      if (c->qp_type == QpType::kRc) {
        mask |= kMaxDestRdAtomic | kMinRnrTimer;
        attr.max_dest_rd_atomic = c->responder_resources;
        attr.min_rnr_timer = 0;
      }
      return 0;
    case QpState::kRts:
      if (!after_req) return EINVAL;
      mask = kState | kSqPsn;
      attr.sq_psn = c->sq_psn;
      if (c->qp_type == QpType::kRc) {
        mask |= kRetryCnt | kRnrRetry | kMaxQpRdAtomic | kTimeout;
        attr.retry_cnt = c->retry_count;
        attr.rnr_retry = c->rnr_retry_count;
        attr.max_rd_atomic = c->initiator_depth;
        attr.timeout = c->av_timeout;
      }
      return 0;
    default:
      return EINVAL;
  }
}

}  // namespace uroce::cm
