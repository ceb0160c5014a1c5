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

// An rtnetlink request: the message header, the family's fixed header
// (ndmsg, rtmsg) and attributes, built in place.
class Request {
 public:
  template <typename Fixed>
  Request(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, const Fixed& fixed) {
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    h.nlmsg_seq = seq;
    std::memcpy(buf_, &h, sizeof(h));
    std::memcpy(buf_ + kHdr, &fixed, sizeof(fixed));
    set_len(kHdr + NLMSG_ALIGN(sizeof(fixed)));
  }
  void attr(std::uint16_t type, const void* data, std::size_t n) {
    rtattr a{};
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(n));
    a.rta_type = type;
    std::memcpy(buf_ + len_, &a, sizeof(a));
    std::memcpy(buf_ + len_ + RTA_LENGTH(0), data, n);
    set_len(len_ + RTA_SPACE(n));
  }
  const void* data() const { return buf_; }
  std::size_t size() const { return len_; }

 private:
  void set_len(std::size_t len) {
    len_ = len;
    const auto l = static_cast<std::uint32_t>(len);
    std::memcpy(buf_ + offsetof(nlmsghdr, nlmsg_len), &l, sizeof(l));
  }
  alignas(nlmsghdr) std::uint8_t buf_[128]{};  // a header, 12 bytes, two attributes
  std::size_t len_ = 0;
};

// Each attribute of the message of `n` bytes at `msg` from offset `from`
// (after the fixed header): fn(type, value, value length). Stops at one
// whose length does not fit.
template <typename F>
void for_each_attr(const std::uint8_t* msg, std::size_t from, std::size_t n, F&& fn) {
  for (std::size_t off = from; off + sizeof(rtattr) <= n;) {
    rtattr a;
    std::memcpy(&a, msg + off, sizeof(a));
    if (a.rta_len < sizeof(rtattr) || off + a.rta_len > n) return;
    fn(a.rta_type, msg + off + RTA_LENGTH(0), a.rta_len - RTA_LENGTH(0));
    off += RTA_ALIGN(a.rta_len);
  }
}

std::size_t address_len(const KernelNeighbors::Address& ip) { return ip.v4 ? 4 : 16; }
unsigned char family(const KernelNeighbors::Address& ip) { return ip.v4 ? AF_INET : AF_INET6; }

// A neighbour request for `ip` on interface `ifindex`.
Request neighbor_request(std::uint16_t type, std::uint16_t flags, std::uint32_t seq,
                         unsigned ifindex, const KernelNeighbors::Address& ip,
                         std::uint8_t ndm_flags) {
  ndmsg ndm{};
  ndm.ndm_family = family(ip);
  ndm.ndm_ifindex = static_cast<int>(ifindex);
  ndm.ndm_flags = ndm_flags;
  Request r(type, flags, seq, ndm);
  r.attr(NDA_DST, ip.bytes.data(), address_len(ip));
  return r;
}

}  // namespace

KernelNeighbors::Address KernelNeighbors::next_hop(const Address& ip) {
  alignas(nlmsghdr) std::uint8_t reply[2048];
  std::lock_guard lock(mu_);
  // A route lookup for one destination out of one interface, as
  // `ip route get ADDR oif IFACE`.
  rtmsg rtm{};
  rtm.rtm_family = family(ip);
  rtm.rtm_dst_len = static_cast<unsigned char>(address_len(ip) * 8);
  Request req(RTM_GETROUTE, NLM_F_REQUEST, ++seq_, rtm);
  req.attr(RTA_DST, ip.bytes.data(), address_len(ip));
  const auto oif = static_cast<std::uint32_t>(ifindex_);
  req.attr(RTA_OIF, &oif, sizeof(oif));
  const long n = transact(req.data(), req.size(), reply, sizeof(reply));
  nlmsghdr h;
  std::memcpy(&h, reply, sizeof(h));
  constexpr std::size_t kRtm = NLMSG_ALIGN(sizeof(rtmsg));
  // No route out of the interface (or no answer): the address itself, as
  // for a peer on the link.
  if (n <= 0 || h.nlmsg_type != RTM_NEWROUTE || static_cast<std::size_t>(n) < kHdr + kRtm)
    return ip;
  rtmsg answer;
  std::memcpy(&answer, reply + kHdr, sizeof(answer));
  if (answer.rtm_family != family(ip)) return ip;  // not the answer to this
  const std::size_t alen = address_len(ip);
  Address hop = ip;  // no gateway: on the link
  for_each_attr(reply, kHdr + kRtm, static_cast<std::size_t>(n),
                [&](unsigned type, const std::uint8_t* value, std::size_t len) {
                  if (type != RTA_GATEWAY || len != alen) return;
                  hop.bytes = {};
                  std::memcpy(hop.bytes.data(), value, alen);
                });
  return hop;
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
  alignas(nlmsghdr) std::uint8_t reply[1024];
  bool stale = false;
  std::optional<Mac> mac;
  {
    std::lock_guard lock(mu_);
    const Request req = neighbor_request(RTM_GETNEIGH, NLM_F_REQUEST, ++seq_, ifindex_, ip, 0);
    const long n = transact(req.data(), req.size(), reply, sizeof(reply));
    nlmsghdr h;
    std::memcpy(&h, reply, sizeof(h));
    if (n <= 0 || h.nlmsg_type != RTM_NEWNEIGH || static_cast<std::size_t>(n) < kHdr + kNdm)
      return std::nullopt;  // ENOENT: the kernel has no entry
    ndmsg ndm;
    std::memcpy(&ndm, reply + kHdr, sizeof(ndm));
    if (!(ndm.ndm_state & kNudValid)) return std::nullopt;  // incomplete or failed
    // The answer must be about what was asked (a forked child shares the
    // socket, and its sequence numbers).
    if (ndm.ndm_family != family(ip) || ndm.ndm_ifindex != static_cast<int>(ifindex_))
      return std::nullopt;
    stale = ndm.ndm_state & NUD_STALE;
    const std::size_t alen = address_len(ip);
    bool same_dst = false;
    for_each_attr(reply, kHdr + kNdm, static_cast<std::size_t>(n),
                  [&](unsigned type, const std::uint8_t* value, std::size_t len) {
                    if (type == NDA_LLADDR && len == 6) {
                      mac.emplace();
                      std::memcpy(mac->data(), value, 6);
                    }
                    if (type == NDA_DST && len == alen)
                      same_dst = std::memcmp(value, ip.bytes.data(), alen) == 0;
                  });
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
    alignas(nlmsghdr) std::uint8_t reply[1024];
    std::lock_guard lock(mu_);
    const Request req = neighbor_request(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
                                         ++seq_, ifindex_, ip, NTF_USE);
    const long rc = transact(req.data(), req.size(), reply, sizeof(reply));
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
