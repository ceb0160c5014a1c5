/* SPDX-License-Identifier: BSD-3-Clause */
// IbCm: ids, the resends of a message sent with a timeout, timewait,
// events and the QP attributes. What the layer above sends is in
// ib_cm_send.cc, what arrives from the wire in ib_cm_recv.cc.

#include "cm/ib_cm.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uroce::cm {

namespace {

constexpr std::uint64_t kSendTimer = 0;
constexpr std::uint64_t kTimewaitTimer = 1;
constexpr std::uint64_t timer_key(std::uint64_t kind, std::uint32_t id) { return kind << 32 | id; }

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
  // An empty entry of the table (the zero GID) is nobody's.
  for (std::size_t i = 0; gid != Gid{} && i < config_.gids.size(); ++i)
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
