/* SPDX-License-Identifier: BSD-3-Clause */
#include "cm/cm_net.h"

#include <algorithm>
#include <stdexcept>

#include "cm/mad_samples.h"
#include "wire/roce_parser.h"
#include "wire/udp.h"

namespace uroce::test {

CmHost::CmHost(CmNet& net, int index, const wire::IpAddr& ip, std::uint64_t seed,
               const cm::CmaDevice& device)
    : net_(net), index_(index), ip_(ip), random_(seed) {
  mac_ = {{0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(index + 1)}};
  cma_ = std::make_unique<cm::Cma>(device, *this, random_);
}

void CmHost::send_mad(const cm::OutMad& mad) { net_.transmit(*this, mad); }

CmNet::CmNet(std::uint64_t seed) : rng_(seed), seed_(seed) {}

CmHost& CmNet::add_host(const std::string& ip, cm::CmaDevice device) {
  const auto addr = wire::IpAddr::parse(ip);
  if (!addr) throw std::invalid_argument("add_host: bad address " + ip);
  const int i = static_cast<int>(hosts_.size());
  device.gids.insert(device.gids.begin(), *addr);
  if (!device.node_guid)
    device.node_guid = 0x0002C90300A00000ull + static_cast<std::uint64_t>(i + 1);
  hosts_.push_back(std::make_unique<CmHost>(*this, i, *addr, seed_ * 1000 + i, device));
  return *hosts_.back();
}

void CmNet::transmit(CmHost& from, const cm::OutMad& out) {
  int to = -1;
  for (const auto& h : hosts_) {
    const auto& gids = h->cma().device().gids;
    if (std::find(gids.begin(), gids.end(), out.to.remote_ip) != gids.end()) to = h->index();
  }
  wire::RoceRoute route;
  route.src_mac = from.mac();
  route.dst_mac = to >= 0 ? hosts_[to]->mac() : wire::MacAddr{};
  route.src_ip = out.to.local_ip;
  route.dst_ip = out.to.remote_ip;
  route.dscp = out.to.traffic_class >> 2;
  route.hop_limit = out.to.hop_limit;
  route.flow_label = out.to.flow_label;
  route.udp_sport = wire::roce_udp_sport(1, 1);
  CapturedMad c;
  c.at = now_;
  c.from = from.index();
  c.frame = gsi_frame(route, out.mad);
  c.mad.assign(out.mad.begin(), out.mad.end());
  captured_.push_back(c);
  if (to < 0) return;

  cm::Mad decoded;
  cm::MadError err{};
  if (drop_if && cm::decode(out.mad, decoded, err) && drop_if(from, decoded)) {
    ++dropped_;
    return;
  }
  std::uniform_real_distribution<double> u(0, 1);
  const CmFaults& f = faults_;
  if ((f.cut_at && now_ >= f.cut_at) || u(rng_) < f.drop) {
    ++dropped_;
    return;
  }
  const int copies = u(rng_) < f.duplicate ? 2 : 1;
  if (copies == 2) ++duplicated_;
  for (int i = 0; i < copies; ++i) {
    Nanos at = now_ + f.delay;
    if (u(rng_) < f.reorder) {
      ++reordered_;
      at += std::uniform_int_distribution<Nanos>(1, f.reorder_window)(rng_);
    }
    arrivals_.push({at, seq_++, to, c.frame});
  }
}

void CmNet::deliver(const Arrival& a) {
  if (faults_.cut_at && a.at >= faults_.cut_at) {
    ++dropped_;
    return;
  }
  wire::RocePacket p;
  if (wire::parse_roce_frame(a.frame, p) != wire::DropReason::kNone)
    throw std::logic_error("CmNet: a MAD frame does not parse");
  // What the engine's GSI QP will check before handing a MAD up.
  if (p.bth.opcode != 0x64 || p.bth.dest_qp != 1 || p.ext.deth.qkey != wire::kGsiQkey)
    throw std::logic_error("CmNet: not a GSI datagram");
  cm::GsiAddress from;
  from.local_ip = p.dst_ip;
  from.remote_ip = p.src_ip;
  from.remote_mac = wire::EthHdr::parse(p.frame.data()).src;
  from.remote_qpn = p.ext.deth.src_qp;
  from.pkey = p.bth.pkey;
  from.traffic_class = static_cast<std::uint8_t>(p.dscp << 2 | static_cast<unsigned>(p.ecn));
  from.hop_limit = p.hop_limit;
  from.flow_label = p.flow_label;
  hosts_[a.to]->cma().receive(p.payload, from, now_);
}

void CmNet::inject(int to, const std::vector<std::uint8_t>& mad, const cm::GsiAddress& from) {
  hosts_[to]->cma().receive(mad, from, now_);
  run_apps();
}

void CmNet::run_apps() {
  for (const auto& h : hosts_)
    if (h->app) h->app(*h);
}

bool CmNet::step(Nanos limit) {
  Nanos next = arrivals_.empty() ? 0 : arrivals_.top().at;
  for (const auto& h : hosts_) {
    const Nanos d = h->cma().next_deadline();
    if (d && (!next || d < next)) next = d;
  }
  while (!wakes_.empty() && *wakes_.begin() <= now_) wakes_.erase(wakes_.begin());
  if (!wakes_.empty() && (!next || *wakes_.begin() < next)) next = *wakes_.begin();
  if (!next || next > limit) return false;
  if (next > now_) now_ = next;
  while (!arrivals_.empty() && arrivals_.top().at <= now_) {
    const Arrival a = arrivals_.top();
    arrivals_.pop();
    deliver(a);
    run_apps();
  }
  for (const auto& h : hosts_) {
    const Nanos d = h->cma().next_deadline();
    if (d && d <= now_) h->cma().on_timer(now_);
  }
  run_apps();
  return true;
}

bool CmNet::run_until(const std::function<bool()>& done, Nanos limit) {
  run_apps();
  while (!done()) {
    if (!step(limit)) {
      if (now_ < limit) now_ = limit;
      return done();
    }
  }
  return true;
}

void CmNet::run_for(Nanos span) {
  const Nanos limit = now_ + span;
  run_until([] { return false; }, limit);
}

}  // namespace uroce::test
