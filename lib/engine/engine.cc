/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "log/log.h"
#include "pfc/classify.h"
#include "wire/arp.h"
#include "wire/cnp.h"
#include "wire/icmp.h"
#include "wire/icrc.h"
#include "wire/mac_control.h"
#include "wire/ndp.h"
#include "wire/roce_parser.h"

namespace uroce::engine {

using wire::ConstBytes;

namespace {
std::string priority_list(std::uint8_t mask) {
  std::string s;
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    if (!(mask & (1u << p))) continue;
    if (!s.empty()) s += ",";
    s += std::to_string(p);
  }
  return s;
}
}  // namespace

Engine::Engine(port::Port& port, EngineConfig cfg)
    : port_(port),
      cfg_(std::move(cfg)),
      mac_(port.mac()),
      ipv4_checksum_offload_(port.offloads_ipv4_checksum()) {
  if (cfg_.pfc.enabled) {
    const std::uint8_t lossless = cfg_.pfc.xoff.lossless;
    if (port_.enable_hardware_pfc(lossless, cfg_.pfc.xoff.quanta) == 0) {
      hardware_pfc_ = true;
      log::get().info("PFC on priorities {} runs in the NIC", priority_list(lossless));
    } else {
      pfc::XoffConfig x = cfg_.pfc.xoff;
      x.speed_mbps = port_.speed_mbps() != 0 ? port_.speed_mbps() : pfc::kDefaultSpeedMbps;
      pause_.emplace(lossless, x.speed_mbps, cfg_.pfc.watchdog, pfc_counters_);
      xoff_.emplace(x, pfc_counters_);
      log::get().info("PFC on priorities {} runs in uroce (the port has no PFC offload)",
                      priority_list(lossless));
    }
  }
  buffered_rx_ = pause_.has_value() || cfg_.rx_buffer.rate_mbps > 0;
}

Engine::~Engine() {
  // Frames still waiting go back to the port's pool.
  for (port::TxFrame& f : backlog_) port_.tx_free(f);
  for (Buffered& b : rx_buffer_) port_.rx_release(&b.frame, 1);
}

void Engine::attach(transport::Qp& qp) {
  std::lock_guard lock(mu_);
  qps_[qp.qpn()] = &qp;
  order_.push_back(&qp);
}

void Engine::detach(std::uint32_t qpn) {
  std::lock_guard lock(mu_);
  const auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  order_.erase(std::remove(order_.begin(), order_.end(), it->second), order_.end());
  qps_.erase(it);
  armed_.erase(qpn);  // its wheel entries now find no QP and lapse
}

bool Engine::is_local(const wire::IpAddr& ip) const {
  return std::find(cfg_.addresses.begin(), cfg_.addresses.end(), ip) != cfg_.addresses.end();
}

std::uint32_t Engine::poll(Nanos now) {
  std::lock_guard lock(mu_);
  std::uint32_t work = 0;
  run_once(now, &work);
  return work;
}

bool Engine::try_poll(Nanos now, std::uint32_t* work) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  std::uint32_t w = 0;
  run_once(now, &w);
  if (work) *work = w;
  return true;
}

void Engine::run_once(Nanos now, std::uint32_t* work) {
  // Whoever runs the loop read the clock before taking the engine: an
  // older reading must not take time backwards (pause timers, buckets).
  now = std::max(now, last_now_);
  last_now_ = now;
  port::RxFrame frames[port::kRxBurst];
  std::uint32_t n = 0;
  if (buffered_rx_) {
    // Empty the port into the buffer, as a NIC fills its packet buffer
    // whatever the host does; the transport then takes what it can. A full
    // buffer leaves the rest in the port's ring (lossless as long as the
    // ring holds), unless this is the slow receiver of the tests, whose
    // buffer drops like a NIC's.
    for (unsigned k = 0; k < kRxBufferBursts; ++k) {
      if (!drop_when_full() && (rx_buffer_bytes_ >= cfg_.rx_buffer.bytes ||
                                rx_buffer_.size() + port::kRxBurst > kMaxBufferedFrames))
        break;
      const std::uint16_t got = port_.rx_burst(frames, port::kRxBurst);
      if (got == 0) break;
      counters_.inc(EngineCounter::kRxBursts);
      counters_.inc(EngineCounter::kRxFrames, got);
      buffer_rx(frames, got, now);
      n += got;
      if (got < port::kRxBurst) break;
    }
    n += drain_rx_buffer(now);
  } else {
    const std::uint16_t got = port_.rx_burst(frames, std::min(cfg_.rx_burst, port::kRxBurst));
    if (got > 0) {
      counters_.inc(EngineCounter::kRxBursts);
      counters_.inc(EngineCounter::kRxFrames, got);
    }
    for (std::uint16_t i = 0; i < got; ++i) receive(frames[i].data, now);
    if (got > 0) port_.rx_release(frames, got);
    n = got;
  }
  n += run_loopback(now);
  if (pause_) run_pfc(now);
  run_timers(now);
  *work = n + (flush_backlog() ? run_tx(now) : 0);
}

