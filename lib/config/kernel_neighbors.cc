/* SPDX-License-Identifier: BSD-3-Clause */
#include "config/kernel_neighbors.h"

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uroce::config {

namespace {

constexpr std::size_t kHdr = NLMSG_ALIGN(sizeof(nlmsghdr));
constexpr std::uint16_t kDiscardPort = 9;
constexpr std::size_t kNdm = NLMSG_ALIGN(sizeof(ndmsg));
// The kernel's NUD_VALID (include/net/neighbour.h, not in the uapi): the
// states in which it sends to the entry's address.
constexpr std::uint16_t kNudValid =
    NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY;

/// A neighbour request: the message header, the ndmsg and NDA_DST.
struct Request {
  alignas(nlmsghdr) std::uint8_t buf[kHdr + kNdm + RTA_SPACE(16)]{};
  std::size_t len = 0;

  Request(std::uint16_t type, std::uint16_t flags, unsigned ifindex,
          const KernelNeighbors::Address& ip, std::uint8_t ndm_flags) {
    const std::size_t alen = ip.v4 ? 4 : 16;
    len = kHdr + kNdm + RTA_SPACE(alen);
    nlmsghdr h{};
    h.nlmsg_len = static_cast<std::uint32_t>(len);
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    std::memcpy(buf, &h, sizeof(h));
    ndmsg ndm{};
    ndm.ndm_family = ip.v4 ? AF_INET : AF_INET6;
    ndm.ndm_ifindex = static_cast<int>(ifindex);
    ndm.ndm_flags = ndm_flags;
    std::memcpy(buf + kHdr, &ndm, sizeof(ndm));
    rtattr a{};
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(alen));
    a.rta_type = NDA_DST;
    std::memcpy(buf + kHdr + kNdm, &a, sizeof(a));
    std::memcpy(buf + kHdr + kNdm + RTA_LENGTH(0), ip.bytes.data(), alen);
  }
  void set_seq(std::uint32_t seq) { std::memcpy(buf + offsetof(nlmsghdr, nlmsg_seq), &seq, 4); }
};

// A route lookup for one destination out of one interface (RTM_GETROUTE
// with RTA_DST and RTA_OIF), as `ip route get ADDR oif IFACE`.
struct RouteRequest {
  alignas(nlmsghdr)
      std::uint8_t buf[kHdr + NLMSG_ALIGN(sizeof(rtmsg)) + RTA_SPACE(16) + RTA_SPACE(4)]{};
  std::size_t len = 0;

  RouteRequest(unsigned ifindex, const KernelNeighbors::Address& ip, std::uint32_t seq) {
    const std::size_t alen = ip.v4 ? 4 : 16;
    constexpr std::size_t kRtm = NLMSG_ALIGN(sizeof(rtmsg));
    len = kHdr + kRtm + RTA_SPACE(alen) + RTA_SPACE(4);
    nlmsghdr h{};
    h.nlmsg_len = static_cast<std::uint32_t>(len);
    h.nlmsg_type = RTM_GETROUTE;
    h.nlmsg_flags = NLM_F_REQUEST;
    h.nlmsg_seq = seq;
    std::memcpy(buf, &h, sizeof(h));
    rtmsg rtm{};
    rtm.rtm_family = ip.v4 ? AF_INET : AF_INET6;
    rtm.rtm_dst_len = static_cast<unsigned char>(alen * 8);
    std::memcpy(buf + kHdr, &rtm, sizeof(rtm));
    std::size_t off = kHdr + kRtm;
    rtattr a{};
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(alen));
    a.rta_type = RTA_DST;
    std::memcpy(buf + off, &a, sizeof(a));
    std::memcpy(buf + off + RTA_LENGTH(0), ip.bytes.data(), alen);
    off += RTA_SPACE(alen);
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(4));
    a.rta_type = RTA_OIF;
    const auto oif = static_cast<std::uint32_t>(ifindex);
    std::memcpy(buf + off, &a, sizeof(a));
    std::memcpy(buf + off + RTA_LENGTH(0), &oif, 4);
  }
};

}  // namespace

