/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/engine.h"

#include <algorithm>
#include <thread>

#include "engine/burst_octets.h"
#include "engine/debug.h"
#include "log/log.h"
#include "wire/classify.h"
#include "wire/cnp.h"
#include "wire/ib_headers.h"
#include "wire/multicast.h"
#include "wire/roce_parser.h"
#include "wire/udp.h"

namespace uroce::engine {

using wire::ConstBytes;

Engine::Engine(port::Port& port, EngineConfig cfg)
    : port_(port),
      cfg_(std::move(cfg)),
      host_(cfg_.addresses, cfg_.vlan_id, port.mac(), port, *this, counters_, cfg_.kernel_stack,
            cfg_.kernel_neighbors),
      rx_(port, cfg_.rx_buffer, cfg_.pfc, port.mac(), *this, counters_),
      self_(port, host_, *this, counters_, cfg_.loopback_tap),
      ipv4_checksum_offload_(port.offloads_ipv4_checksum()),
      shared_(port.shared()),
      handoff_(cfg_.handoff),
      lcore_(cfg_.lcore) {
  backlog_.reserve(kMaxBacklog + port::kMaxTxBurst);
}

Engine::~Engine() {
  // Frames still waiting go back to the port's pool.
  for (port::TxFrame& f : backlog_) port_.tx_free(f);
  // The device stops every lcore before it ends any: what they gave back
  // is this queue's to release.
  if (handoff_ != nullptr) release_returned();
}

void Engine::attach(transport::Qp& qp) {
  const Holding hold(*this);
  attach_held(qp);
}

void Engine::attach_held(transport::Qp& qp) {
  transport::Qp*& slot = qps_[qp.qpn()];
  // A QP attached under the QPN already (another program's XRC target QP
  // this one received for) leaves the turn order with it: one QP a QPN.
  if (slot != nullptr && slot != &qp) {
    order_.erase(std::remove(order_.begin(), order_.end(), slot), order_.end());
    std::erase(ready_, qp.qpn());  // the new one is queued below, once
  }
  slot = &qp;
  order_.push_back(&qp);
  qp.set_doorbell(this);
  // The engine's marks start afresh: a QP attached again, or one that
  // joined a multicast group before it was attached, may carry old ones
  // (queued in a ready list it is no longer in, a deadline long gone).
  qp.set_tx_queued(false);
  qp.set_rescan_seen(false);
  qp.set_armed_at(0);
  wake(qp);
}

void Engine::detach(const transport::Qp& qp) {
  const Holding hold(*this);
  const auto it = qps_.find(qp.qpn());
  if (it != qps_.end() && it->second == &qp) {
    detach_held(it);
    return;
  }
  // Another QP holds its QPN (a program's QP of another program's XRC
  // target QP, whose QPN came back to this program): it leaves the turn
  // order alone.
  order_.erase(std::remove(order_.begin(), order_.end(), &qp), order_.end());
}

void Engine::detach(std::uint32_t qpn) {
  const Holding hold(*this);
  const auto it = qps_.find(qpn);
  if (it != qps_.end()) detach_held(it);
}

void Engine::detach_held(QpTable::iterator it) {
  const std::uint32_t qpn = it->first;
  order_.erase(std::remove(order_.begin(), order_.end(), it->second), order_.end());
  it->second->set_doorbell(nullptr);
  // Its QPN leaves the round robin too: a QP attached later under the
  // same QPN must not find itself queued twice.
  std::erase(ready_, qpn);
  qps_.erase(it);  // its wheel entries now find no QP and lapse
  mcast_.detach_all(qpn);
}

void Engine::attach_mcast(const wire::IpAddr& group, transport::Qp& qp) {
  const Holding hold(*this);
  mcast_.attach(group, qp);
}

bool Engine::detach_mcast(const wire::IpAddr& group, std::uint32_t qpn) {
  const Holding hold(*this);
  return mcast_.detach(group, qpn);
}

std::uint32_t Engine::poll(Nanos now) {
  const Holding hold(*this);
  std::uint32_t work = 0;
  run_once(now, &work);
  return work;
}

bool Engine::try_poll(Nanos now, std::uint32_t* work) {
  const Holding hold(*this, std::try_to_lock);
  if (!hold.owns()) return false;
  std::uint32_t w = 0;
  run_once(now, &w);
  if (work) *work = w;
  return true;
}

bool Engine::try_poll_completions_first(Nanos now, std::uint32_t* work) {
  const Holding hold(*this, std::try_to_lock);
  if (!hold.owns()) return false;
  run_once(now, work, true);
  return true;
}

bool Engine::try_send(Nanos now) {
  const Holding hold(*this, std::try_to_lock);
  if (!hold.owns()) return false;
  now = std::max(now, last_now_);
  last_now_ = now;
  if (flush_backlog()) {
    run_tx(now);
    tx_deferred_ = false;
  }
  return true;
}

void Engine::send_deferred() {
  // At the time of the turn that left it: the engine reads no clock of its
  // own (a simulator runs it on virtual time). While the port refuses
  // frames, it stays left for the next turn, as a turn's transmit half
  // waits for the backlog.
  if (tx_deferred_ && flush_backlog()) {
    tx_deferred_ = false;
    run_tx(last_now_);
  }
}

void Engine::run_once(Nanos now, std::uint32_t* work, bool completions_first) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  // Whoever runs the loop read the clock before taking the engine: an
  // older reading must not take time backwards (pause timers, buckets).
  now = std::max(now, last_now_);
  last_now_ = now;
  const std::uint16_t burst = std::min(cfg_.rx_burst, port::kRxBurst);
  std::uint32_t n = rx_.active() ? rx_.poll(now, burst) : receive_burst(now);
  if (handoff_ != nullptr) n += receive_handed(now);
  n += self_.run(now);
  if (cfg_.forwarder) n += cfg_.forwarder->pull(now);
  if (rx_.software_pfc()) {
    rx_.run_pfc(now);
    rx_.release_cnps([this](const wire::RoceRoute& r, std::uint32_t qp) { transmit_cnp(r, qp); });
  }
  run_timers(now);
  if (completions_first && n != 0 && !tx_deferred_ && !finishing_) {
    tx_deferred_ = true;
    *work = n;
    return;
  }
  tx_deferred_ = false;
  *work = n + (flush_backlog() ? run_tx(now) : 0);
}

