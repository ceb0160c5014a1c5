/* SPDX-License-Identifier: BSD-3-Clause */
// Cma: ids, options, bind, listen, address and route resolution, and the
// calls that set up and tear down connections. Port allocation is in
// cma_ports.cc. The IB CM's events and
// the QP attributes are in cma_events.cc.

#include "cm/cma.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uroce::cm {

namespace {

using wire::IpAddr;

IpAddr any_of(bool v6) { return v6 ? IpAddr{} : IpAddr::from_v4(0); }

}  // namespace

// cma_any_addr: the zero address and loopback both mean "any" to a bind.
bool Cma::is_any(const IpAddr& a) {
  if (a.is_v4()) return a.v4() == 0 || (a.v4() >> 24) == 127;
  IpAddr loopback6;
  loopback6.bytes[15] = 1;
  return a == IpAddr{} || a == loopback6;
}

Cma::Cma(const CmaDevice& device, MadSender& sender, RandomSource& random)
    : device_(device),
      random_(random),
      ib_(IbCmConfig{device.node_guid, device.ca_ack_delay, device.hi_tid, device.port_num,
                     device.gids},
          sender, random) {}

Cma::Id* Cma::find(std::uint32_t id) {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &it->second;
}

const Cma::Id* Cma::find(std::uint32_t id) const {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &it->second;
}

bool Cma::is_device_ip(const IpAddr& a) const {
  return a != IpAddr{} &&
         std::find(device_.gids.begin(), device_.gids.end(), a) != device_.gids.end();
}

void Cma::queue(const Id& id, CmaEvent event) {
  event.id = id.id;
  event.context = id.context;
  channels_[id.channel].push_back(event);
}

// --- ids -----------------------------------------------------------------------

std::uint32_t Cma::create_id(std::uint32_t channel, PortSpace ps, QpType qp_type,
                             std::uint64_t context) {
  if (ps != PortSpace::kTcp && ps != PortSpace::kUdp) return 0;
  const std::uint32_t n = next_id_++;
  Id& id = ids_[n];
  id.id = n;
  id.channel = channel;
  id.context = context;
  id.ps = ps;
  id.qp_type = qp_type;
  // The PSN this side will receive from: random, as cma.c's seq_num, so
  // that an off-path sender cannot guess where a connection's data starts.
  id.seq_num = random_.u32() & 0xFFFFFF;
  return n;
}

void Cma::destroy_id(std::uint32_t n, Nanos now) {
  Id* id = find(n);
  if (!id) return;
  // New ids whose CONNECT_REQUEST nobody took go with their listener; the
  // IB CM rejects their REQs.
  std::vector<std::uint32_t> orphans;
  for (auto& [ch, q] : channels_) {
    for (const CmaEvent& e : q)
      if (e.event == CmaEventType::kConnectRequest && e.listen_id == n) orphans.push_back(e.id);
  }
  for (std::uint32_t o : orphans) destroy_id(o, now);
  id = find(n);

  if (id->state == CmaState::kListen) {
    auto it = ib_listeners_.find(id->ib_service_id);
    if (it != ib_listeners_.end() && --it->second.users == 0) {
      ib_.destroy_id(it->second.ib_id, now);
      ib_listeners_.erase(it);
    }
  } else if (id->ib_id) {
    by_ib_id_.erase(id->ib_id);
    ib_.destroy_id(id->ib_id, now);
  }
  release_port(*id);
  for (auto& [ch, q] : channels_) {
    for (const CmaEvent& e : q) {
      if (e.id == n && e.event == CmaEventType::kConnectRequest)
        if (Id* l = find(e.listen_id)) --l->pending;
    }
    std::erase_if(q, [n](const CmaEvent& e) { return e.id == n; });
  }
  ids_.erase(n);
  process_ib_events(now);
}

int Cma::migrate_id(std::uint32_t n, std::uint32_t channel) {
  Id* id = find(n);
  if (!id) return EINVAL;
  if (id->channel == channel) return 0;
  auto& from = channels_[id->channel];
  auto& to = channels_[channel];
  for (const CmaEvent& e : from)
    if (e.id == n) to.push_back(e);
  std::erase_if(from, [n](const CmaEvent& e) { return e.id == n; });
  id->channel = channel;
  return 0;
}

