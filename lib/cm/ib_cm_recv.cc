/* SPDX-License-Identifier: BSD-3-Clause */
// IbCm: what arrives on QP 1. One handler per message, each as cm.c's
// cm_*_handler decides: find the connection the message names, check
// that its state takes the message, move it on, report it. A message that
// names no connection or comes in a state that takes none is dropped and
// counted; none of them changes a connection it does not name.

#include <cerrno>
#include <cstring>

#include "cm/ib_cm.h"

namespace uroce::cm {

namespace {

constexpr std::uint32_t kQpnMask = 0xFFFFFF;

// rxe's pkey check: a default P_Key, full (0xFFFF) or limited (0x7FFF)
// member; RoCE ports have no other.
constexpr bool default_pkey(std::uint16_t pkey) { return (pkey & 0x7FFF) == 0x7FFF; }

}  // namespace

void IbCm::receive(wire::ConstBytes bytes, const GsiAddress& from, Nanos now) {
  if (!default_pkey(from.pkey)) {
    drop(CmDrop::kBadPkey);
    return;
  }
  Mad mad;
  MadError error{};
  if (!decode(bytes, mad, error)) {
    // cm_recv_handler counts LAP and APR as received before their
    // handlers refuse them on RoCE.
    if (error == MadError::kAlternatePath)
      counters_.rx_msgs.inc(cm_attr(static_cast<AttrId>(mad.hdr.attr_id)));
    counters_.rx_malformed.inc(error);
    return;
  }
  counters_.rx_msgs.inc(cm_attr(attr_id_of(mad.msg)));
  switch (attr_id_of(mad.msg)) {
    case AttrId::kReq:
      req_handler(mad, from, now);
      break;
    case AttrId::kMra:
      mra_handler(mad, now);
      break;
    case AttrId::kRej:
      rej_handler(mad, from, now);
      break;
    case AttrId::kRep:
      rep_handler(mad, from, now);
      break;
    case AttrId::kRtu:
      rtu_handler(mad, from);
      break;
    case AttrId::kDreq:
      dreq_handler(mad, from, now);
      break;
    case AttrId::kDrep:
      drep_handler(mad, from, now);
      break;
    case AttrId::kSidrReq:
      sidr_req_handler(mad, from, now);
      break;
    case AttrId::kSidrRep:
      sidr_rep_handler(mad, from);
      break;
    default:
      break;
  }
}

void IbCm::issue_rej(const Mad& received, const GsiAddress& from, RejReason reason,
                     MsgResponse what) {
  // The REJ takes the received message's IDs the other way round; for a
  // REQ, which has no RemoteCommID, its LocalCommID is 0.
  std::uint32_t their_local = 0;
  std::uint32_t their_remote = 0;
  if (const auto* r = std::get_if<ReqMsg>(&received.msg)) {
    their_local = r->local_comm_id;
  } else if (const auto* p = std::get_if<RepMsg>(&received.msg)) {
    their_local = p->local_comm_id;
    their_remote = p->remote_comm_id;
  }
  RejMsg rej;
  rej.local_comm_id = their_remote;
  rej.remote_comm_id = their_local;
  rej.message_rejected = what;
  rej.reason = static_cast<std::uint16_t>(reason);
  transmit(make_out(from, hdr_with_tid(received.hdr.tid), rej), CmAttr::kRej, false);
}

void IbCm::issue_drep(const Mad& received, const GsiAddress& from) {
  const auto& dreq = std::get<DreqMsg>(received.msg);
  DrepMsg d;
  d.local_comm_id = dreq.remote_comm_id;
  d.remote_comm_id = dreq.local_comm_id;
  transmit(make_out(from, hdr_with_tid(received.hdr.tid), d), CmAttr::kDrep, true);
}

// --- REQ ---------------------------------------------------------------------------

void IbCm::dup_req_handler(Conn& existing, const GsiAddress& from) {
  counters_.rx_duplicates.inc(CmAttr::kReq);
  // cm_dup_req_handler: still deciding (REQ_RCVD), say nothing; having
  // delayed an MRA, send it now. In timewait cm.c answers REJ STALE_CONN;
  // but a REQ with this connection's remote comm ID and CA GUID is a late
  // copy of the REQ that set it up (a peer does not reuse a comm ID that
  // soon), and that REJ, naming both comm IDs, would reach the peer's
  // connection in whatever state it is: one still disconnecting would
  // report REJECTED instead of DISCONNECTED. uroce drops the copy. A REQ
  // of a new connection from the same QP still gets STALE_CONN (the
  // remote QPN check in req_handler).
  if (existing.state == CmState::kMraReqSent)
    transmit(make_out(from, hdr_with_tid(existing.tid), format_mra(existing, MsgResponse::kReq)),
             CmAttr::kMra, true);
}

void IbCm::req_handler(const Mad& mad, const GsiAddress& from, Nanos now) {
  const auto& req = std::get<ReqMsg>(mad.msg);
  const std::pair remote_id_key{req.local_comm_id, req.local_ca_guid};
  const std::pair remote_qpn_key{req.local_qpn, req.local_ca_guid};

  // A duplicate: the REQ of a connection this side already has, or had
  // and still holds in timewait.
  if (auto it = remote_id_table_.find(remote_id_key); it != remote_id_table_.end()) {
    if (Conn* c = acquire(it->second, req.local_comm_id))
      dup_req_handler(*c, from);
    else
      counters_.rx_duplicates.inc(CmAttr::kReq);
    return;
  }
  // A stale connection: the peer's QP is already connected here (or in
  // timewait) under another comm ID; it must have lost that connection.
  // Reject the REQ, and disconnect the old one if it is still up.
  if (auto it = remote_qpn_table_.find(remote_qpn_key); it != remote_qpn_table_.end()) {
    issue_rej(mad, from, RejReason::kStaleConn, MsgResponse::kReq);
    if (find(it->second) && find(it->second)->state == CmState::kEstablished) {
      static constexpr std::array<std::uint8_t, 0> kNone{};
      send_dreq(it->second, kNone, now);
    }
    return;
  }
  Conn* listener = find_listener(req.service_id);
  if (!listener) {
    issue_rej(mad, from, RejReason::kInvalidServiceId, MsgResponse::kReq);
    return;
  }
  const std::uint32_t listen_id = listener->local_id;
  const std::uint64_t context = listener->context;
  const std::uint32_t id = create_id(context);
  Conn& c = ids_.at(id);
  c.remote_id = req.local_comm_id;
  c.service_id = req.service_id;
  c.service_mask = ~std::uint64_t{0};
  c.tid = mad.hdr.tid;
  // Our answers wait as long as the active side says it needs to respond.
  c.timeout_ms = iba_time_ms(req.local_cm_response_timeout);
  c.max_cm_retries = req.max_cm_retries;
  c.remote_qpn = req.local_qpn;
  // What the active side initiates is what we respond to, and back.
  c.initiator_depth = req.responder_resources;
  c.responder_resources = req.initiator_depth;
  c.path_mtu = req.path_mtu;
  c.pkey = req.pkey;
  c.sq_psn = req.starting_psn;
  c.retry_count = req.retry_count;
  c.rnr_retry_count = req.rnr_retry_count;
  switch (req.transport_type) {
    case TransportType::kRc:
      c.qp_type = QpType::kRc;
      break;
    case TransportType::kUc:
      c.qp_type = QpType::kUc;
      break;
    default:  // XRC (extended type 1) and reserved: no QP type uroce serves
      c.qp_type_known = false;
      break;
  }
  // Answers go back where the REQ came from, on the REQ's primary path.
  c.peer = from;
  c.peer.remote_qpn = 1;
  c.peer.traffic_class = req.primary.traffic_class;
  c.peer.hop_limit = req.primary.hop_limit;
  c.peer.flow_label = req.primary.flow_label;
  c.ah = {};
  c.ah.grh.dgid = req.primary.local_gid;
  c.ah.grh.flow_label = req.primary.flow_label;
  c.ah.grh.sgid_index = sgid_index(from.local_ip);
  c.ah.grh.hop_limit = req.primary.hop_limit;
  c.ah.grh.traffic_class = req.primary.traffic_class;
  c.ah.sl = req.primary.sl;
  c.ah.static_rate = req.primary.packet_rate;
  c.ah.port_num = config_.port_num;
  c.ah.dmac = from.remote_mac;
  // cm_format_paths_from_req takes PacketLifeTime as LocalACKTimeout - 1;
  // cm_init_av_by_path adds the 1 back.
  c.av_timeout = req.primary.local_ack_timeout ? req.primary.local_ack_timeout : 1;
  c.has_keys = true;
  c.keys = {req.local_comm_id, req.local_ca_guid, req.local_qpn, true, true};
  remote_id_table_[remote_id_key] = id;
  remote_qpn_table_[remote_qpn_key] = id;
  c.state = CmState::kReqRcvd;

  // The path MTU codes are 1 (256) to 5 (4096), enum ibv_mtu's.
  if (!wire::mtu_from_code(req.path_mtu)) {
    static constexpr std::array<std::uint8_t, 0> kNone{};
    send_rej(id, RejReason::kInvalidMtu, kNone, kNone, now);
    erase_conn(id);
    return;
  }
  queue_received(c, CmEventType::kReqReceived, mad, from, listen_id);
}

// --- MRA, REJ ----------------------------------------------------------------------

void IbCm::mra_handler(const Mad& mad, Nanos now) {
  const auto& mra = std::get<MraMsg>(mad.msg);
  // cm_acquire_mraed_id: an MRA of our REQ reaches us before we know the
  // peer's comm ID.
  Conn* c = mra.message_mraed == MsgResponse::kReq ? acquire(mra.remote_comm_id, 0)
                                                   : acquire(mra.remote_comm_id, mra.local_comm_id);
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  // The peer needs ServiceTimeout more, on top of a packet's lifetime.
  const std::uint32_t timeout = iba_time_ms(mra.service_timeout) + iba_time_ms(c->av_timeout);
  switch (c->state) {
    case CmState::kReqSent:
      if (mra.message_mraed != MsgResponse::kReq || !c->msg.active) {
        drop(CmDrop::kWrongState);
        return;
      }
      modify_send(*c, timeout, now);
      c->state = CmState::kMraReqRcvd;
      break;
    case CmState::kRepSent:
      if (mra.message_mraed != MsgResponse::kRep || !c->msg.active) {
        drop(CmDrop::kWrongState);
        return;
      }
      modify_send(*c, timeout, now);
      c->state = CmState::kMraRepRcvd;
      break;
    case CmState::kMraReqRcvd:
    case CmState::kMraRepRcvd:
      counters_.rx_duplicates.inc(CmAttr::kMra);
      return;
    default:
      drop(CmDrop::kWrongState);
      return;
  }
  c->msg.state = c->state;
  queue_received(*c, CmEventType::kMraReceived, mad, c->peer);
}

void IbCm::rej_handler(const Mad& mad, const GsiAddress& from, Nanos now) {
  const auto& rej = std::get<RejMsg>(mad.msg);
  // cm_acquire_rejected_id: a REJ TIMEOUT from an active side that gave up
  // names it by its own comm ID and CA GUID (in the ARI); a REJ of our REQ
  // reaches us before we know the peer's ID.
  Conn* c = nullptr;
  if (rej.reason == static_cast<std::uint16_t>(RejReason::kTimeout)) {
    const std::uint64_t guid = rej.reject_info_length >= 8 ? wire::load_be64(rej.ari.data()) : 0;
    if (auto it = remote_id_table_.find({rej.local_comm_id, guid}); it != remote_id_table_.end())
      c = acquire(it->second, rej.local_comm_id);
  } else if (rej.message_rejected == MsgResponse::kReq) {
    c = acquire(rej.remote_comm_id, 0);
  } else {
    c = acquire(rej.remote_comm_id, rej.local_comm_id);
  }
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      cancel_send(*c);
      [[fallthrough]];
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      if (rej.reason == static_cast<std::uint16_t>(RejReason::kStaleConn))
        enter_timewait(*c, now);
      else
        reset_to_idle(*c);
      break;
    case CmState::kDreqSent:
      cancel_send(*c);
      [[fallthrough]];
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kEstablished:
      enter_timewait(*c, now);
      break;
    default:
      drop(CmDrop::kWrongState);
      return;
  }
  queue_received(*c, CmEventType::kRejReceived, mad, from);
}

