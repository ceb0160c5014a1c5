/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Netdev mode on a packet socket (net_af_packet's, or the packet port's,
// drivers/packet): one kernel interface shared by the kernel and uroce. A packet socket sees every
// frame of its interface and takes none away from the kernel, so two things make the sharing work:
//  - a socket filter on the port's packet sockets, so uroce is handed only
//    what it acts on (RoCEv2, ARP and ICMPv6 to learn its peers' MACs, MAC
//    control frames, tagged frames) and never the kernel's own traffic;
//  - a UDP socket bound to port 4791 on the interface, its filter
//    dropping everything, so the kernel, which sees each RoCE packet too,
//    finds the port taken and answers none with ICMP port unreachable.

#include <memory>
#include <string>
#include <vector>

namespace uroce::port {

class NetdevShare {
 public:
  /// Filters the port's packet sockets on `iface` and holds UDP 4791 on
  /// it. `sockets` are the port's; empty: every packet socket this process
  /// has on `iface` (net_af_packet's, opened when EAL probed it, which the
  /// PMD does not hand out). Null with *error on failure.
  static std::unique_ptr<NetdevShare> open(const std::string& iface, std::string* error,
                                           const std::vector<int>& sockets = {});
  ~NetdevShare();
  NetdevShare(const NetdevShare&) = delete;
  NetdevShare& operator=(const NetdevShare&) = delete;

  /// How many packet sockets got the filter.
  std::size_t filtered() const { return filtered_; }

 private:
  NetdevShare() = default;
  std::vector<int> holds_;
  std::size_t filtered_ = 0;
};

}  // namespace uroce::port
