/* SPDX-License-Identifier: BSD-3-Clause */
// IbCm: the messages the layer above sends (ib_send_cm_* in cm.c), each
// checked against the connection's state and formatted as cm_format_*
// formats it.

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/ib_cm.h"

namespace uroce::cm {

namespace {

template <std::size_t N>
void copy_private(std::array<std::uint8_t, N>& dst, std::span<const std::uint8_t> src) {
  // An empty span may have no data pointer, which memcpy may not be given.
  if (!src.empty()) std::memcpy(dst.data(), src.data(), std::min(N, src.size()));
}

}  // namespace

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

}  // namespace uroce::cm
