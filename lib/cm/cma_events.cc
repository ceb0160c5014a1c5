/* SPDX-License-Identifier: BSD-3-Clause */
// Cma: the IB CM's events turned into rdma_cm events (cma.c
// cma_ib_req_handler, cma_ib_handler, cma_sidr_rep_handler), the QP
// transitions of an attached QP, and rdma_init_qp_attr.

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/cma.h"

namespace uroce::cm {

namespace {

using wire::IpAddr;

template <std::size_t N>
void set_private(CmaEvent& e, const std::array<std::uint8_t, N>& data, std::size_t from,
                 std::uint8_t len) {
  std::memcpy(e.private_data.data(), data.data() + from, len);
  e.private_data_len = len;
}

// cm_req_get_qp_type: RC and UC; XRC and the reserved type serve no
// listener here.
std::optional<QpType> req_qp_type(const ReqMsg& req) {
  switch (req.transport_type) {
    case TransportType::kRc:
      return QpType::kRc;
    case TransportType::kUc:
      return QpType::kUc;
    default:
      return std::nullopt;
  }
}

}  // namespace

void Cma::process_ib_events(Nanos now) {
  CmEvent e;
  while (ib_.poll_event(e)) on_ib_event(e, now);
}

Cma::Id* Cma::listener_for(std::uint64_t sid, const IpCmHdr& hdr, std::optional<QpType> type) {
  auto it = bind_lists_.find({static_cast<PortSpace>(service_id_ps(sid)), service_id_port(sid)});
  if (it == bind_lists_.end()) return nullptr;
  for (std::uint32_t n : it->second) {
    Id& l = ids_.at(n);
    if (l.state != CmaState::kListen) continue;
    // cma_match_private_data: a listener on the any address takes both
    // families unless AF-only; one on an address takes that address.
    bool match;
    if (is_any(l.src.ip) && !l.afonly)
      match = true;
    else if (!l.v6)
      match = hdr.ip_version == 4 && (is_any(l.src.ip) || hdr.dst == l.src.ip);
    else
      match = hdr.ip_version == 6 && (is_any(l.src.ip) || hdr.dst == l.src.ip);
    if (!match) continue;
    // cma_ib_check_req_qp_type: the first listener that matches decides.
    return type && l.qp_type == *type ? &l : nullptr;
  }
  return nullptr;
}

Cma::Id* Cma::new_conn_id(const Id& listener, QpType type, const IpCmHdr& hdr, std::uint64_t sid,
                          std::uint32_t ib_id) {
  const std::uint32_t n = create_id(listener.channel, listener.ps, type, listener.context);
  Id& id = ids_.at(n);
  // cma_save_ip_info: we are the header's destination at the ServiceID's
  // port, the peer its source at its port.
  id.v6 = hdr.ip_version == 6;
  id.src = {hdr.dst, service_id_port(sid)};
  id.dst = {hdr.src, hdr.src_port};
  id.afonly = listener.afonly;
  id.tos = listener.tos;
  id.tos_set = listener.tos_set;
  id.ib_id = ib_id;
  id.listener = listener.id;
  id.state = CmaState::kConnect;
  by_ib_id_[ib_id] = n;
  return &id;
}

void Cma::on_req(const CmEvent& e, Nanos now) {
  const auto& req = std::get<ReqMsg>(e.mad.msg);
  IpCmHdr hdr;
  Id* listener = nullptr;
  // cma_save_ip_info refuses a header of another version or family;
  // validate_net_dev wants its destination to be an address of ours.
  if (decode(req.private_data.data(), hdr) && is_device_ip(hdr.dst))
    listener = listener_for(req.service_id, hdr, req_qp_type(req));
  if (!listener) {
    // The IB CM rejects (CONSUMER_DEFINED), as cm_destroy_id does for a
    // REQ its consumer refused.
    ib_.destroy_id(e.id, now, EINVAL);
    return;
  }
  if (listener->pending >= listener->backlog) {
    // ucma_event_handler: no room is -ENOMEM, which drops the REQ without
    // a REJ; the active side's resend may find room.
    ib_.destroy_id(e.id, now, ENOMEM);
    return;
  }
  Id* id = new_conn_id(*listener, *req_qp_type(req), hdr, req.service_id, e.id);
  // cma_ib_new_conn_id keeps the REQ's path as the id's route.
  PathRecord p;
  p.sgid = req.primary.remote_gid;
  p.dgid = req.primary.local_gid;
  p.flow_label = req.primary.flow_label;
  p.traffic_class = req.primary.traffic_class;
  p.hop_limit = req.primary.hop_limit;
  p.sl = req.primary.sl;
  p.rate = req.primary.packet_rate;
  p.mtu = wire::mtu_from_code(req.path_mtu).value_or(wire::Mtu::k256);
  p.packet_life_time = static_cast<std::uint8_t>(req.primary.local_ack_timeout -
                                                 (req.primary.local_ack_timeout > 0));
  p.pkey = req.pkey;
  p.dmac = e.from.remote_mac;
  id->route = p;
  id->dst_mac = e.from.remote_mac;
  ++listener->pending;

  CmaEvent ev;
  ev.event = CmaEventType::kConnectRequest;
  ev.listen_id = listener->id;
  // cma_set_req_event_data: what the peer initiates we respond to.
  set_private(ev, req.private_data, IpCmHdr::kSize, kConnectRequestPrivateLen);
  ev.conn.responder_resources = req.initiator_depth;
  ev.conn.initiator_depth = req.responder_resources;
  ev.conn.flow_control = req.end_to_end_flow_control;
  ev.conn.retry_count = req.retry_count;
  ev.conn.rnr_retry_count = req.rnr_retry_count;
  ev.conn.srq = req.srq;
  ev.conn.qp_num = req.local_qpn;
  queue(*id, ev);
  // CMA_CM_MRA_SETTING: an MRA only if the REQ comes again before the
  // consumer accepts (IB_CM_MRA_FLAG_DELAY).
  ib_.send_mra(e.id, kCmaMraSetting, {}, now);
}

void Cma::on_sidr_req(const CmEvent& e, Nanos now) {
  const auto& sidr = std::get<SidrReqMsg>(e.mad.msg);
  IpCmHdr hdr;
  Id* listener = nullptr;
  if (decode(sidr.private_data.data(), hdr) && is_device_ip(hdr.dst))
    listener = listener_for(sidr.service_id, hdr, QpType::kUd);
  // cm_sidr_req_handler: a consumer that refuses, for want of room as for
  // anything else, is a SIDR_REP REJECT.
  if (!listener || listener->pending >= listener->backlog) {
    ib_.destroy_id(e.id, now, listener ? ENOMEM : EINVAL);
    return;
  }
  Id* id = new_conn_id(*listener, QpType::kUd, hdr, sidr.service_id, e.id);
  id->dst_mac = e.from.remote_mac;
  ++listener->pending;
  CmaEvent ev;
  ev.event = CmaEventType::kConnectRequest;
  ev.listen_id = listener->id;
  set_private(ev, sidr.private_data, IpCmHdr::kSize, kUdConnectRequestPrivateLen);
  queue(*id, ev);
}

void Cma::on_sidr_rep(Id& id, const CmEvent& e) {
  CmaEvent ev;
  if (e.type == CmEventType::kSidrReqError) {
    ev.event = CmaEventType::kUnreachable;
    ev.status = -ETIMEDOUT;
    queue(id, ev);
    return;
  }
  const auto& rep = std::get<SidrRepMsg>(e.mad.msg);
  set_private(ev, rep.private_data, 0, kSidrRepPrivateLen);
  if (rep.status != static_cast<std::uint8_t>(SidrStatus::kSuccess)) {
    ev.event = CmaEventType::kUnreachable;
    ev.status = rep.status;
  } else if (const int ret = set_qkey(id, rep.qkey); ret) {
    ev.event = CmaEventType::kAddrError;
    ev.status = -ret;
  } else {
    ev.event = CmaEventType::kEstablished;
    // ib_init_ah_attr_from_path: the address handle to the peer.
    if (id.route) {
      AhAttr& ah = ev.ud.ah_attr;
      ah.grh.dgid = id.route->dgid;
      ah.grh.flow_label = id.route->flow_label;
      ah.grh.sgid_index = sgid_index(id.route->sgid);
      ah.grh.hop_limit = id.route->hop_limit;
      ah.grh.traffic_class = id.route->traffic_class;
      ah.sl = id.route->sl;
      ah.static_rate = id.route->rate;
      ah.port_num = device_.port_num;
      ah.dmac = id.route->dmac;
    }
    ev.ud.qp_num = rep.qpn;
    ev.ud.qkey = rep.qkey;
  }
  queue(id, ev);
}

void Cma::on_ib_event(const CmEvent& e, Nanos now) {
  if (e.type == CmEventType::kReqReceived) return on_req(e, now);
  if (e.type == CmEventType::kSidrReqReceived) return on_sidr_req(e, now);
  auto it = by_ib_id_.find(e.id);
  if (it == by_ib_id_.end()) return;
  Id* id = find(it->second);
  if (!id) return;
  // cma_ib_handler: a connection's events count while it connects, its
  // TIMEWAIT_EXIT once it disconnected; any other is stale.
  if (e.type == CmEventType::kTimewaitExit ? id->state != CmaState::kDisconnect
                                           : id->state != CmaState::kConnect)
    return;
  CmaEvent ev;
  switch (e.type) {
    case CmEventType::kReqError:
    case CmEventType::kRepError:
      ev.event = CmaEventType::kUnreachable;
      ev.status = -ETIMEDOUT;
      break;
    case CmEventType::kRepReceived: {
      const auto& rep = std::get<RepMsg>(e.mad.msg);
      ib_.send_mra(e.id, kCmaMraSetting, {}, now);
      if (id->qp) {
        ev.status = rep_recv(*id, now);
        ev.event = ev.status ? CmaEventType::kConnectError : CmaEventType::kEstablished;
      } else {
        ev.event = CmaEventType::kConnectResponse;
      }
      // cma_set_rep_event_data, the resources seen from this side.
      set_private(ev, rep.private_data, 0, kRepPrivateLen);
      ev.conn.responder_resources = rep.initiator_depth;
      ev.conn.initiator_depth = rep.responder_resources;
      ev.conn.flow_control = rep.end_to_end_flow_control;
      ev.conn.rnr_retry_count = rep.rnr_retry_count;
      ev.conn.srq = rep.srq;
      ev.conn.qp_num = rep.local_qpn;
      break;
    }
    case CmEventType::kRtuReceived:
    case CmEventType::kUserEstablished:
      ev.event = CmaEventType::kEstablished;
      break;
    case CmEventType::kDreqError:
      ev.status = -ETIMEDOUT;
      [[fallthrough]];
    case CmEventType::kDreqReceived:
    case CmEventType::kDrepReceived:
      id->state = CmaState::kDisconnect;
      ev.event = CmaEventType::kDisconnected;
      break;
    case CmEventType::kTimewaitExit:
      ev.event = CmaEventType::kTimewaitExit;
      break;
    case CmEventType::kMraReceived:
      return;
    case CmEventType::kRejReceived: {
      const auto& rej = std::get<RejMsg>(e.mad.msg);
      modify_qp_err(*id);
      ev.event = CmaEventType::kRejected;
      ev.status = rej.reason;
      set_private(ev, rej.private_data, 0, kRejPrivateLen);
      break;
    }
    case CmEventType::kSidrReqError:
    case CmEventType::kSidrRepReceived:
      return on_sidr_rep(*id, e);
    case CmEventType::kReqReceived:
    case CmEventType::kSidrReqReceived:
      return;
  }
  queue(*id, ev);
}

// --- QP transitions of an attached QP -----------------------------------------------------

int Cma::modify_qp(Id& id, QpState state, const std::optional<ConnParam>& param) {
  if (!id.qp) return 0;
  QpAttr a;
  unsigned mask = 0;
  int ret = init_qp_attr(id.id, state, a, mask);
  if (ret) return ret;
  if (param && state == QpState::kRtr) a.max_dest_rd_atomic = param->responder_resources;
  if (param && state == QpState::kRts) a.max_rd_atomic = param->initiator_depth;
  return id.qp->modify_qp(id.qp_num, a, mask);
}

int Cma::modify_qp_rtr(Id& id, const std::optional<ConnParam>& param) {
  // cma_modify_qp_rtr: INIT again first, so the access flags follow the
  // negotiated responder resources.
  int ret = modify_qp(id, QpState::kInit, std::nullopt);
  if (!ret) ret = modify_qp(id, QpState::kRtr, param);
  return ret;
}

int Cma::modify_qp_rts(Id& id, const std::optional<ConnParam>& param) {
  return modify_qp(id, QpState::kRts, param);
}

void Cma::modify_qp_err(Id& id) {
  if (!id.qp) return;
  QpAttr a;
  a.qp_state = QpState::kErr;
  id.qp->modify_qp(id.qp_num, a, qp_attr_mask::kState);
}

int Cma::rep_recv(Id& id, Nanos now) {
  // cma_rep_recv: RTR and RTS before the RTU lets the peer send.
  int ret = modify_qp_rtr(id, std::nullopt);
  if (!ret) ret = modify_qp_rts(id, std::nullopt);
  if (!ret) ret = ib_.send_rtu(id.ib_id, {}, now);
  if (ret) {
    modify_qp_err(id);
    ib_.send_rej(id.ib_id, RejReason::kConsumerDefined, {}, {}, now);
  }
  return ret;
}

// --- rdma_init_qp_attr ---------------------------------------------------------------------

std::uint8_t Cma::sgid_index(const IpAddr& gid) const {
  for (std::size_t i = 0; gid != IpAddr{} && i < device_.gids.size(); ++i)
    if (device_.gids[i] == gid) return static_cast<std::uint8_t>(i);
  return 0;
}

int Cma::ib_init_qp_attr(const Id& id, QpAttr& attr, unsigned& mask) const {
  // cma_ib_init_qp_attr: before the IB CM has a connection, and for UD
  // always. P_Key 0xFFFF, index 0, on RoCE (rdma_cap_eth_ah).
  using namespace qp_attr_mask;
  attr.pkey_index = 0;
  attr.port_num = device_.port_num;
  mask = kState | kPkeyIndex | kPort;
  if (id.qp_type == QpType::kUd) {
    if (!id.qkey) id.qkey = kUdpQkey;  // cma_set_qkey(id, 0)
    attr.qkey = id.qkey;
    mask |= kQkey;
  } else {
    attr.qp_access_flags = 0;
    mask |= kAccessFlags;
  }
  return 0;
}

int Cma::init_qp_attr(std::uint32_t n, QpState state, QpAttr& attr, unsigned& mask) const {
  const Id* id = find(n);
  if (!id) return EINVAL;
  attr.qp_state = state;
  int ret;
  if (!id->ib_id || id->qp_type == QpType::kUd) {
    ret = ib_init_qp_attr(*id, attr, mask);
  } else {
    ret = ib_.init_qp_attr(id->ib_id, state, attr, mask);
  }
  if (ret) return ret;
  // rdma_init_qp_attr: the receive PSN is always the id's own.
  if (state == QpState::kRtr) attr.rq_psn = id->seq_num;
  if ((mask & qp_attr_mask::kTimeout) && id->timeout_set) attr.timeout = id->timeout;
  if ((mask & qp_attr_mask::kMinRnrTimer) && id->min_rnr_timer_set)
    attr.min_rnr_timer = id->min_rnr_timer;
  // The passive side takes the REQ's path MTU, which rxe does not clamp
  // to its link; uroce never uses more than its own link carries.
  if (mask & qp_attr_mask::kPathMtu) {
    const std::uint8_t link = path_mtu_code();
    if (link && static_cast<std::uint8_t>(attr.path_mtu) > link)
      attr.path_mtu = static_cast<wire::Mtu>(link);
  }
  return 0;
}

}  // namespace uroce::cm