KernelNeighbors::Address KernelNeighbors::next_hop(const Address& ip) {
  alignas(nlmsghdr) std::uint8_t reply[2048];
  std::lock_guard lock(mu_);
  const RouteRequest req(ifindex_, ip, ++seq_);
  const long n = transact(req.buf, req.len, reply, sizeof(reply));
  nlmsghdr h;
  std::memcpy(&h, reply, sizeof(h));
  constexpr std::size_t kRtm = NLMSG_ALIGN(sizeof(rtmsg));
  // No route out of the interface (or no answer): the address itself, as
  // for a peer on the link.
  if (n <= 0 || h.nlmsg_type != RTM_NEWROUTE || static_cast<std::size_t>(n) < kHdr + kRtm)
    return ip;
  const std::size_t alen = ip.v4 ? 4 : 16;
  for (std::size_t off = kHdr + kRtm; off + sizeof(rtattr) <= static_cast<std::size_t>(n);) {
    rtattr a;
    std::memcpy(&a, reply + off, sizeof(a));
    if (a.rta_len < sizeof(rtattr) || off + a.rta_len > static_cast<std::size_t>(n)) break;
    if (a.rta_type == RTA_GATEWAY && a.rta_len == RTA_LENGTH(alen)) {
      Address gw;
      gw.v4 = ip.v4;
      std::memcpy(gw.bytes.data(), reply + off + RTA_LENGTH(0), alen);
      return gw;
    }
    off += RTA_ALIGN(a.rta_len);
  }
  return ip;  // on the link
}

std::unique_ptr<KernelNeighbors> KernelNeighbors::open(const std::string& iface,
                                                       std::string* error) {
  const unsigned ifindex = iface.empty() ? 0 : if_nametoindex(iface.c_str());
  if (ifindex == 0) {
    *error = "no interface '" + iface + "'";
    return nullptr;
  }
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    *error = std::string("rtnetlink socket: ") + std::strerror(errno);
    return nullptr;
  }
  // An answer the kernel never sends (a lost reply) must not hang a
  // resolve: it has its own deadline.
  const timeval tv{0, 200'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    *error = std::string("rtnetlink bind: ") + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<KernelNeighbors>(new KernelNeighbors(fd, ifindex));
}

KernelNeighbors::~KernelNeighbors() { close(fd_); }

long KernelNeighbors::transact(const void* req, std::size_t len, void* reply, std::size_t cap) {
  std::uint32_t seq;
  std::memcpy(&seq, static_cast<const std::uint8_t*>(req) + offsetof(nlmsghdr, nlmsg_seq), 4);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_, req, len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0)
    return -errno;
  for (;;) {
    sockaddr_nl from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n =
        recvfrom(fd_, reply, cap, MSG_TRUNC, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN ? -ETIMEDOUT : -errno;
    }
    if (from.nl_pid != 0 || static_cast<std::size_t>(n) < sizeof(nlmsghdr)) continue;
    if (static_cast<std::size_t>(n) > cap) return -EMSGSIZE;
    nlmsghdr h;
    std::memcpy(&h, reply, sizeof(h));
    // An earlier request's late answer (its reader gave up): not ours.
    if (h.nlmsg_seq != seq || h.nlmsg_len > static_cast<std::size_t>(n)) continue;
    if (h.nlmsg_type == NLMSG_ERROR) {
      nlmsgerr e;
      if (h.nlmsg_len < kHdr + sizeof(e)) return -EPROTO;
      std::memcpy(&e, static_cast<std::uint8_t*>(reply) + kHdr, sizeof(e));
      return e.error;  // 0: an acknowledgement
    }
    return static_cast<long>(h.nlmsg_len);
  }
}