std::optional<CmaIdInfo> Cma::query(std::uint32_t n) const {
  const Id* id = find(n);
  if (!id) return std::nullopt;
  CmaIdInfo i;
  i.id = id->id;
  i.channel = id->channel;
  i.context = id->context;
  i.ps = id->ps;
  i.qp_type = id->qp_type;
  i.state = id->state;
  i.src_ip = id->src.ip;
  i.src_port = id->src.port;
  i.dst_ip = id->dst.ip;
  i.dst_port = id->dst.port;
  i.route = id->route;
  i.dst_mac = id->dst_mac;
  i.qp_num = id->qp_num;
  i.ib_id = id->ib_id;
  i.listen_id = id->listener;
  return i;
}

// --- options ----------------------------------------------------------------------

int Cma::set_tos(std::uint32_t n, std::uint8_t tos) {
  Id* id = find(n);
  if (!id) return EINVAL;
  id->tos = tos;
  id->tos_set = true;
  return 0;
}

int Cma::set_reuseaddr(std::uint32_t n, bool reuse) {
  Id* id = find(n);
  if (!id) return EINVAL;
  // rdma_set_reuseaddr: a listener may drop it but not take it.
  if ((reuse && id->state != CmaState::kListen) || id->state == CmaState::kIdle) {
    id->reuseaddr = reuse;
    // A bound id's terms change on the host too. Taking REUSEADDR only
    // loosens them, so the host cannot refuse.
    host_rebind(*id);
    return 0;
  }
  return EINVAL;
}

int Cma::set_afonly(std::uint32_t n, bool afonly) {
  Id* id = find(n);
  if (!id || (id->state != CmaState::kIdle && id->state != CmaState::kAddrBound)) return EINVAL;
  id->afonly = afonly;
  id->afonly_set = true;
  host_rebind(*id);
  return 0;
}

int Cma::set_ack_timeout(std::uint32_t n, std::uint8_t timeout) {
  Id* id = find(n);
  if (!id || id->qp_type != QpType::kRc) return EINVAL;
  id->timeout = timeout;
  id->timeout_set = true;
  return 0;
}

int Cma::set_min_rnr_timer(std::uint32_t n, std::uint8_t min_rnr_timer) {
  Id* id = find(n);
  if (!id || (min_rnr_timer & 0xE0) || id->qp_type != QpType::kRc) return EINVAL;
  id->min_rnr_timer = min_rnr_timer;
  id->min_rnr_timer_set = true;
  return 0;
}

int Cma::bind(std::uint32_t n, const IpAddr& addr, std::uint16_t port) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kIdle) return EINVAL;
  if (!is_any(addr) && !is_device_ip(addr)) return EADDRNOTAVAIL;
  id->v6 = !addr.is_v4();
  id->src = {addr, port};
  // rdma_bind_addr: an IPv4 id is AF-only; an IPv6 one follows
  // net.ipv6.bindv6only, 0 by default.
  if (!id->afonly_set) id->afonly = !id->v6;
  if (id->dst.ip == IpAddr{}) id->dst.ip = any_of(id->v6);
  const int ret = get_port(*id);
  if (ret) return ret;
  id->state = CmaState::kAddrBound;
  return 0;
}

int Cma::listen(std::uint32_t n, int backlog) {
  Id* id = find(n);
  if (!id) return EINVAL;
  if (id->state == CmaState::kIdle) {
    const int ret = bind(n, IpAddr::from_v4(0), 0);
    if (ret) return ret;
  }
  if (id->state != CmaState::kAddrBound) return EINVAL;
  // A listener must be alone on its address, REUSEADDR or not.
  if (id->reuseaddr) {
    int ret = check_port(*id, false);
    if (ret == 0) ret = host_bind(*id, id->src.port, false, false);
    if (ret) return ret;
    id->reuseaddr = false;
  }
  const std::uint64_t sid = service_id(id->ps, id->src.port);
  IbListener& l = ib_listeners_[sid];
  if (l.users == 0) {
    l.ib_id = ib_.create_id(sid);
    const int ret = ib_.listen(l.ib_id, sid);
    if (ret) {
      ib_.destroy_id(l.ib_id, 0);
      ib_listeners_.erase(sid);
      return ret;
    }
  }
  ++l.users;
  id->ib_service_id = sid;
  // ucma_listen: a backlog out of range is the maximum (ucma max_backlog).
  id->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
  id->state = CmaState::kListen;
  return 0;
}