std::uint32_t Engine::receive_burst(Nanos now) {
  port::RxFrame frames[port::kRxBurst];
  const std::uint16_t got = port_.rx_burst(frames, std::min(cfg_.rx_burst, port::kRxBurst));
  if (got == 0) return 0;
  counters_.inc(EngineCounter::kRxBursts);
  counters_.inc(EngineCounter::kRxFrames, got);
  counters_.inc(EngineCounter::kRxBytes, octets(frames, got));
  if (handoff_ != nullptr) {
    receive_sharded(frames, got, now);
    return got;
  }
  for (std::uint16_t i = 0; i < got; ++i) receive(frames[i].data, now);
  port_.rx_release(frames, got);
  return got;
}

void Engine::receive_sharded(port::RxFrame* frames, std::uint16_t n, Nanos now) {
  std::uint16_t mine = 0;  // frames received here, released at the end
  for (std::uint16_t i = 0; i < n; ++i) {
    const wire::FrameClass c = wire::classify(frames[i].data);
    const std::uint16_t to = handoff_->lcore_of(frames[i].data, c);
    if (to != lcore_) {
      if (handoff_->pass(lcore_, to, frames[i], c)) {
        counters_.inc(EngineCounter::kRxHandedOff);
        continue;
      }
      counters_.inc(EngineCounter::kRxHandoffDropped);
    } else {
      receive_classified(frames[i].data, c, now);
    }
    frames[mine++] = frames[i];
  }
  handoff_->flush(lcore_);
  port_.rx_release(frames, mine);
}

void Engine::release_returned() {
  handoff_->take_returned(lcore_, returned_);
  for (std::size_t done = 0; done < returned_.size();) {
    const auto k = static_cast<std::uint16_t>(std::min<std::size_t>(returned_.size() - done, 4096));
    port_.rx_release(returned_.data() + done, k);
    done += k;
  }
  returned_.clear();
}

std::uint32_t Engine::receive_handed(Nanos now) {
  release_returned();
  handoff_->take(lcore_, handed_);
  if (handed_.empty()) return 0;
  const auto n = static_cast<std::uint32_t>(handed_.size());
  counters_.inc(EngineCounter::kRxHandedIn, n);
  // Classified where they came in; the owner's own from here on.
  for (const HandedFrame& h : handed_) receive_classified(h.frame.data, h.cls, now);
  handoff_->give_back(lcore_, handed_);
  handoff_->flush(lcore_);
  return n;
}

