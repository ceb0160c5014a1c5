/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/sim_net.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "wire/classify.h"
#include "wire/roce_parser.h"

namespace uroce::test {

using namespace uroce::transport;

SimHost::SimHost(SimNet& net, std::uint8_t id, std::uint32_t cq_depth)
    : net_(net), id_(id), send_cq_(cq_depth), recv_cq_(cq_depth) {
  mac_ = {{0x02, 0, 0, 0, 0, id}};
  if (net.routes_.ipv6) {
    ip_.bytes = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};  // fd00::N
  } else {
    ip_ = wire::IpAddr::from_v4(0x0A000000u | id);
  }
}

const wire::RoceRoute& SimHost::route_to(const SimHost& peer) const { return routes_.at(peer.id_); }

Qp& SimHost::create_qp(QpType type, std::uint32_t depth, transport::XrcDomain* xrc) {
  return create(type, depth, xrc, nullptr, nullptr, 0);
}

Qp& SimHost::create_shared_target(transport::XrcDomain* xrc, transport::SharedResponder* shared,
                                  transport::SharedResponderLock* lock, std::uint32_t qpn) {
  return create(QpType::kXrcTgt, 256, xrc, shared, lock, qpn);
}

Qp& SimHost::create(QpType type, std::uint32_t depth, transport::XrcDomain* xrc,
                    transport::SharedResponder* shared, transport::SharedResponderLock* lock,
                    std::uint32_t qpn) {
  QpInit init;
  init.type = type;
  // QPNs spread out, as a real device's are unpredictable.
  init.qpn = qpn != 0 ? qpn : (net_.next_qpn_ = (net_.next_qpn_ * 7919 + 0x1F3) & 0xFFFFFF) | 0x100;
  init.shared = shared;
  init.shared_lock = lock;
  init.max_send_wr = depth;
  init.max_recv_wr = depth;
  init.max_send_sge = 4;
  init.max_recv_sge = 4;
  init.max_inline_data = 128;
  init.send_cq = &send_cq_;
  init.recv_cq = &recv_cq_;
  init.memory = &memory_;
  init.xrc = xrc;
  init.selective_repeat = selective_repeat_;
  qps_.push_back(std::make_unique<Qp>(init));
  by_qpn_.emplace(init.qpn, qps_.back().get());  // the first Qp of a QPN
  return *qps_.back();
}

bool SimHost::transmit(const TxPacket& pkt) {
  if (link_free_ > net_.now_) return false;  // the wire is busy
  // The product's own builder, as the engine calls it: the payload
  // gathered from the QP's registered memory.
  std::vector<std::uint8_t> frame(
      wire::roce_frame_length(*pkt.route, wire::opcode_info(pkt.bth.opcode), pkt.payload_len));
  if (wire::build_roce_frame(frame, *pkt.route, pkt.bth, pkt.ext,
                             std::span(pkt.payload.data(), pkt.payload_segs),
                             ++ip_id_) != frame.size())
    throw std::logic_error("the transport produced a packet lib/wire cannot build");
  net_.send_frame(*this, std::move(frame));
  return true;
}

SimNet::SimNet(std::uint64_t seed, std::uint64_t link_bps, SimRoutes routes)
    : seed_(seed), rng_(seed), link_bps_(link_bps), routes_(routes) {}

SimHost& SimNet::add_host(std::uint32_t cq_depth) {
  const auto id = static_cast<std::uint8_t>(hosts_.size() + 1);
  hosts_.push_back(std::make_unique<SimHost>(*this, id, cq_depth));
  SimHost& h = *hosts_.back();
  for (auto& other : hosts_) {
    if (other.get() == &h) continue;
    for (auto [from, to] : {std::pair{&h, other.get()}, std::pair{other.get(), &h}}) {
      wire::RoceRoute r;
      r.src_mac = from->mac_;
      r.dst_mac = to->mac_;
      r.src_ip = from->ip_;
      r.dst_ip = to->ip_;
      if (routes_.ipv6) r.flow_label = 0x12340u | from->id_;
      if (routes_.vlan) {
        r.vlan = true;
        r.vid = 100;
        r.pcp = 3;
      }
      from->routes_[to->id_] = r;
    }
  }
  return h;
}

void SimNet::set_faults(const SimHost& from, const SimHost& to, const FaultModel& f) {
  links_.erase({from.id_, to.id_});
  links_.emplace(std::pair{from.id_, to.id_},
                 Link{f, port::Impairment(f, link_seed(from.id_, to.id_))});
}

void SimNet::set_faults_all(const FaultModel& f) {
  default_faults_ = f;
  links_.clear();
}