std::uint32_t Engine::run_loopback(Nanos now) {
  if (loopback_.empty()) return 0;
  // What these frames cause to be looped back (ACKs, responses) waits for
  // the next iteration, as it would on a wire.
  std::deque<std::vector<std::uint8_t>> batch;
  batch.swap(loopback_);
  for (auto& f : batch) {
    receive(ConstBytes(f.data(), f.size()), now);
    if (spare_frames_.size() < kSpareFrames) spare_frames_.push_back(std::move(f));
  }
  counters_.inc(EngineCounter::kRxLoopback, batch.size());
  return static_cast<std::uint32_t>(batch.size());
}

bool Engine::to_self(const port::TxFrame& f) const {
  // Our MAC and one of our addresses: another program on the same port
  // (same MAC, its own address) is reached through the port.
  const std::uint8_t* p = f.room.data();
  if (f.length < wire::EthHdr::kSize || std::memcmp(p, mac_.bytes.data(), 6) != 0) return false;
  std::size_t l3 = wire::EthHdr::kSize;
  std::uint16_t type = wire::load_be16(p + 12);
  if (type == wire::ether_type::kVlan && f.length >= l3 + 4) {
    type = wire::load_be16(p + l3 + 2);
    l3 += 4;
  }
  if (type == wire::ether_type::kIpv4 && f.length >= l3 + 20)
    return is_local(wire::IpAddr::from_v4_bytes(p + l3 + 16));
  if (type == wire::ether_type::kIpv6 && f.length >= l3 + 40)
    return is_local(wire::IpAddr::from_v6_bytes(p + l3 + 24));
  return false;
}

void Engine::loop_back(port::TxFrame& f) {
  if (loopback_.size() >= kMaxLoopback) {
    // As a congested link would: the transport's retries recover.
    counters_.inc(EngineCounter::kTxDropped);
    port_.tx_free(f);
    return;
  }
  std::vector<std::uint8_t> copy;
  if (!spare_frames_.empty()) {
    copy = std::move(spare_frames_.back());
    spare_frames_.pop_back();
  }
  copy.assign(f.room.data(), f.room.data() + f.length);
  if (f.ipv4_checksum_offload && f.length >= std::size_t{f.l2_len} + wire::Ipv4Hdr::kMinSize) {
    // The port would have filled the header checksum in; here no port does.
    std::uint8_t* ip = copy.data() + f.l2_len;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::inet_checksum(ip, wire::Ipv4Hdr::kMinSize));
  }
  port_.tx_free(f);
  loopback_.push_back(std::move(copy));
  counters_.inc(EngineCounter::kTxLoopback);
}