// --- REP, RTU ------------------------------------------------------------------------

void IbCm::dup_rep_handler(const Mad& mad, const GsiAddress& from) {
  const auto& rep = std::get<RepMsg>(mad.msg);
  Conn* c = acquire(rep.remote_comm_id, rep.local_comm_id);
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  counters_.rx_duplicates.inc(CmAttr::kRep);
  // cm_dup_rep_handler: our RTU was lost, so send it again; or the MRA we
  // delayed.
  if (c->state == CmState::kEstablished)
    transmit(make_out(from, hdr_with_tid(c->tid), format_rtu(*c)), CmAttr::kRtu, true);
  else if (c->state == CmState::kMraRepSent)
    transmit(make_out(from, hdr_with_tid(c->tid), format_mra(*c, MsgResponse::kRep)), CmAttr::kMra,
             true);
}

void IbCm::rep_handler(const Mad& mad, const GsiAddress& from, Nanos now) {
  const auto& rep = std::get<RepMsg>(mad.msg);
  Conn* c = acquire(rep.remote_comm_id, 0);
  if (!c) {
    dup_rep_handler(mad, from);
    return;
  }
  if (c->state != CmState::kReqSent && c->state != CmState::kMraReqRcvd) {
    drop(CmDrop::kWrongState);
    return;
  }
  const std::pair remote_id_key{rep.local_comm_id, rep.local_ca_guid};
  const std::pair remote_qpn_key{rep.local_qpn, rep.local_ca_guid};
  if (remote_id_table_.contains(remote_id_key)) {
    // That peer connection already belongs to another of ours.
    drop(CmDrop::kRemoteIdInUse);
    return;
  }
  if (auto it = remote_qpn_table_.find(remote_qpn_key); it != remote_qpn_table_.end()) {
    issue_rej(mad, from, RejReason::kStaleConn, MsgResponse::kRep);
    if (find(it->second) && find(it->second)->state == CmState::kEstablished) {
      static constexpr std::array<std::uint8_t, 0> kNone{};
      send_dreq(it->second, kNone, now);
    }
    return;
  }
  c->keys = {rep.local_comm_id, rep.local_ca_guid, rep.local_qpn, true, true};
  c->has_keys = true;
  remote_id_table_[remote_id_key] = c->local_id;
  remote_qpn_table_[remote_qpn_key] = c->local_id;

  c->state = CmState::kRepRcvd;
  c->remote_id = rep.local_comm_id;
  c->remote_qpn = rep.local_qpn & kQpnMask;
  c->initiator_depth = rep.responder_resources;
  c->responder_resources = rep.initiator_depth;
  c->sq_psn = rep.starting_psn;
  c->rnr_retry_count = rep.rnr_retry_count;
  c->target_ack_delay = rep.target_ack_delay;
  // The local ACK timeout now counts the peer's ACK delay too.
  c->av_timeout = cm_ack_timeout(c->target_ack_delay, static_cast<std::uint8_t>(c->av_timeout - 1));
  cancel_send(*c);
  queue_received(*c, CmEventType::kRepReceived, mad, from);
}

