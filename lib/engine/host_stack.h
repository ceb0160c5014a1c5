/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What a RoCE device needs of a host's network stack beside its transport:
// ARP (IPv4) and neighbour discovery (IPv6, RFC 4861) to find its peers and
// be found, ICMP echo so that ping works, and the neighbour table they
// fill. Its frames go out on the device's VLAN, tagged (PCP 0). Part of
// the engine's host side; engine thread, except lookup().

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/counters.h"
#include "engine/frame_path.h"
#include "engine/neighbors.h"
#include "port/port.h"
#include "wire/classify.h"
#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::engine {

class HostStack {
 public:
  /// `addresses` are the device's; the first of each family sources its
  /// ARP requests and neighbour solicitations. With `kernel_stack` the
  /// kernel answers for them (netdev mode), so this stack never does; with
  /// `kernel_neighbors` too, peers' MACs are the kernel's to find: this
  /// stack asks the kernel's table, and sends no request of its own.
  HostStack(std::vector<wire::IpAddr> addresses, std::uint16_t vlan_id, wire::MacAddr mac,
            port::Port& port, FramePath& path, EngineCounters& counters, bool kernel_stack = false,
            std::shared_ptr<NeighborSource> kernel_neighbors = nullptr);

  /// Whether `ip` is one of the device's addresses. Engine thread: the
  /// receive path asks for every packet, and the addresses change only
  /// inside locked().
  bool is_local(const wire::IpAddr& ip) const;
  /// The same from any thread.
  bool is_local_any_thread(const wire::IpAddr& ip) const;
  /// The device's addresses changed (a netdev device follows its
  /// interface's); same order as the constructor's. Engine thread.
  void set_addresses(std::vector<wire::IpAddr> addresses);
  const wire::MacAddr& mac() const { return mac_; }
  /// The device's VLAN, 0 for none: frames of other VLANs are not ours.
  std::uint16_t vlan_id() const { return vlan_id_; }

  /// Learns the sender; answers a request for one of our addresses.
  void on_arp(wire::ConstBytes frame);
  /// Learns from solicitations and advertisements; answers a solicitation
  /// for one of our addresses.
  void on_ndp(wire::ConstBytes frame);
  /// Answers an echo request to one of our addresses.
  void on_icmp(wire::ConstBytes frame, const wire::FrameClass& c);

  /// Asks for the MAC of `target`: ARP for IPv4, a Neighbor Solicitation
  /// to its solicited-node group for IPv6; or has the kernel ask.
  void send_request(const wire::IpAddr& target);
  /// The MAC of `ip` when it has been learnt (or the kernel has it). Any
  /// thread.
  std::optional<wire::MacAddr> lookup(const wire::IpAddr& ip) const {
    if (kernel_neighbors_) return kernel_neighbors_->lookup(ip);
    return neighbors_.lookup(ip);
  }

  /// Sends a frame the host side built (ARP, ND, ICMP, a CNP); an untagged
  /// one gets the device's VLAN tag after its addresses.
  void send_raw(wire::ConstBytes frame);

 private:
  /// Written by the engine thread holding addresses_mu_; read by it
  /// without, by other threads with it.
  std::vector<wire::IpAddr> addresses_;
  mutable std::mutex addresses_mu_;
  const std::uint16_t vlan_id_;
  const wire::MacAddr mac_;
  port::Port& port_;
  FramePath& path_;
  EngineCounters& counters_;
  /// Whether we answer ARP, ND and ping for the device's addresses: not in
  /// a program on a shared port, whose daemon answers for every program of
  /// the host, nor when the kernel has these addresses (netdev mode).
  const bool answers_;
  Neighbors neighbors_;
  const std::shared_ptr<NeighborSource> kernel_neighbors_;
};

}  // namespace uroce::engine