void Engine::buffer_rx(port::RxFrame* frames, std::uint16_t n, Nanos now) {
  for (std::uint16_t i = 0; i < n; ++i) {
    const ConstBytes f = frames[i].data;
    const bool mac_control = f.size() >= wire::EthHdr::kSize &&
                             wire::load_be16(f.data() + 12) == wire::ether_type::kMacControl;
    if (mac_control) {
      // The MAC acts on PAUSE and PFC at once; they never wait in line.
      receive(f, now);
      port_.rx_release(&frames[i], 1);
      continue;
    }
    // Each frame holds at least its share of the buffer, so that many
    // small frames fill it (and send XOFF) before they run out the mbufs.
    const auto charge = static_cast<std::uint32_t>(
        std::max<std::uint64_t>(f.size(), cfg_.rx_buffer.bytes / kMaxBufferedFrames));
    const std::uint8_t prio = pfc::frame_priority(wire::classify(f));
    // Lossy priorities may fill the buffer up to xoff only: the rest is
    // the lossless priorities' headroom.
    std::uint64_t limit = cfg_.rx_buffer.bytes;
    if (xoff_ && !(cfg_.pfc.xoff.lossless >> prio & 1))
      limit = std::min(limit, cfg_.pfc.xoff.xoff_bytes);
    if (drop_when_full() &&
        (rx_buffer_bytes_ + charge > limit || rx_buffer_.size() >= kMaxBufferedFrames)) {
      counters_.inc(EngineCounter::kRxBufferDropped);
      port_.rx_release(&frames[i], 1);
      continue;
    }
    rx_buffer_.push_back({frames[i], charge, prio});
    rx_buffer_bytes_ += charge;
    rx_backlog_[prio] += charge;
  }
}

std::uint32_t Engine::drain_rx_buffer(Nanos now) {
  const std::uint32_t rate = cfg_.rx_buffer.rate_mbps;
  if (rate != 0) {
    // A token bucket in bytes: rate_mbps / 8000 bytes a nanosecond.
    if (rx_tokens_at_ != 0 && now > rx_tokens_at_)
      rx_tokens_ = std::min(kRxTokenBurst,
                            rx_tokens_ + static_cast<double>(now - rx_tokens_at_) * rate / 8000.0);
    rx_tokens_at_ = now;
  }
  port::RxFrame done[port::kRxBurst];
  std::uint16_t n = 0;
  const std::uint16_t budget = std::min(cfg_.rx_burst, port::kRxBurst);
  while (!rx_buffer_.empty() && n < budget) {
    const Buffered b = rx_buffer_.front();
    const std::size_t size = b.frame.data.size();
    if (rate != 0) {
      if (rx_tokens_ < static_cast<double>(size)) break;
      rx_tokens_ -= static_cast<double>(size);
    }
    rx_buffer_.pop_front();
    rx_buffer_bytes_ -= b.charge;
    rx_backlog_[b.priority] -= b.charge;
    receive(b.frame.data, now);
    done[n++] = b.frame;
  }
  if (n > 0) port_.rx_release(done, n);
  return n;
}

void Engine::run_pfc(Nanos now) {
  paused_ = pause_->paused(now);
  if (!held_cnps_.empty()) release_cnps();
  if (const std::uint8_t storms = pause_->take_new_storms()) {
    for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
      const auto bit = static_cast<std::uint8_t>(1u << p);
      if (!(storms & bit)) continue;
      // Logged once per priority; the counter keeps the rest.
      if (storms_logged_ & bit) continue;
      storms_logged_ |= bit;
      log::get().warn(
          "PFC storm on priority {}: paused for {} ms without a break; its pauses are "
          "ignored for {} ms (pfc_storm_detected counts every one)",
          p, cfg_.pfc.watchdog.detection_ns / 1'000'000,
          cfg_.pfc.watchdog.restoration_ns / 1'000'000);
    }
  }
  if (const auto req = xoff_->update(rx_backlog_, now)) {
    if (pfc_pending_) {
      pfc::merge(*pfc_pending_, *req);
    } else {
      pfc_pending_ = *req;
    }
  }
  if (pfc_pending_) send_pfc();
}

void Engine::send_pfc() {
  port::TxFrame f;
  if (!port_.tx_alloc(wire::kMinFrameSize, f)) return;  // tried again next time
  f.length = static_cast<std::uint32_t>(
      wire::build_pfc_frame(f.room, mac_, pfc_pending_->class_enable, pfc_pending_->class_time));
  if (port_.tx_burst(&f, 1) == 1) {
    counters_.inc(EngineCounter::kTxFrames);
    pfc_pending_.reset();
  } else {
    port_.tx_free(f);
  }
}

void Engine::on_mac_control(ConstBytes frame, Nanos now) {
  wire::MacControlFrame f;
  if (wire::parse_mac_control_frame(frame, f) != wire::MacControlError::kNone) {
    counters_.inc(EngineCounter::kRxMacControlDropped);
    return;
  }
  // Without PFC in uroce, pauses are the NIC's business or nobody's.
  if (pause_) pause_->on_frame(f, now);
}