void IbCm::rtu_handler(const Mad& mad, const GsiAddress& from) {
  const auto& rtu = std::get<RtuMsg>(mad.msg);
  Conn* c = acquire(rtu.remote_comm_id, rtu.local_comm_id);
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  if (c->state != CmState::kRepSent && c->state != CmState::kMraRepRcvd) {
    counters_.rx_duplicates.inc(CmAttr::kRtu);
    return;
  }
  c->state = CmState::kEstablished;
  cancel_send(*c);
  queue_received(*c, CmEventType::kRtuReceived, mad, from);
}

// --- DREQ, DREP -----------------------------------------------------------------------

void IbCm::dreq_handler(const Mad& mad, const GsiAddress& from, Nanos) {
  const auto& dreq = std::get<DreqMsg>(mad.msg);
  Conn* c = acquire(dreq.remote_comm_id, dreq.local_comm_id);
  if (!c) {
    // cm_issue_drep: the connection is gone here (its DREP was lost, or it
    // never existed); tell the peer so it can let go.
    counters_.rx_duplicates.inc(CmAttr::kDreq);
    issue_drep(mad, from);
    return;
  }
  if (c->local_qpn != (dreq.remote_qpn & kQpnMask)) {
    drop(CmDrop::kDreqQpnMismatch);
    return;
  }
  switch (c->state) {
    case CmState::kRepSent:
    case CmState::kDreqSent:
    case CmState::kMraRepRcvd:
      // cm_dreq_handler leaves the REP of MRA_REP_RCVD to run out; it
      // answers nothing once the peer disconnects, so uroce stops it.
      cancel_send(*c);
      break;
    case CmState::kEstablished:
      break;
    case CmState::kTimewait:
      // Our DREP was lost: send it again.
      counters_.rx_duplicates.inc(CmAttr::kDreq);
      transmit(make_out(from, hdr_with_tid(mad.hdr.tid), format_drep(*c)), CmAttr::kDrep, true);
      return;
    case CmState::kDreqRcvd:
      counters_.rx_duplicates.inc(CmAttr::kDreq);
      return;
    default:
      drop(CmDrop::kWrongState);
      return;
  }
  c->state = CmState::kDreqRcvd;
  c->tid = mad.hdr.tid;
  queue_received(*c, CmEventType::kDreqReceived, mad, from);
}

