/* SPDX-License-Identifier: BSD-3-Clause */
#include "config/netdev.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cstring>

namespace uroce::config {

namespace {

unsigned prefix_length(const unsigned char* mask, std::size_t bytes) {
  unsigned n = 0;
  for (std::size_t i = 0; i < bytes; ++i) n += static_cast<unsigned>(std::popcount(mask[i]));
  return n;
}

}  // namespace

std::optional<std::vector<IpPrefix>> netdev_addresses(const std::string& iface) {
  if (iface.empty() || if_nametoindex(iface.c_str()) == 0) return std::nullopt;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::vector<IpPrefix> out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_netmask || iface != a->ifa_name) continue;
    char text[INET6_ADDRSTRLEN];
    IpPrefix p;
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      const auto* mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      p.prefix = prefix_length(reinterpret_cast<const unsigned char*>(&mask->sin_addr), 4);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      const auto* mask = reinterpret_cast<const sockaddr_in6*>(a->ifa_netmask);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      p.prefix = prefix_length(mask->sin6_addr.s6_addr, 16);
    } else {
      continue;
    }
    p.address = text;
    out.push_back(std::move(p));
  }
  freeifaddrs(list);
  return out;
}

std::optional<std::array<std::uint8_t, 6>> netdev_mac(const std::string& iface) {
  if (iface.empty() || iface.size() >= IFNAMSIZ) return std::nullopt;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.data(), iface.size());
  const int rc = ioctl(fd, SIOCGIFHWADDR, &ifr);
  close(fd);
  if (rc != 0) return std::nullopt;
  std::array<std::uint8_t, 6> mac;
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, mac.size());
  return mac;
}

}  // namespace uroce::config