std::uint8_t Engine::priority_of(const transport::Qp& qp) const {
  if (qp.type() == transport::QpType::kUd) return cfg_.ud_priority;
  const wire::RoceRoute& r = qp.attr().route;
  return r.vlan ? r.pcp : pfc::dscp_priority(r.dscp);
}

void Engine::receive(ConstBytes frame, Nanos now) {
  if (frame.size() < wire::EthHdr::kSize) {
    counters_.drop(wire::DropReason::kShortFrame);
    return;
  }
  std::uint16_t type = wire::load_be16(frame.data() + 12);
  std::size_t l3 = wire::EthHdr::kSize;
  std::uint16_t vid = 0;
  if (type == wire::ether_type::kVlan && frame.size() >= l3 + 4) {
    vid = wire::load_be16(frame.data() + l3) & 0x0FFF;
    type = wire::load_be16(frame.data() + l3 + 2);
    l3 += 4;
  }
  // On a VLAN, only its frames are ours; PAUSE and PFC are the link's.
  if (vid != cfg_.vlan_id && type != wire::ether_type::kMacControl) {
    counters_.inc(EngineCounter::kRxOther);
    return;
  }
  switch (type) {
    case wire::ether_type::kArp:
      counters_.inc(EngineCounter::kRxArp);
      on_arp(frame);
      return;
    case wire::ether_type::kMacControl:
      counters_.inc(EngineCounter::kRxMacControl);
      on_mac_control(frame, now);
      return;
    case wire::ether_type::kIpv4:
      if (frame.size() >= l3 + 20 && frame[l3 + 9] == wire::ip_proto::kIcmp) {
        on_icmp(frame);
        return;
      }
      break;
    case wire::ether_type::kIpv6:
      if (frame.size() >= l3 + 40 && frame[l3 + 6] == wire::ip_proto::kIcmpv6) {
        on_ndp(frame);
        return;
      }
      break;
    default:
      counters_.inc(EngineCounter::kRxOther);
      return;
  }
  wire::RocePacket pkt;
  const wire::DropReason r = wire::parse_roce_frame(frame, pkt);
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
  if (!is_local(pkt.dst_ip)) {
    counters_.inc(EngineCounter::kRxNotOurIp);
    return;
  }
  const auto it = qps_.find(pkt.bth.dest_qp);
  if (it == qps_.end()) {
    counters_.inc(EngineCounter::kRxUnknownQpn);
    return;
  }
  it->second->receive(pkt, now);
  rearm(*it->second);
}

void Engine::on_arp(ConstBytes frame) {
  wire::ArpPacket arp;
  if (!wire::parse_arp_frame(frame, arp)) return;
  if (arp.sender_ip != 0) neighbors_.learn(wire::IpAddr::from_v4(arp.sender_ip), arp.sender_mac);
  if (arp.op != wire::ArpOp::kRequest || !is_local(wire::IpAddr::from_v4(arp.target_ip))) return;
  std::uint8_t reply[wire::kMinFrameSize];
  if (wire::build_arp_reply(reply, arp, mac_, arp.target_ip) == 0) return;
  send_raw(reply);
  counters_.inc(EngineCounter::kTxArpReply);
}

void Engine::on_ndp(ConstBytes frame) {
  wire::NdpPacket nd;
  if (!wire::parse_ndp_frame(frame, nd)) {
    counters_.inc(EngineCounter::kRxOther);  // other ICMPv6, or not well formed
    return;
  }
  counters_.inc(EngineCounter::kRxNdp);
  if (nd.type == wire::icmpv6_type::kNeighborAdvertisement) {
    if (nd.has_link_addr) neighbors_.learn(nd.target, nd.link_addr);
    return;
  }
  // A solicitation teaches us the solicitor's address too (RFC 4861 7.2.3).
  if (nd.has_link_addr && nd.src != wire::IpAddr{}) neighbors_.learn(nd.src, nd.link_addr);
  if (!is_local(nd.target)) return;
  std::uint8_t reply[128];
  const std::size_t n = wire::build_neighbor_advertisement(reply, nd, mac_, nd.target);
  if (n == 0) return;
  send_raw(ConstBytes(reply, n));
  counters_.inc(EngineCounter::kTxNeighborAdvert);
}