SimNet::Link& SimNet::link(std::uint8_t from, std::uint8_t to) {
  const auto it = links_.find({from, to});
  if (it != links_.end()) return it->second;
  return links_
      .emplace(std::pair{from, to},
               Link{default_faults_, port::Impairment(default_faults_, link_seed(from, to))})
      .first->second;
}

void SimNet::connect(Qp& a, SimHost& ha, Qp& b, SimHost& hb, const QpAttr& params) {
  using namespace attr_mask;
  auto bring_up = [&](Qp& q, SimHost& self, Qp& peer, SimHost& peer_host, std::uint32_t sq_psn,
                      std::uint32_t rq_psn) {
    QpAttr at = params;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    if (q.modify(at, kState | kPkeyIndex | kPort | kAccessFlags, now_) != 0)
      throw std::logic_error("INIT refused");
    at.qp_state = QpState::kRtr;
    at.route = self.route_to(peer_host);
    at.route.udp_sport = wire::roce_udp_sport(q.qpn(), peer.qpn());
    at.dest_qp_num = peer.qpn();
    at.rq_psn = rq_psn;
    // UC takes neither the RC responder's nor the RC requester's
    // attributes (IBA 11.2.4.2): the state machine refuses them. An XRC
    // initiator takes the requester's, a target the responder's.
    const bool responds = q.type() == QpType::kRc || q.type() == QpType::kXrcTgt;
    const bool requests = q.type() == QpType::kRc || q.type() == QpType::kXrcIni;
    if (q.modify(at,
                 kState | kAv | kPathMtu | kDestQpn | kRqPsn |
                     (responds ? kMaxDestRdAtomic | kMinRnrTimer : 0),
                 now_) != 0)
      throw std::logic_error("RTR refused");
    at.qp_state = QpState::kRts;
    at.sq_psn = sq_psn;
    if (q.modify(at,
                 kState | kSqPsn |
                     (requests ? kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic : 0) |
                     (q.type() == QpType::kXrcTgt ? kTimeout : 0),
                 now_) != 0)
      throw std::logic_error("RTS refused");
  };
  // Initial PSNs anywhere in the space, near the wrap included.
  const auto psn_a = static_cast<std::uint32_t>(rng_()) & 0xFFFFFF;
  const auto psn_b = static_cast<std::uint32_t>(rng_()) & 0xFFFFFF;
  bring_up(a, ha, b, hb, psn_a, psn_b);
  bring_up(b, hb, a, ha, psn_b, psn_a);
}

void SimNet::activate_ud(Qp& qp, std::uint32_t qkey) {
  using namespace attr_mask;
  QpAttr at;
  at.qkey = qkey;
  at.qp_state = QpState::kInit;
  qp.modify(at, kState | kPkeyIndex | kPort | kQkey, now_);
  at.qp_state = QpState::kRtr;
  qp.modify(at, kState, now_);
  at.qp_state = QpState::kRts;
  at.sq_psn = static_cast<std::uint32_t>(rng_()) & 0xFFFFFF;
  qp.modify(at, kState | kSqPsn, now_);
}

namespace {

// UROCE_SIM_TRACE=1 prints every frame's fate, for debugging a seed.
const bool kTrace = std::getenv("UROCE_SIM_TRACE") != nullptr;

void trace(Nanos now, const char* what, const std::vector<std::uint8_t>& frame) {
  if (!kTrace) return;
  const wire::FrameClass fc = wire::classify(frame);
  const std::size_t at = fc.l4_offset() + 8;  // the BTH, past UDP
  if (!fc.ip() || frame.size() < at + 12) return;
  const wire::Bth bth = wire::Bth::parse(frame.data() + at);
  const auto& info = wire::opcode_info(bth.opcode);
  std::printf("%12llu %-9s %-32s qp %06x psn %06x%s", static_cast<unsigned long long>(now), what,
              std::string(info.name).c_str(), bth.dest_qp, bth.psn.value(),
              bth.ack_req ? " A" : "");
  if (info.has(wire::ExtHeader::kAeth))
    std::printf(" aeth %02x msn %u", frame[at + info.offset_of(wire::ExtHeader::kAeth)],
                wire::load_be24(frame.data() + at + 1 + info.offset_of(wire::ExtHeader::kAeth)));
  std::printf("\n");
}

}  // namespace

