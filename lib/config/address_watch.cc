/* SPDX-License-Identifier: BSD-3-Clause */
#include "config/address_watch.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uroce::config {

std::unique_ptr<AddressWatch> AddressWatch::open(const std::string& iface, std::string* error) {
  const unsigned ifindex = iface.empty() ? 0 : if_nametoindex(iface.c_str());
  if (ifindex == 0) {
    *error = "no interface '" + iface + "'";
    return nullptr;
  }
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    *error = std::string("rtnetlink socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    *error = std::string("rtnetlink bind: ") + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<AddressWatch>(new AddressWatch(fd, ifindex));
}

AddressWatch::~AddressWatch() { close(fd_); }

bool AddressWatch::changed() {
  bool changed = first_;
  first_ = false;
  alignas(nlmsghdr) char buf[8192];
  for (;;) {
    sockaddr_nl from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                               reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      // ENOBUFS: the socket overflowed and notifications were lost; the
      // addresses must be read again.
      if (errno == ENOBUFS) changed = true;
      if (errno == EINTR || errno == ENOBUFS) continue;
      return changed;  // EAGAIN: nothing more
    }
    if (from.nl_pid != 0) continue;  // only the kernel speaks for it
    if (static_cast<std::size_t>(n) > sizeof(buf)) {
      changed = true;  // truncated: what it said is unknown
      continue;
    }
    // Each message in turn, its length checked against what was read
    // (the NLMSG_* macros mix signed and unsigned lengths).
    constexpr std::size_t kHdr = NLMSG_ALIGN(sizeof(nlmsghdr));
    const auto total = static_cast<std::size_t>(n);
    for (std::size_t off = 0; off + sizeof(nlmsghdr) <= total;) {
      nlmsghdr h;
      std::memcpy(&h, buf + off, sizeof(h));
      if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > total - off) break;
      if ((h.nlmsg_type == RTM_NEWADDR || h.nlmsg_type == RTM_DELADDR) &&
          h.nlmsg_len >= kHdr + sizeof(ifaddrmsg)) {
        ifaddrmsg ifa;
        std::memcpy(&ifa, buf + off + kHdr, sizeof(ifa));
        if (ifa.ifa_index == ifindex_) changed = true;
      }
      off += NLMSG_ALIGN(h.nlmsg_len);
    }
  }
}

}  // namespace uroce::config
