/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The kernel's neighbour table of one interface, over rtnetlink: where a
// netdev device finds its peers' MACs. The kernel keeps the table with its
// own ARP and neighbour discovery, as it does for rxe (rxe_find_route and
// dst_neigh_lookup), so uroce never sends or answers either in this mode.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace uroce::config {

class KernelNeighbors {
 public:
  /// An IPv4 address in its first 4 bytes (`v4`), else an IPv6 one.
  struct Address {
    std::array<std::uint8_t, 16> bytes{};
    bool v4 = false;
  };
  using Mac = std::array<std::uint8_t, 6>;

  /// The table of `iface` in this network namespace; null with *error when
  /// there is no such interface or no rtnetlink socket.
  static std::unique_ptr<KernelNeighbors> open(const std::string& iface, std::string* error);
  ~KernelNeighbors();
  KernelNeighbors(const KernelNeighbors&) = delete;
  KernelNeighbors& operator=(const KernelNeighbors&) = delete;

  /// The address whose MAC frames to `ip` go to: the gateway of the
  /// kernel's route to it out of the interface, else `ip` itself (a peer
  /// on the link). One rtnetlink round trip.
  Address next_hop(const Address& ip);

  /// The MAC the kernel holds for `ip`'s next hop on the interface, when its entry is
  /// usable (NUD_VALID: reachable, stale, delayed, probing, permanent).
  /// A stale one is also sent for again, as the kernel would on a send to
  /// it. Any thread; one rtnetlink round trip.
  std::optional<Mac> lookup(const Address& ip);
  /// Has the kernel resolve `ip`'s next hop as a packet sent to it would
  /// (RTM_NEWNEIGH with NTF_USE: an ARP request or a neighbour
  /// solicitation, retried by the kernel's own timers); without
  /// CAP_NET_ADMIN, which that takes, by sending the peer an empty UDP
  /// datagram to its discard port. False with *error when neither could
  /// be done. Any thread.
  bool solicit(const Address& ip, std::string* error);

 private:
  KernelNeighbors(int fd, unsigned ifindex) : fd_(fd), ifindex_(ifindex) {}
  /// Sends one request and reads its answer into `reply` (at most `cap`
  /// bytes); the length read, or -errno (an NLMSG_ERROR's too).
  long transact(const void* req, std::size_t len, void* reply, std::size_t cap);

  std::mutex mu_;                          // one request at a time on the socket
  std::atomic<bool> use_datagram_{false};  // RTM_NEWNEIGH was refused
  int fd_;
  unsigned ifindex_;
  std::uint32_t seq_ = 0;
};

}  // namespace uroce::config