void Engine::receive(ConstBytes frame, Nanos now) {
  const wire::FrameClass c = wire::classify(frame);
  if (handoff_ != nullptr) {
    // A frame the device sent itself, or one handed here: another lcore's
    // QP's gets a copy of its own (this one's buffer is not a port's).
    if (const std::uint16_t to = handoff_->lcore_of(frame, c); to != lcore_) {
      const bool passed = handoff_->pass_copy(lcore_, to, frame, c);
      counters_.inc(passed ? EngineCounter::kRxHandedOff : EngineCounter::kRxHandoffDropped);
      if (passed) handoff_->flush(lcore_);
      return;
    }
  }
  receive_classified(frame, c, now);
}

void Engine::receive_classified(ConstBytes frame, const wire::FrameClass& c, Nanos now) {
  if (!c.valid()) {
    counters_.drop(wire::DropReason::kShortFrame);
    return;
  }
  if (c.ether_type == wire::ether_type::kMacControl) {
    // PAUSE and PFC are the link's, whatever the VLAN.
    counters_.inc(EngineCounter::kRxMacControl);
    rx_.on_mac_control(frame, now);
    if (cfg_.forwarder) cfg_.forwarder->forward_all(frame);
    return;
  }
  // On a VLAN, only its frames are ours.
  if (c.vid != host_.vlan_id()) {
    counters_.inc(EngineCounter::kRxOther);
    return;
  }
  switch (c.ether_type) {
    case wire::ether_type::kArp:
      host_.on_arp(frame);
      if (cfg_.forwarder) cfg_.forwarder->forward_all(frame);
      return;
    case wire::ether_type::kIpv4:
      if (c.ip() && c.l4_proto == wire::ip_proto::kIcmp) {
        // On a shared port the daemon answers ping for the device.
        if (!shared_) host_.on_icmp(frame, c);
      } else {
        receive_roce(frame, c, now);
      }
      return;
    case wire::ether_type::kIpv6:
      if (c.ip() && c.l4_proto == wire::ip_proto::kIcmpv6) {
        host_.on_ndp(frame);
        if (cfg_.forwarder) cfg_.forwarder->forward_all(frame);
      } else {
        receive_roce(frame, c, now);
      }
      return;
    default:
      counters_.inc(EngineCounter::kRxOther);
      return;
  }
}

void Engine::receive_roce(ConstBytes frame, const wire::FrameClass& c, Nanos now) {
  wire::RocePacket pkt;
  const wire::DropReason r = wire::parse_roce_frame(frame, c, pkt);
  if (r != wire::DropReason::kNone) {
    // Other UDP and IP traffic is not ours to judge; RoCEv2 that fails a
    // check is counted under its reason.
    if (r == wire::DropReason::kNotRoceV2Port || r == wire::DropReason::kNotUdp) {
      counters_.inc(EngineCounter::kRxOther);
    } else {
      counters_.drop(r);
    }
    return;
  }
  counters_.inc(EngineCounter::kRxRoce);
  if (pkt.bth.dest_qp == wire::kMulticastQpn) {
    if (cfg_.forwarder) {
      // Each program's engine delivers to its own members.
      cfg_.forwarder->forward_all(frame);
      counters_.inc(EngineCounter::kRxMcast);
      return;
    }
    receive_mcast(pkt, now);
    return;
  }
  if (!host_.is_local(pkt.dst_ip)) {
    counters_.inc(EngineCounter::kRxNotOurIp);
    return;
  }
  const auto it = qps_.find(pkt.bth.dest_qp);
  transport::Qp* qp = it != qps_.end() ? it->second : receive_unknown(pkt, frame);
  if (qp == nullptr) return;
  UROCE_DEBUG_ASSERT(in_engine_thread());
  qp->receive(pkt, now);
  rearm(*qp);
  wake(*qp);
}

transport::Qp* Engine::receive_unknown(const wire::RocePacket& pkt, ConstBytes frame) {
  if (cfg_.forwarder && cfg_.forwarder->forward_roce(pkt, frame)) {
    counters_.inc(EngineCounter::kRxForwarded);
    return nullptr;
  }
  transport::Qp* adopted = cfg_.adopt_qp ? cfg_.adopt_qp(pkt) : nullptr;
  if (adopted == nullptr) {
    counters_.inc(EngineCounter::kRxUnknownQpn);
    return nullptr;
  }
  attach_held(*adopted);
  return adopted;
}