void SimNet::send_frame(SimHost& from, std::vector<std::uint8_t> frame) {
  // Serialisation at the link rate: the next frame waits for this one.
  const Nanos wire_ns = (frame.size() + 24) * 8 * 1'000'000'000ull / link_bps_;
  from.link_free_ = now_ + std::max<Nanos>(wire_ns, 1);
  ++stats_.frames;
  stats_.bytes += frame.size();

  // Route by destination IP, as the fabric would.
  const wire::FrameClass fc = wire::classify(frame);
  if (!fc.ip()) throw std::logic_error("the builder produced a frame without an IP header");
  stats_.ipv6 += fc.ip_version == 6;
  stats_.tagged += fc.tagged;
  const wire::IpAddr dst = fc.ip_dst(frame);
  std::uint8_t to = 0;
  for (auto& h : hosts_) {
    if (h->ip_ == dst) to = h->id_;
  }
  if (to == 0) return;
  Link& l = link(from.id_, to);
  const FaultModel& f = l.faults;
  const port::ImpairmentDecision d = l.impairment.decide();
  const Nanos at = now_ + wire_ns + l.impairment.delay();
  if ((f.cut_at != 0 && now_ >= f.cut_at) || d.drop) {
    trace(now_, "DROP", frame);
    ++stats_.dropped;
    return;
  }
  // The flip lands past the UDP header: the ICRC must catch it.
  if (d.corrupt && l.impairment.corrupt(frame)) ++stats_.corrupted;
  Nanos extra = 0;
  if (d.reorder) {
    extra = l.impairment.uniform(f.reorder_window);
    ++stats_.reordered;
  }
  if (d.duplicate) {
    ++stats_.duplicated;
    arrivals_.push({at + l.impairment.uniform(f.reorder_window), seq_++, to, frame});
  }
  trace(now_, extra ? "send-late" : "send", frame);
  arrivals_.push({at + extra, seq_++, to, std::move(frame)});
}

void SimNet::deliver(const Arrival& a) {
  SimHost& h = *hosts_[a.host - 1];
  wire::RocePacket pkt;
  if (wire::parse_roce_frame(a.frame, pkt) != wire::DropReason::kNone) {
    trace(now_, "REJECT", a.frame);
    ++stats_.rejected;
    return;
  }
  const auto it = h.by_qpn_.find(pkt.bth.dest_qp);
  if (it == h.by_qpn_.end()) {
    ++stats_.rejected;
    return;
  }
  Qp* qp = it->second;
  if (pkt.info->is_request() && wire::transport_of(pkt.bth.opcode) == wire::Transport::kXrc) {
    const auto r = h.xrc_srqs_.find(pkt.ext.xrc_srqn);
    if (r != h.xrc_srqs_.end() && r->second->qpn() == qp->qpn()) qp = r->second;
  }
  qp->receive(pkt, now_);
}

bool SimNet::step(Nanos limit) {
  // 1. Every host whose wire is free sends one packet from the next QP
  // with work, round robin, until no host can send at this instant.
  for (bool sent = true; sent;) {
    sent = false;
    for (auto& h : hosts_) {
      if (h->link_free_ > now_ || h->qps_.empty()) continue;
      for (std::size_t k = 0; k < h->qps_.size(); ++k) {
        Qp& q = *h->qps_[(h->rr_ + k) % h->qps_.size()];
        if (!q.has_work(now_) && q.state() != QpState::kErr) continue;
        if (q.transmit(*h, 1, now_) > 0) {
          h->rr_ = (h->rr_ + k + 1) % h->qps_.size();
          sent = true;
          break;
        }
      }
    }
  }
  // 2. The next instant anything happens: an arrival, a timer, or a wire
  // becoming free for a QP with work.
  Nanos next = limit + 1;
  if (!arrivals_.empty()) next = std::min(next, arrivals_.top().at);
  for (auto& h : hosts_) {
    for (auto& q : h->qps_) {
      const Nanos d = q->next_deadline();
      if (d != 0) next = std::min(next, std::max(d, now_));
      if (q->has_work(now_) && h->link_free_ > now_) next = std::min(next, h->link_free_);
    }
  }
  if (next > limit) {
    now_ = limit;
    return false;
  }
  now_ = std::max(now_, next);
  // 3. Deliver what arrives now, then run the timers that are due.
  while (!arrivals_.empty() && arrivals_.top().at <= now_) {
    const Arrival a = arrivals_.top();
    arrivals_.pop();
    deliver(a);
  }
  for (auto& h : hosts_) {
    for (auto& q : h->qps_) {
      const Nanos d = q->next_deadline();
      if (d != 0 && d <= now_) q->on_timer(now_);
    }
  }
  return true;
}

bool SimNet::run_until(const std::function<bool()>& done, Nanos limit) {
  while (!done()) {
    if (now_ >= limit || !step(limit)) return done();
  }
  return true;
}

void SimNet::run_for(Nanos span) {
  const Nanos end = now_ + span;
  while (step(end)) {
  }
}

}  // namespace uroce::test