// --- resolution ------------------------------------------------------------------------

int Cma::resolve_addr(std::uint32_t n, std::optional<IpAddr> src, const IpAddr& dst,
                      std::uint16_t dst_port) {
  Id* id = find(n);
  if (!id) return EINVAL;
  const bool dst_v6 = !dst.is_v4();
  // resolve_prepare_src: the destination first, so that an ephemeral
  // port is chosen knowing it.
  id->dst = {dst, dst_port};
  if (id->state == CmaState::kIdle) {
    const int ret = bind(n, src.value_or(any_of(dst_v6)), 0);
    if (ret) {
      id->dst = {};
      return ret;
    }
  }
  if (id->state != CmaState::kAddrBound || id->v6 != dst_v6) {
    id->dst = {any_of(id->v6), 0};
    return EINVAL;
  }
  id->state = CmaState::kAddrQuery;
  return 0;
}

int Cma::addr_resolved(std::uint32_t n, const ResolvedAddr& r) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kAddrQuery) return EINVAL;
  if (is_any(id->src.ip) && r.src_ip) {
    id->src.ip = *r.src_ip;
    host_rebind(*id);  // the kernel's bind list holds the id, address and all
  }
  CmaEvent e;
  if (is_any(id->src.ip) || !is_device_ip(id->src.ip)) {
    // cma_acquire_dev_by_src_ip found no device with that address.
    id->state = CmaState::kAddrBound;
    e.event = CmaEventType::kAddrError;
    e.status = -ENODEV;
  } else {
    id->state = CmaState::kAddrResolved;
    id->dst_mac = r.dst_mac;
    id->hop_limit = r.hop_limit;
    e.event = CmaEventType::kAddrResolved;
  }
  queue(*id, e);
  return 0;
}

int Cma::addr_error(std::uint32_t n, int status) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kAddrQuery) return EINVAL;
  id->state = CmaState::kAddrBound;
  CmaEvent e;
  e.event = CmaEventType::kAddrError;
  e.status = status;
  queue(*id, e);
  return 0;
}

std::uint8_t Cma::path_mtu_code() const {
  const auto mtu = wire::mtu_for_link(device_.link_mtu);
  return mtu ? static_cast<std::uint8_t>(*mtu) : 0;
}

int Cma::resolve_route(std::uint32_t n) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kAddrResolved) return EINVAL;
  // cma_resolve_iboe_route: a RoCE route is computed, not queried.
  const std::uint8_t mtu = path_mtu_code();
  if (!mtu) return EINVAL;
  PathRecord p;
  p.sgid = id->src.ip;
  p.dgid = id->dst.ip;
  p.hop_limit = id->hop_limit;
  p.pkey = wire::kDefaultPkey;
  p.traffic_class = id->tos_set ? id->tos : device_.default_tos;
  p.sl = 0;  // iboe_tos_to_sl of a netdev without traffic classes
  p.mtu = static_cast<wire::Mtu>(mtu);
  p.rate = device_.rate;
  // IBA 12.7.34 with a negligible ACK delay: a set ACK timeout gives the
  // packet lifetime, half of it.
  p.packet_life_time =
      id->timeout_set ? static_cast<std::uint8_t>(id->timeout - 1) : kCmaIboePacketLifetime;
  // cma_get_roce_udp_flow_label: a hash of the ports (no IPv6 flowinfo here).
  p.flow_label = (std::uint32_t{id->src.port} * 31 + id->dst.port) & 0xFFFFF;
  p.dmac = id->dst_mac;
  id->route = p;
  id->state = CmaState::kRouteResolved;
  CmaEvent e;
  e.event = CmaEventType::kRouteResolved;
  queue(*id, e);
  return 0;
}