std::optional<KernelNeighbors::Mac> KernelNeighbors::lookup(const Address& peer) {
  // A peer behind a router is reached at the router's MAC, as the
  // kernel's own packets to it (rxe: the route's neighbour).
  const Address ip = next_hop(peer);
  Request req(RTM_GETNEIGH, NLM_F_REQUEST, ifindex_, ip, 0);
  alignas(nlmsghdr) std::uint8_t reply[1024];
  bool stale = false;
  std::optional<Mac> mac;
  {
    std::lock_guard lock(mu_);
    req.set_seq(++seq_);
    const long n = transact(req.buf, req.len, reply, sizeof(reply));
    nlmsghdr h;
    std::memcpy(&h, reply, sizeof(h));
    if (n <= 0 || h.nlmsg_type != RTM_NEWNEIGH || static_cast<std::size_t>(n) < kHdr + kNdm)
      return std::nullopt;  // ENOENT: the kernel has no entry
    ndmsg ndm;
    std::memcpy(&ndm, reply + kHdr, sizeof(ndm));
    if (!(ndm.ndm_state & kNudValid)) return std::nullopt;  // incomplete or failed
    // The answer must be about what was asked (a forked child shares the
    // socket, and its sequence numbers).
    if (ndm.ndm_family != (ip.v4 ? AF_INET : AF_INET6) ||
        ndm.ndm_ifindex != static_cast<int>(ifindex_))
      return std::nullopt;
    stale = ndm.ndm_state & NUD_STALE;
    const std::size_t alen = ip.v4 ? 4 : 16;
    bool same_dst = false;
    for (std::size_t off = kHdr + kNdm; off + sizeof(rtattr) <= static_cast<std::size_t>(n);) {
      rtattr a;
      std::memcpy(&a, reply + off, sizeof(a));
      if (a.rta_len < sizeof(rtattr) || off + a.rta_len > static_cast<std::size_t>(n)) break;
      const std::uint8_t* value = reply + off + RTA_LENGTH(0);
      if (a.rta_type == NDA_LLADDR && a.rta_len == RTA_LENGTH(6)) {
        mac.emplace();
        std::memcpy(mac->data(), value, 6);
      }
      if (a.rta_type == NDA_DST && a.rta_len == RTA_LENGTH(alen))
        same_dst = std::memcmp(value, ip.bytes.data(), alen) == 0;
      off += RTA_ALIGN(a.rta_len);
    }
    if (!same_dst) return std::nullopt;
  }
  // The kernel confirms a stale entry when a packet goes to it; uroce's
  // packets bypass it, so ask as that packet would have.
  if (mac && stale) {
    std::string ignored;
    solicit(peer, &ignored);
  }
  return mac;
}

bool KernelNeighbors::solicit(const Address& peer, std::string* error) {
  const Address ip = next_hop(peer);
  if (!use_datagram_.load(std::memory_order_relaxed)) {
    Request req(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK, ifindex_, ip, NTF_USE);
    alignas(nlmsghdr) std::uint8_t reply[1024];
    std::lock_guard lock(mu_);
    req.set_seq(++seq_);
    const long rc = transact(req.buf, req.len, reply, sizeof(reply));
    if (rc >= 0) return true;
    if (rc != -EPERM) {
      *error = std::string("RTM_NEWNEIGH (NTF_USE): ") + std::strerror(static_cast<int>(-rc));
      return false;
    }
    // Changing the table takes CAP_NET_ADMIN; a packet to the peer does
    // not.
    use_datagram_.store(true, std::memory_order_relaxed);
  }
  // As rdma-core's libibverbs does (neigh.c): an empty datagram to the
  // peer's discard port, for which the kernel resolves it first.
  const int fd = socket(ip.v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  sockaddr_storage to{};
  socklen_t len;
  if (ip.v4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&to);
    a->sin_family = AF_INET;
    a->sin_port = htons(kDiscardPort);
    std::memcpy(&a->sin_addr, ip.bytes.data(), 4);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&to);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(kDiscardPort);
    std::memcpy(&a->sin6_addr, ip.bytes.data(), 16);
    a->sin6_scope_id = ifindex_;  // a link-local peer is on this interface
    len = sizeof(*a);
  }
  const bool sent =
      sendto(fd, nullptr, 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), len) == 0;
  if (!sent) *error = std::string("a datagram to the peer: ") + std::strerror(errno);
  close(fd);
  return sent;
}

}  // namespace uroce::config
