/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/host_stack.h"

#include <algorithm>
#include <cstring>

#include "wire/arp.h"
#include "wire/icmp.h"
#include "wire/ndp.h"

namespace uroce::engine {

using wire::ConstBytes;

HostStack::HostStack(std::vector<wire::IpAddr> addresses, std::uint16_t vlan_id, wire::MacAddr mac,
                     port::Port& port, FramePath& path, EngineCounters& counters, bool kernel_stack,
                     std::shared_ptr<NeighborSource> kernel_neighbors)
    : addresses_(std::move(addresses)),
      vlan_id_(vlan_id),
      mac_(mac),
      port_(port),
      path_(path),
      counters_(counters),
      answers_(!port.shared() && !kernel_stack),
      kernel_neighbors_(std::move(kernel_neighbors)) {}

bool HostStack::is_local(const wire::IpAddr& ip) const {
  return std::find(addresses_.begin(), addresses_.end(), ip) != addresses_.end();
}

bool HostStack::is_local_any_thread(const wire::IpAddr& ip) const {
  std::lock_guard lock(addresses_mu_);
  return is_local(ip);
}

void HostStack::set_addresses(std::vector<wire::IpAddr> addresses) {
  std::lock_guard lock(addresses_mu_);
  addresses_ = std::move(addresses);
}

void HostStack::on_arp(ConstBytes frame) {
  counters_.inc(EngineCounter::kRxArp);
  wire::ArpPacket arp;
  if (!wire::parse_arp_frame(frame, arp)) return;
  if (arp.sender_ip != 0) neighbors_.learn(wire::IpAddr::from_v4(arp.sender_ip), arp.sender_mac);
  if (!answers_ || arp.op != wire::ArpOp::kRequest ||
      !is_local(wire::IpAddr::from_v4(arp.target_ip)))
    return;
  std::uint8_t reply[wire::kMinFrameSize];
  if (wire::build_arp_reply(reply, arp, mac_, arp.target_ip) == 0) return;
  send_raw(reply);
  counters_.inc(EngineCounter::kTxArpReply);
}

void HostStack::on_ndp(ConstBytes frame) {
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
  if (!answers_ || !is_local(nd.target)) return;
  std::uint8_t reply[128];
  const std::size_t n = wire::build_neighbor_advertisement(reply, nd, mac_, nd.target);
  if (n == 0) return;
  send_raw(ConstBytes(reply, n));
  counters_.inc(EngineCounter::kTxNeighborAdvert);
}

void HostStack::on_icmp(ConstBytes frame, const wire::FrameClass& c) {
  std::uint8_t reply[2048];
  if (frame.size() > sizeof(reply)) return;
  // Only echo requests to one of our addresses are answered.
  if (!answers_ || !is_local(c.ip_dst(frame))) return;
  const std::size_t n = wire::build_icmp_echo_reply(reply, frame);
  if (n == 0) return;
  counters_.inc(EngineCounter::kRxIcmpEcho);
  send_raw(ConstBytes(reply, n));
}

void HostStack::send_request(const wire::IpAddr& target) {
  if (kernel_neighbors_) {
    if (kernel_neighbors_->solicit(target)) counters_.inc(EngineCounter::kKernelNeighborSolicit);
    return;
  }
  const bool v4 = target.is_v4();
  const auto src = std::find_if(addresses_.begin(), addresses_.end(),
                                [v4](const wire::IpAddr& a) { return a.is_v4() == v4; });
  if (src == addresses_.end()) return;
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

void HostStack::send_raw(ConstBytes frame) {
  const wire::FrameClass c = wire::classify(frame);
  if (!c.valid()) return;
  const bool tag = vlan_id_ != 0 && !c.tagged;
  const auto len = static_cast<std::uint32_t>(frame.size() + (tag ? wire::VlanTag::kSize : 0));
  port::TxFrame f;
  if (!port_.tx_alloc(len, f)) {
    counters_.inc(EngineCounter::kTxDropped);
    return;
  }
  std::uint8_t* out = f.room.data();
  if (tag) {
    std::memcpy(out, frame.data(), 12);  // the addresses
    wire::store_be16(out + 12, wire::ether_type::kVlan);
    wire::VlanTag{0, false, vlan_id_, c.ether_type}.write(out + wire::EthHdr::kSize);
    std::memcpy(out + wire::EthHdr::kSize + wire::VlanTag::kSize, frame.data() + c.l2_len,
                frame.size() - c.l2_len);
  } else {
    std::memcpy(out, frame.data(), frame.size());
  }
  f.length = len;
  path_.transmit(&f, 1);
}

}  // namespace uroce::engine