void Engine::receive_mcast(const wire::RocePacket& pkt, Nanos now) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  counters_.inc(EngineCounter::kRxMcast);
  // The group is the IP destination; a group nobody here joined is not
  // ours (rxe_rcv_mcast_pkt drops it too).
  const auto members = mcast_.members(pkt.dst_ip);
  if (members.empty()) {
    counters_.inc(EngineCounter::kRxMcastNoGroup);
    return;
  }
  // Every member its own copy: each checks state, P_Key and Q_Key and
  // takes a receive WQE of its own (rxe_rcv_mcast_pkt).
  for (transport::Qp* qp : members) {
    qp->receive(pkt, now);
    rearm(*qp);
    wake(*qp);
  }
  counters_.inc(EngineCounter::kRxMcastDelivered, members.size());
}

void Engine::set_addresses(std::vector<wire::IpAddr> addresses) {
  locked([&] { host_.set_addresses(std::move(addresses)); });
}

std::optional<wire::MacAddr> Engine::resolve(const wire::IpAddr& ip,
                                             std::chrono::milliseconds timeout) {
  if (auto mac = host_.lookup(ip)) return mac;
  if (timeout.count() == 0) return std::nullopt;  // not known; the caller may not wait
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto next_request = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() >= next_request) {
      locked([&] { host_.send_request(ip); });
      next_request = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
    try_poll(now_ns());
    if (auto mac = host_.lookup(ip)) {
      log::get().debug("resolved {} to {}", ip.to_string(), mac->to_string());
      return mac;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  log::get().warn("no {} answer from {} in {} ms", ip.is_v4() ? "ARP" : "neighbour discovery",
                  ip.to_string(), timeout.count());
  return std::nullopt;
}

std::optional<wire::RoceRoute> Engine::route_to(const wire::IpAddr& src, const wire::IpAddr& dst,
                                                std::chrono::milliseconds timeout) {
  wire::RoceRoute r;
  r.src_mac = host_.mac();
  r.src_ip = src;
  r.dst_ip = dst;
  if (wire::is_multicast(dst)) {
    r.dst_mac = wire::multicast_mac(dst);  // a group has no neighbour to ask
  } else if (host_.is_local_any_thread(dst)) {
    r.dst_mac = host_.mac();  // delivered inside the device (self_delivery.h)
  } else {
    const auto mac = resolve(dst, timeout);
    if (!mac) return std::nullopt;
    r.dst_mac = *mac;
  }
  return r;
}

void Engine::send_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  if (!rx_.hold_cnp(route, dest_qp)) transmit_cnp(route, dest_qp);
}

void Engine::transmit_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp) {
  std::uint8_t frame[128];
  const std::size_t n = wire::build_cnp_frame(frame, route, dest_qp, ++ip_id_);
  if (n != 0) host_.send_raw(ConstBytes(frame, n));
}

std::uint8_t Engine::priority_of(const transport::Qp& qp) const {
  if (qp.type() == transport::QpType::kUd) return cfg_.ud_priority;
  return route_priority(qp.attr().route);
}

void Engine::rearm(transport::Qp& qp) {
  // The wheel keeps each QP's earliest deadline; one that moved later is
  // found stale when it expires and armed again then.
  // (The deadline lives on the QP, not in a table by QPN: this runs for
  // every packet received.)
  const Nanos d = qp.next_deadline();
  if (d == 0) return;
  if (qp.armed_at() != 0 && qp.armed_at() <= d) return;
  qp.set_armed_at(d);
  timers_.schedule(qp.qpn(), d);
}

void Engine::run_timers(Nanos now) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  timers_.advance(now, [&](std::uint32_t qpn, Nanos when) {
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    transport::Qp& qp = *it->second;
    if (qp.armed_at() != when) return;  // stale entry
    qp.set_armed_at(0);
    const Nanos d = qp.next_deadline();
    if (d != 0 && d <= now) qp.on_timer(now);
    rearm(qp);
    wake(qp);
  });
}

void Engine::ring(transport::Qp& qp) {
  const std::lock_guard lock(doorbell_mu_);
  doorbells_.push_back(qp.qpn());
  doorbells_rung_.store(true, std::memory_order_release);
}