// --- connections --------------------------------------------------------------------------

std::vector<std::uint8_t> Cma::with_ip_cm_hdr(const Id& id,
                                              std::span<const std::uint8_t> user) const {
  // cma_format_hdr: the IP CM header, then the user's private data.
  std::vector<std::uint8_t> pd(IpCmHdr::kSize + user.size());
  IpCmHdr h;
  h.ip_version = id.v6 ? 6 : 4;
  h.src_port = id.src.port;
  h.src = id.src.ip;
  h.dst = id.dst.ip;
  encode(h, pd.data());
  if (!user.empty()) std::memcpy(pd.data() + IpCmHdr::kSize, user.data(), user.size());
  return pd;
}

int Cma::set_qkey(Id& id, std::uint32_t qkey) {
  if (id.qkey) return qkey && id.qkey != qkey ? EINVAL : 0;
  id.qkey = qkey ? qkey : kUdpQkey;
  return 0;
}

int Cma::attach_qp(std::uint32_t n, std::uint32_t qpn, bool srq, QpControl& control) {
  Id* id = find(n);
  if (!id || id->qp) return EINVAL;
  id->qp = &control;
  id->qp_num = qpn & 0xFFFFFF;
  id->srq = srq;
  int ret;
  if (id->qp_type == QpType::kUd) {
    // cma_init_ud_qp: INIT, then RTR and RTS with their state only.
    ret = modify_qp(*id, QpState::kInit, std::nullopt);
    QpAttr a;
    if (!ret) {
      a.qp_state = QpState::kRtr;
      ret = control.modify_qp(id->qp_num, a, qp_attr_mask::kState);
    }
    if (!ret) {
      a.qp_state = QpState::kRts;
      a.sq_psn = 0;
      ret = control.modify_qp(id->qp_num, a, qp_attr_mask::kState | qp_attr_mask::kSqPsn);
    }
  } else {
    ret = modify_qp(*id, QpState::kInit, std::nullopt);
  }
  if (ret) id->qp = nullptr;
  return ret;
}

void Cma::detach_qp(std::uint32_t n) {
  if (Id* id = find(n)) id->qp = nullptr;
}

int Cma::connect(std::uint32_t n, const ConnParam& param, Nanos now) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kRouteResolved || !id->route) return EINVAL;
  if (!id->qp) {
    id->qp_num = param.qp_num & 0xFFFFFF;
    id->srq = param.srq;
  }
  const std::uint64_t sid = service_id(id->ps, id->dst.port);
  const auto pd = with_ip_cm_hdr(*id, param.private_data);
  const std::uint32_t ib_id = ib_.create_id(n);
  int ret;
  if (id->qp_type == QpType::kUd) {
    SidrReqParam p;
    p.path = *id->route;
    p.service_id = sid;
    p.timeout_ms = iba_time_ms(kCmaCmResponseTimeout);
    p.max_cm_retries = kCmaMaxCmRetries;
    p.private_data = pd;
    ret = ib_.send_sidr_req(ib_id, p, now);
  } else {
    ReqParam p;
    p.path = *id->route;
    p.service_id = sid;
    p.qp_num = id->qp_num;
    p.qp_type = id->qp_type;
    p.starting_psn = id->seq_num;
    p.responder_resources = param.responder_resources;
    p.initiator_depth = param.initiator_depth;
    p.flow_control = param.flow_control != 0;
    p.retry_count = std::min<std::uint8_t>(7, param.retry_count);
    p.rnr_retry_count = std::min<std::uint8_t>(7, param.rnr_retry_count);
    p.remote_cm_response_timeout = kCmaCmResponseTimeout;
    p.local_cm_response_timeout = kCmaCmResponseTimeout;
    p.max_cm_retries = kCmaMaxCmRetries;
    p.srq = id->srq;
    p.private_data = pd;
    ret = ib_.send_req(ib_id, p, now);
  }
  if (ret) {
    ib_.destroy_id(ib_id, now);
    return ret;
  }
  id->ib_id = ib_id;
  by_ib_id_[ib_id] = n;
  id->state = CmaState::kConnect;
  process_ib_events(now);
  return 0;
}