void Engine::on_icmp(ConstBytes frame) {
  std::uint8_t reply[2048];
  if (frame.size() > sizeof(reply)) return;
  // Only echo requests to one of our addresses are answered.
  const std::size_t l3 = wire::load_be16(frame.data() + 12) == wire::ether_type::kVlan ? 18 : 14;
  if (!is_local(wire::IpAddr::from_v4_bytes(frame.data() + l3 + 16))) return;
  const std::size_t n = wire::build_icmp_echo_reply(reply, frame);
  if (n == 0) return;
  counters_.inc(EngineCounter::kRxIcmpEcho);
  send_raw(ConstBytes(reply, n));
}

void Engine::send_raw(ConstBytes frame) {
  // On a VLAN, an untagged frame gets the tag after its addresses.
  const bool tag = cfg_.vlan_id != 0 && frame.size() >= wire::EthHdr::kSize &&
                   wire::load_be16(frame.data() + 12) != wire::ether_type::kVlan;
  const auto len = static_cast<std::uint32_t>(frame.size() + (tag ? wire::VlanTag::kSize : 0));
  port::TxFrame f;
  if (!port_.tx_alloc(len, f)) {
    counters_.inc(EngineCounter::kTxDropped);
    return;
  }
  if (tag) {
    std::memcpy(f.room.data(), frame.data(), 12);
    wire::store_be16(f.room.data() + 12, wire::ether_type::kVlan);
    wire::VlanTag{0, false, cfg_.vlan_id, wire::load_be16(frame.data() + 12)}.write(f.room.data() +
                                                                                    14);
    std::memcpy(f.room.data() + 18, frame.data() + 14, frame.size() - 14);
  } else {
    std::memcpy(f.room.data(), frame.data(), frame.size());
  }
  f.length = len;
  send_to_port(&f, 1);
}

namespace {
std::uint8_t cnp_priority(const wire::RoceRoute& r) {
  return r.vlan ? r.pcp : pfc::dscp_priority(r.dscp);
}
}  // namespace

void Engine::send_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp) {
  if (paused_ >> cnp_priority(route) & 1) {
    // 802.1Qbb: a paused priority sends nothing, CNPs included. A CNP
    // says "slow down" about now, so only the latest per peer QP waits;
    // the list is bounded, since a storm may hold it for a while.
    counters_.inc(EngineCounter::kTxCnpHeld);
    for (HeldCnp& h : held_cnps_) {
      if (h.dest_qp == dest_qp && h.route.dst_ip == route.dst_ip) {
        h.route = route;
        return;
      }
    }
    if (held_cnps_.size() < kMaxHeldCnps) held_cnps_.push_back({route, dest_qp});
    return;
  }
  transmit_cnp(route, dest_qp);
}

void Engine::transmit_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp) {
  std::uint8_t frame[128];
  const std::size_t n = wire::build_cnp_frame(frame, route, dest_qp, ++ip_id_);
  if (n != 0) send_raw(ConstBytes(frame, n));
}

void Engine::release_cnps() {
  auto keep = held_cnps_.begin();
  for (const HeldCnp& h : held_cnps_) {
    if (paused_ >> cnp_priority(h.route) & 1) {
      *keep++ = h;
    } else {
      transmit_cnp(h.route, h.dest_qp);
    }
  }
  held_cnps_.erase(keep, held_cnps_.end());
}

void Engine::send_arp_request(const wire::IpAddr& target) {
  const bool v4 = target.is_v4();
  const auto src = std::find_if(cfg_.addresses.begin(), cfg_.addresses.end(),
                                [v4](const wire::IpAddr& a) { return a.is_v4() == v4; });
  if (src == cfg_.addresses.end()) return;
  if (!v4) {
    // IPv6: a Neighbor Solicitation to the target's solicited-node group.
    std::uint8_t ns[128];
    const std::size_t n = wire::build_neighbor_solicitation(ns, mac_, *src, target);
    if (n == 0) return;
    send_raw(ConstBytes(ns, n));
    counters_.inc(EngineCounter::kTxNeighborSolicit);
    return;
  }
  std::uint8_t req[wire::kMinFrameSize];
  wire::build_arp_request(req, mac_, src->v4(), target.v4());
  send_raw(req);
  counters_.inc(EngineCounter::kTxArpRequest);
}