void Engine::take_doorbells() {
  // Each turn of a polling program comes here; the lock, two atomic
  // operations, only when a doorbell rang. One rung meanwhile is seen next
  // turn, as one rung just after the lock was.
  if (!doorbells_rung_.load(std::memory_order_acquire)) return;
  {
    const std::lock_guard lock(doorbell_mu_);
    rung_.swap(doorbells_);
    doorbells_rung_.store(false, std::memory_order_relaxed);
  }
  for (const std::uint32_t qpn : rung_) {
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) continue;
    // Answered before its turn looks at the queue: a post from now on
    // rings again.
    it->second->answer_doorbell();
    wake(*it->second);
  }
  rung_.clear();
}

void Engine::wake(transport::Qp& qp) {
  if (qp.tx_queued()) return;
  qp.set_tx_queued(true);
  ready_.push_back(qp.qpn());
}

void Engine::rescan(Nanos now) {
  if (now < rescan_at_) return;
  rescan_at_ = now + kTxRescanNs;
  for (transport::Qp* qp : order_) {
    // A QP whose doorbell rang is taken next turn; one seen unqueued once
    // may be a post between publishing its WQE and ringing. Found so by
    // two rescans in a row, 10 ms apart, its work was missed.
    if (qp->tx_queued() || qp->doorbell_rung() || !qp->has_work(now)) {
      qp->set_rescan_seen(false);
      continue;
    }
    if (!qp->rescan_seen()) {
      qp->set_rescan_seen(true);
      continue;
    }
    qp->set_rescan_seen(false);
    counters_.inc(EngineCounter::kTxSchedRescued);
    wake(*qp);
  }
}

std::uint32_t Engine::run_tx(Nanos now) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  take_doorbells();
  rescan(now);
  std::uint32_t sent = 0;
  const std::uint8_t paused = rx_.paused();
  // Each QP queued now has one turn at most; one that sent goes to the
  // back, and leaves the queue when its next turn finds nothing to send.
  for (std::size_t k = ready_.size(); k > 0 && !sink_.full(); --k) {
    const std::uint32_t qpn = ready_.front();
    ready_.pop_front();
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) continue;  // detached while it waited
    counters_.inc(EngineCounter::kTxSchedTurns);
    transport::Qp& qp = *it->second;
    if (!qp.has_work(now)) {
      qp.set_tx_queued(false);
      continue;
    }
    // A paused priority keeps its place: its QPs with work wait, the
    // others go on.
    if (paused != 0 && (paused >> priority_of(qp) & 1)) {
      ready_.push_back(qpn);
      continue;
    }
    sent += qp.transmit(sink_, cfg_.tx_budget_per_qp, now);
    rearm(qp);
    ready_.push_back(qpn);
  }
  sink_.flush();
  return sent;
}

void Engine::fail_all(Nanos now) {
  const Holding hold(*this);
  transport::QpAttr err;
  err.qp_state = transport::QpState::kErr;
  for (transport::Qp* qp : order_) {
    qp->modify(err, transport::attr_mask::kState, now);
    rearm(*qp);
  }
}

void Engine::send_frames(port::TxFrame* frames, std::uint16_t n) {
  UROCE_DEBUG_ASSERT(in_engine_thread());
  transmit(frames, n);
}

bool Engine::loops_back(const port::TxFrame& f) const {
  if (!self_.to_self(f)) return false;
  if (!shared_) return true;
  // Ours when the BTH names one of our QPs; the rest of what goes to the
  // device's addresses is the daemon's to deliver. QP 1 is the host's: a
  // MAD to the device's own address may be for another program's CM (a
  // listener of the host), which the daemon knows; so is a request for an
  // XRC target QP other programs share, which goes to the program with
  // the SRQ it names.
  const wire::FrameClass c = wire::classify(wire::ConstBytes(f.room.data(), f.length));
  const std::size_t bth = c.l4_offset() + wire::UdpHdr::kSize;
  if (c.l4_proto != wire::ip_proto::kUdp || f.length < bth + wire::kBthSize) return false;
  const std::uint32_t dest = wire::load_be24(f.room.data() + bth + 5);
  if (dest == wire::kGsiQpn) return false;
  const auto it = qps_.find(dest);
  return it != qps_.end() && !it->second->shared();
}

