/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/netdev_share.h"

#include <dirent.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "wire/udp.h"

namespace uroce::port {

namespace {

// What uroce takes off the interface (classic BPF, offsets into the
// Ethernet frame; tagged frames are left whole to the engine's classifier,
// which knows the device's VLAN):
//   the kernel's own outgoing frames: no
//   802.1Q-tagged (in the frame or in the packet's metadata): yes
//   MAC control (PAUSE, PFC), ARP: yes
//   IPv4: UDP to 4791, not a fragment
//   IPv6: UDP to 4791 (no extension header), neighbour solicitations and
//         advertisements
//   anything else: no, it is the kernel's
constexpr std::uint32_t kAccept = 0xFFFFFFFF;  // the whole frame
constexpr std::uint16_t kRoce = wire::kRoceV2Port;
// The packet's metadata (SKF_AD_OFF, a negative offset, as the kernel
// reads the unsigned field).
constexpr std::uint32_t kAncillary = static_cast<std::uint32_t>(SKF_AD_OFF);

// BPF_JUMP's offsets count instructions after the jump; each line says
// where it lands.
const sock_filter kRoceFilter[] = {
    /*  0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kAncillary + SKF_AD_PKTTYPE),
    /*  1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 24, 0),  // -> 26 drop
    /*  2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kAncillary + SKF_AD_VLAN_TAG_PRESENT),
    /*  3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 21),              // tagged -> 25 accept
    /*  4 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                     // EtherType
    /*  5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8808, 19, 0),         // MAC control -> 25
    /*  6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0806, 18, 0),         // ARP -> 25
    /*  7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8100, 17, 0),         // 802.1Q -> 25
    /*  8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 1, 0),          // IPv4 -> 10
    /*  9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x86DD, 7, 16),         // IPv6 -> 17, else -> 26
    /* 10 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14 + 9),                 // IPv4 protocol
    /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 14),    // -> 26
    /* 12 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 14 + 6),                 // flags, fragment offset
    /* 13 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1FFF, 12, 0),        // a fragment -> 26
    /* 14 */ BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                    // X = IPv4 header length
    /* 15 */ BPF_STMT(BPF_LD | BPF_H | BPF_IND, 14 + 2),                 // UDP destination port
    /* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kRoce, 8, 9),           // -> 25 or 26
    /* 17 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14 + 6),                 // IPv6 next header
    /* 18 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 2),     // -> 19 or 21
    /* 19 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 14 + 40 + 2),            // UDP destination port
    /* 20 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kRoce, 4, 5),           // -> 25 or 26
    /* 21 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMPV6, 0, 4),  // -> 22 or 26
    /* 22 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14 + 40),                // ICMPv6 type
    /* 23 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 135, 1, 0),             // solicitation -> 25
    /* 24 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 136, 0, 1),  // advertisement -> 25, else 26
    /* 25 */ BPF_STMT(BPF_RET | BPF_K, kAccept),
    /* 26 */ BPF_STMT(BPF_RET | BPF_K, 0),
};

const sock_filter kDropAll[] = {BPF_STMT(BPF_RET | BPF_K, 0)};

int attach(int fd, const sock_filter* code, std::size_t n) {
  sock_fprog prog{static_cast<unsigned short>(n), const_cast<sock_filter*>(code)};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

// The packet sockets of this process bound to interface `ifindex`: those
// the af_packet PMD opened for the port (it does not hand them out).
std::vector<int> packet_sockets(int ifindex) {
  std::vector<int> out;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return out;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || end == e->d_name || fd == dirfd(dir)) continue;
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        domain != AF_PACKET)
      continue;
    sockaddr_ll sll{};
    len = sizeof(sll);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&sll), &len) == 0 &&
        sll.sll_ifindex == ifindex)
      out.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  return out;
}

// A UDP socket on port 4791 of `iface` alone, dropping all it gets. One
// IPv6 socket takes IPv4 too (V6ONLY off); where IPv6 is off, an IPv4 one.
// SO_REUSEPORT lets every uroce process on the interface hold it.
int hold_port(const std::string& iface, std::string* error) {
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const bool v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  const int on = 1, off = 0;
  int rc = attach(fd, kDropAll, std::size(kDropAll));
  if (rc == 0) rc = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
  if (rc == 0)
    rc = setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface.c_str(),
                    static_cast<socklen_t>(iface.size()));
  if (rc == 0 && v6) rc = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  if (rc == 0 && v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(kRoce);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else if (rc == 0) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(kRoce);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0) {
    *error = "holding UDP port 4791 on " + iface + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::unique_ptr<NetdevShare> NetdevShare::open(const std::string& iface, std::string* error,
                                               const std::vector<int>& sockets) {
  const int ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  if (ifindex == 0) {
    *error = "no interface '" + iface + "' in this network namespace";
    return nullptr;
  }
  std::unique_ptr<NetdevShare> s(new NetdevShare());
  for (int fd : sockets.empty() ? packet_sockets(ifindex) : sockets) {
    if (attach(fd, kRoceFilter, std::size(kRoceFilter)) != 0) {
      *error = "filtering the port's socket on " + iface + ": " + std::strerror(errno);
      return nullptr;
    }
    ++s->filtered_;
  }
  const int hold = hold_port(iface, error);
  if (hold < 0) return nullptr;
  s->holds_.push_back(hold);
  return s;
}

NetdevShare::~NetdevShare() {
  for (int fd : holds_) close(fd);
}

}  // namespace uroce::port
