/* SPDX-License-Identifier: BSD-3-Clause */
#include "cm/cma_peers.h"

#include <algorithm>

namespace uroce::test {

using namespace uroce::cm;

int FakeQp::modify_qp(std::uint32_t qpn, const QpAttr& attr, unsigned mask) {
  if (qpn != qpn_) return EINVAL;
  if (fail_at && attr.qp_state == *fail_at) return EINVAL;
  steps_.push_back({attr, mask, net_.now()});
  state_ = attr.qp_state;
  return 0;
}

std::optional<Nanos> FakeQp::reached(QpState s) const {
  for (const Step& st : steps_)
    if (st.attr.qp_state == s) return st.at;
  return std::nullopt;
}

Peer::Peer(CmNet& net, CmHost& host)
    : net_(net), host_(host), next_qpn_(0x100 * (host.index() + 1) + 0x11) {
  host_.app = [this](CmHost&) { pump(); };
}

std::uint32_t Peer::listen(PortSpace ps, std::uint16_t port, int backlog,
                           std::optional<wire::IpAddr> ip) {
  const QpType type = ps == PortSpace::kUdp ? QpType::kUd : QpType::kRc;
  const std::uint32_t id = cma().create_id(0, ps, type, 0x11);
  // The any address of the host's family: 0.0.0.0 is AF-only, as in the kernel.
  const wire::IpAddr any = host_.ip().is_v4() ? wire::IpAddr::from_v4(0) : wire::IpAddr{};
  if (cma().bind(id, ip.value_or(any), port) != 0) return 0;
  if (cma().listen(id, backlog) != 0) return 0;
  return id;
}

std::uint32_t Peer::connect(PortSpace ps, const wire::IpAddr& dst, std::uint16_t port) {
  const QpType type = ps == PortSpace::kUdp ? QpType::kUd : QpType::kRc;
  const std::uint32_t id = cma().create_id(0, ps, type, 0x22);
  if (cma().resolve_addr(id, std::nullopt, dst, port) != 0) return 0;
  ResolvedAddr r;
  r.src_ip = host_.ip();
  r.hop_limit = 64;
  cma().addr_resolved(id, r);
  pump();
  return id;
}

FakeQp* Peer::qp(std::uint32_t id) {
  auto it = qps_.find(id);
  return it == qps_.end() ? nullptr : it->second.get();
}

std::size_t Peer::count(std::uint32_t id, CmaEventType type) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return 0;
  return static_cast<std::size_t>(std::count_if(
      it->second.begin(), it->second.end(), [type](const CmaEvent& e) { return e.event == type; }));
}

const std::vector<CmaEvent>& Peer::events(std::uint32_t id) const {
  static const std::vector<CmaEvent> kNone;
  auto it = by_id_.find(id);
  return it == by_id_.end() ? kNone : it->second;
}

std::uint32_t Peer::first_request() const {
  for (const CmaEvent& e : log_)
    if (e.event == CmaEventType::kConnectRequest) return e.id;
  return 0;
}

void Peer::accept(std::uint32_t id) {
  ConnParam p = param;
  p.private_data = private_data;
  if (attach_qps) {
    auto& q = qps_[id] = std::make_unique<FakeQp>(net_, new_qpn());
    cma().attach_qp(id, q->qpn(), false, *q);
  } else {
    p.qp_num = new_qpn();
  }
  cma().accept(id, p, net_.now());
}

void Peer::pump() {
  for (auto it = to_accept_.begin(); it != to_accept_.end();) {
    if (it->first <= net_.now()) {
      accept(it->second);
      it = to_accept_.erase(it);
    } else {
      ++it;
    }
  }
  CmaEvent e;
  while (cma().get_event(0, e)) {
    log_.push_back(e);
    by_id_[e.id].push_back(e);
    react(e);
  }
}

void Peer::react(const CmaEvent& e) {
  const Nanos now = net_.now();
  switch (e.event) {
    case CmaEventType::kAddrResolved:
      cma().resolve_route(e.id);
      break;
    case CmaEventType::kRouteResolved: {
      ConnParam p = param;
      p.private_data = private_data;
      if (attach_qps) {
        auto& q = qps_[e.id] = std::make_unique<FakeQp>(net_, new_qpn());
        cma().attach_qp(e.id, q->qpn(), false, *q);
      } else {
        p.qp_num = new_qpn();
      }
      cma().connect(e.id, p, now);
      break;
    }
    case CmaEventType::kConnectRequest:
      if (!accept_requests) {
        cma().reject(e.id, reject_data, now);
      } else if (accept_delay) {
        to_accept_.push_back({now + accept_delay, e.id});
        net_.wake_at(now + accept_delay);
      } else {
        accept(e.id);
      }
      break;
    case CmaEventType::kConnectResponse:
      // librdmacm: RTR and RTS of its own, then ACCEPT, which sends the RTU.
      cma().accept(e.id, std::nullopt, now);
      break;
    case CmaEventType::kDisconnected:
      // rping and ucmatose answer a disconnect with one of their own.
      cma().disconnect(e.id, now);
      break;
    case CmaEventType::kUnreachable:
    case CmaEventType::kRejected:
    case CmaEventType::kConnectError:
      if (destroy_on_failure) cma().destroy_id(e.id, now);
      break;
    default:
      break;
  }
}

}  // namespace uroce::test