void Engine::transmit(port::TxFrame* frames, std::uint16_t n) {
  std::uint16_t m = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (loops_back(frames[i])) {
      self_.loop_back(frames[i]);
      continue;
    }
    // A group this device's QPs joined hears the device's own datagrams,
    // as rxe's do (the kernel loops multicast back to the sending host);
    // the wire gets the frame as well.
    if (to_joined_group(frames[i])) self_.copy_back(frames[i]);
    frames[m++] = frames[i];
  }
  n = m;
  if (n == 0) return;
  if (!backlog_.empty()) {
    // Keep the order: nothing overtakes what is already waiting; past the
    // backlog's bound (which the port's pool is sized for) a full queue
    // drops, like a congested link.
    for (std::uint16_t i = 0; i < n; ++i) {
      if (backlog_.size() < kMaxBacklog) {
        backlog_.push_back(frames[i]);
      } else {
        port_.tx_free(frames[i]);
        counters_.inc(EngineCounter::kTxDropped);
      }
    }
    flush_backlog();
    return;
  }
  const std::uint16_t sent = port_.tx_burst(frames, n);
  counters_.inc(EngineCounter::kTxFrames, sent);
  counters_.inc(EngineCounter::kTxBytes, octets(frames, sent));
  for (std::uint16_t i = sent; i < n; ++i) {
    if (backlog_.size() < kMaxBacklog) {
      backlog_.push_back(frames[i]);
    } else {
      // Past the backlog a full queue drops, like a congested link.
      port_.tx_free(frames[i]);
      counters_.inc(EngineCounter::kTxDropped);
    }
  }
}

bool Engine::to_joined_group(const port::TxFrame& f) {
  if (f.length < wire::EthHdr::kSize || (f.room[0] & 1) == 0) return false;  // not a group MAC
  const wire::FrameClass c = wire::classify(wire::ConstBytes(f.room.data(), f.length));
  // RoCEv2 datagrams only: the host stack's neighbour solicitations go
  // to multicast addresses too.
  if (!c.ip() || c.l4_proto != wire::ip_proto::kUdp) return false;
  const wire::IpAddr dst = c.ip_dst(wire::ConstBytes(f.room.data(), f.length));
  if (!wire::is_multicast(dst)) return false;
  counters_.inc(EngineCounter::kTxMcast);
  return mcast_.joined(dst);
}

bool Engine::flush_backlog() {
  while (!backlog_.empty()) {
    const auto n =
        static_cast<std::uint16_t>(std::min<std::size_t>(backlog_.size(), port::kMaxTxBurst));
    const std::uint16_t sent = port_.tx_burst(backlog_.data(), n);
    counters_.inc(EngineCounter::kTxFrames, sent);
    counters_.inc(EngineCounter::kTxBytes, octets(backlog_.data(), sent));
    backlog_.erase(backlog_.begin(), backlog_.begin() + sent);
    if (sent < n) return false;
  }
  return true;
}

bool Engine::Sink::transmit(const transport::TxPacket& pkt) {
  if (n_ == port::kTxBatch) return false;
  const wire::RouteTemplate& route = *pkt.route;
  const wire::OpcodeInfo& info = wire::opcode_info(pkt.bth.opcode);
  const auto len =
      static_cast<std::uint32_t>(wire::roce_frame_length(route, info, pkt.payload_len));
  port::TxFrame& f = batch_[n_];
  if (!e_.port_.tx_alloc(len, f)) return false;
  // IPv4 header checksums go to the port when it offers to compute them.
  const bool offload = e_.ipv4_checksum_offload_ && !route.ipv6();
  if (wire::build_roce_frame(f.room, route, pkt.bth, pkt.ext,
                             std::span(pkt.payload.data(), pkt.payload_segs), ++e_.ip_id_,
                             offload) != len) {
    e_.port_.tx_free(f);
    return false;
  }
  f.length = len;
  f.ipv4_checksum_offload = offload;
  f.l2_len = static_cast<std::uint8_t>(route.l3_offset());
  if (offload) e_.counters_.inc(EngineCounter::kTxIpv4ChecksumOffload);
  ++n_;
  return true;
}

void Engine::Sink::flush() {
  if (n_ == 0) return;
  e_.transmit(batch_, n_);
  n_ = 0;
}

}  // namespace uroce::engine