void IbCm::drep_handler(const Mad& mad, const GsiAddress& from, Nanos now) {
  const auto& drep = std::get<DrepMsg>(mad.msg);
  Conn* c = acquire(drep.remote_comm_id, drep.local_comm_id);
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  if (c->state != CmState::kDreqSent && c->state != CmState::kDreqRcvd) {
    drop(CmDrop::kWrongState);
    return;
  }
  cancel_send(*c);
  enter_timewait(*c, now);
  queue_received(*c, CmEventType::kDrepReceived, mad, from);
}

// --- SIDR ----------------------------------------------------------------------------

void IbCm::sidr_req_handler(const Mad& mad, const GsiAddress& from, Nanos now) {
  const auto& sidr = std::get<SidrReqMsg>(mad.msg);
  // cm_insert_remote_sidr: a request still being answered, from the same
  // requester, is a resend.
  const std::pair key{sidr.request_id, from.remote_ip.bytes};
  if (remote_sidr_table_.contains(key)) {
    counters_.rx_duplicates.inc(CmAttr::kSidrReq);
    return;
  }
  Conn* listener = find_listener(sidr.service_id);
  const std::uint32_t listen_id = listener ? listener->local_id : 0;
  const std::uint64_t context = listener ? listener->context : 0;
  const std::uint32_t id = create_id(context);
  Conn& c = ids_.at(id);
  c.remote_id = sidr.request_id;
  c.service_id = sidr.service_id;
  c.service_mask = ~std::uint64_t{0};
  c.tid = mad.hdr.tid;
  c.peer = from;
  c.peer.remote_qpn = 1;
  c.state = CmState::kSidrReqRcvd;
  remote_sidr_table_[key] = id;
  c.in_sidr_table = true;
  if (!listener) {
    SidrRepParam p;
    p.status = SidrStatus::kUnsupported;
    send_sidr_rep(id, p, now);
    erase_conn(id);
    return;
  }
  queue_received(c, CmEventType::kSidrReqReceived, mad, from, listen_id);
}

void IbCm::sidr_rep_handler(const Mad& mad, const GsiAddress& from) {
  const auto& rep = std::get<SidrRepMsg>(mad.msg);
  Conn* c = acquire(rep.request_id, 0);
  if (!c) {
    drop(CmDrop::kUnmatchedCommId);
    return;
  }
  if (c->state != CmState::kSidrReqSent) {
    // The answer to a resend of a request already answered.
    counters_.rx_duplicates.inc(CmAttr::kSidrRep);
    return;
  }
  c->state = CmState::kIdle;
  cancel_send(*c);
  queue_received(*c, CmEventType::kSidrRepReceived, mad, from);
}

}  // namespace uroce::cm