std::optional<wire::MacAddr> Engine::resolve(const wire::IpAddr& ip,
                                             std::chrono::milliseconds timeout) {
  if (auto mac = neighbors_.lookup(ip)) return mac;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto next_request = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() >= next_request) {
      std::lock_guard lock(mu_);
      send_arp_request(ip);
      next_request = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
    try_poll(now_ns());
    if (auto mac = neighbors_.lookup(ip)) {
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
  r.src_mac = mac_;
  r.src_ip = src;
  r.dst_ip = dst;
  if (is_local(dst)) {
    r.dst_mac = mac_;  // delivered inside the device (send_to_port)
  } else {
    const auto mac = resolve(dst, timeout);
    if (!mac) return std::nullopt;
    r.dst_mac = *mac;
  }
  return r;
}

void Engine::rearm(transport::Qp& qp) {
  // The wheel keeps each QP's earliest deadline; one that moved later is
  // found stale when it expires and armed again then.
  const Nanos d = qp.next_deadline();
  if (d == 0) return;
  const auto it = armed_.find(qp.qpn());
  if (it != armed_.end() && it->second <= d) return;
  armed_[qp.qpn()] = d;
  timers_.schedule(qp.qpn(), d);
}

void Engine::run_timers(Nanos now) {
  timers_.advance(now, [&](std::uint32_t qpn, Nanos when) {
    const auto armed = armed_.find(qpn);
    if (armed == armed_.end() || armed->second != when) return;  // stale entry
    armed_.erase(armed);
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    transport::Qp& qp = *it->second;
    const Nanos d = qp.next_deadline();
    if (d != 0 && d <= now) qp.on_timer(now);
    rearm(qp);
  });
}

std::uint32_t Engine::run_tx(Nanos now) {
  std::uint32_t sent = 0;
  const std::size_t n = order_.size();
  for (std::size_t k = 0; k < n && !sink_.full(); ++k) {
    transport::Qp* qp = order_[(rr_ + k) % n];
    // A paused priority keeps its place: its QPs wait, the others go on.
    if (paused_ != 0 && (paused_ >> priority_of(*qp) & 1)) continue;
    if (!qp->has_work(now)) continue;
    sent += qp->transmit(sink_, cfg_.tx_budget_per_qp, now);
    rearm(*qp);
  }
  if (n > 0) rr_ = (rr_ + 1) % n;
  sink_.flush();
  return sent;
}

void Engine::send_to_port(port::TxFrame* frames, std::uint16_t n) {
  // Frames to the device itself never reach the wire: they come back in
  // through the receive path, every check included, as an RDMA NIC loops
  // back traffic between two of its own QPs.
  std::uint16_t m = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (to_self(frames[i])) {
      loop_back(frames[i]);
    } else {
      frames[m++] = frames[i];
    }
  }
  n = m;
  if (n == 0) return;
  if (!backlog_.empty()) {
    // Keep the order: nothing overtakes what is already waiting.
    backlog_.insert(backlog_.end(), frames, frames + n);
    flush_backlog();
    return;
  }
  const std::uint16_t sent = port_.tx_burst(frames, n);
  counters_.inc(EngineCounter::kTxFrames, sent);
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

bool Engine::flush_backlog() {
  while (!backlog_.empty()) {
    const auto n =
        static_cast<std::uint16_t>(std::min<std::size_t>(backlog_.size(), port::kMaxTxBurst));
    const std::uint16_t sent = port_.tx_burst(backlog_.data(), n);
    counters_.inc(EngineCounter::kTxFrames, sent);
    backlog_.erase(backlog_.begin(), backlog_.begin() + sent);
    if (sent < n) return false;
  }
  return true;
}

bool Engine::Sink::transmit(const transport::TxPacket& pkt) {
  if (n_ == port::kTxBatch) return false;
  const wire::RoceRoute& route = *pkt.route;
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
  e_.send_to_port(batch_, n_);
  n_ = 0;
}

}  // namespace uroce::engine