int Cma::accept(std::uint32_t n, const std::optional<ConnParam>& param, Nanos now) {
  Id* id = find(n);
  if (!id || id->state != CmaState::kConnect || !id->ib_id) return EINVAL;
  if (!id->qp && param) {
    id->qp_num = param->qp_num & 0xFFFFFF;
    id->srq = param->srq;
  }
  int ret;
  if (id->qp_type == QpType::kUd) {
    ret = set_qkey(*id, param ? param->qkey : 0);
    if (!ret) {
      SidrRepParam p;
      p.status = SidrStatus::kSuccess;
      p.qp_num = id->qp_num;
      p.qkey = id->qkey;
      if (param) p.private_data = param->private_data;
      ret = ib_.send_sidr_rep(id->ib_id, p, now);
    }
  } else if (param) {
    // cma_accept_ib: the QP is ready to receive before the REP says so.
    ret = modify_qp_rtr(*id, param);
    if (!ret) ret = modify_qp_rts(*id, param);
    if (!ret) {
      RepParam p;
      p.qp_num = id->qp_num;
      p.starting_psn = id->seq_num;
      p.private_data = param->private_data;
      p.responder_resources = param->responder_resources;
      p.initiator_depth = param->initiator_depth;
      p.flow_control = param->flow_control != 0;
      p.rnr_retry_count = std::min<std::uint8_t>(7, param->rnr_retry_count);
      p.srq = id->srq;
      ret = ib_.send_rep(id->ib_id, p, now);
    }
  } else {
    ret = rep_recv(*id, now);
  }
  if (ret) {
    // rdma_accept: a failed accept rejects.
    modify_qp_err(*id);
    reject(n, {}, now);
  }
  process_ib_events(now);
  return ret;
}

int Cma::reject(std::uint32_t n, std::span<const std::uint8_t> private_data, Nanos now,
                RejReason reason) {
  Id* id = find(n);
  if (!id || !id->ib_id) return EINVAL;
  int ret;
  if (id->qp_type == QpType::kUd) {
    SidrRepParam p;
    p.status = SidrStatus::kReject;
    p.private_data = private_data;
    ret = ib_.send_sidr_rep(id->ib_id, p, now);
  } else {
    ret = ib_.send_rej(id->ib_id, reason, {}, private_data, now);
  }
  process_ib_events(now);
  return ret;
}

int Cma::disconnect(std::uint32_t n, Nanos now) {
  Id* id = find(n);
  if (!id || !id->ib_id) return EINVAL;
  if (id->qp) {
    QpAttr a;
    a.qp_state = QpState::kErr;
    const int ret = id->qp->modify_qp(id->qp_num, a, qp_attr_mask::kState);
    if (ret) return ret;
  }
  // Initiate a disconnect, or answer the peer's.
  if (ib_.send_dreq(id->ib_id, {}, now) != 0) ib_.send_drep(id->ib_id, {}, now);
  process_ib_events(now);
  return 0;
}

int Cma::establish(std::uint32_t n, Nanos now) {
  Id* id = find(n);
  if (!id || !id->ib_id) return EINVAL;
  const int ret = ib_.notify_established(id->ib_id, now);
  process_ib_events(now);
  return ret;
}

// --- I/O ------------------------------------------------------------------------------------

void Cma::receive(wire::ConstBytes mad, const GsiAddress& from, Nanos now) {
  ib_.receive(mad, from, now);
  process_ib_events(now);
}

void Cma::on_timer(Nanos now) {
  ib_.on_timer(now);
  process_ib_events(now);
}

bool Cma::get_event(std::uint32_t channel, CmaEvent& event) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || it->second.empty()) return false;
  event = it->second.front();
  it->second.pop_front();
  if (event.event == CmaEventType::kConnectRequest)
    if (Id* l = find(event.listen_id)) --l->pending;
  return true;
}

std::size_t Cma::pending_events(std::uint32_t channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.size();
}

}  // namespace uroce::cm
