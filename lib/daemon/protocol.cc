/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/protocol.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

namespace uroce::daemon {

namespace {

// What precedes the text on the wire.
struct Header {
  std::uint32_t version;
  std::uint32_t op;
  std::uint32_t value;
  std::uint32_t text_len;
};

}  // namespace

bool send_message(int sock, const Message& m) {
  if (m.text.size() > kMaxText) {
    errno = EMSGSIZE;
    return false;
  }
  const Header h{kProtocolVersion, static_cast<std::uint32_t>(m.op), m.value,
                 static_cast<std::uint32_t>(m.text.size())};
  iovec iov[2] = {{const_cast<Header*>(&h), sizeof(h)},
                  {const_cast<char*>(m.text.data()), m.text.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = m.text.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (m.fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &m.fd, sizeof(int));
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return true;
    if (errno != EINTR) return false;
  }
}

bool send_frame(int sock, std::uint32_t direction, const FrameHeader& fh,
                const std::uint8_t* frame) {
  const std::size_t len = std::min<std::size_t>(fh.length, kMaxCapturedFrame);
  const Header h{kProtocolVersion, static_cast<std::uint32_t>(Op::kFrame), direction,
                 static_cast<std::uint32_t>(sizeof(fh) + len)};
  iovec iov[3] = {{const_cast<Header*>(&h), sizeof(h)},
                  {const_cast<FrameHeader*>(&fh), sizeof(fh)},
                  {const_cast<std::uint8_t*>(frame), len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  for (;;) {
    if (sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

int recv_message(int sock, Message* m) {
  std::vector<char> buf(sizeof(Header) + kMaxText);
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  if (n == 0) return 0;
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      // One descriptor per message; any more would be a confused peer's.
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int got;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fd < 0) {
          fd = got;
        } else {
          close(got);
        }
      }
    }
  }
  Header h;
  const auto bad = [&] {
    if (fd >= 0) close(fd);
    errno = EPROTO;
    return -1;
  };
  if (static_cast<std::size_t>(n) < sizeof(h) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return bad();
  std::memcpy(&h, buf.data(), sizeof(h));
  if (h.version != kProtocolVersion || h.text_len != static_cast<std::size_t>(n) - sizeof(h) ||
      h.op < static_cast<std::uint32_t>(Op::kList) ||
      h.op > static_cast<std::uint32_t>(Op::kXrcTgtClose))
    return bad();
  m->op = static_cast<Op>(h.op);
  m->value = h.value;
  m->text.assign(buf.data() + sizeof(h), h.text_len);
  m->fd = fd;
  return 1;
}

bool call(int sock, const Message& request, Message* reply) {
  if (!send_message(sock, request)) return false;
  const int r = recv_message(sock, reply);
  if (r == 0) errno = ECONNRESET;
  return r == 1;
}

int connect_daemon(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

std::string format_port_info(const PortInfo& p) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "mac=%02x:%02x:%02x:%02x:%02x:%02x;mtu=%u;speed=%u", p.mac[0],
                p.mac[1], p.mac[2], p.mac[3], p.mac[4], p.mac[5], p.mtu, p.speed_mbps);
  return buf;
}

bool parse_port_info(const std::string& text, PortInfo* out) {
  unsigned m[6];
  unsigned mtu, speed;
  char end;
  if (std::sscanf(text.c_str(), "mac=%x:%x:%x:%x:%x:%x;mtu=%u;speed=%u%c", &m[0], &m[1], &m[2],
                  &m[3], &m[4], &m[5], &mtu, &speed, &end) != 8)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (m[i] > 0xFF) return false;
    out->mac[i] = static_cast<std::uint8_t>(m[i]);
  }
  out->mtu = mtu;
  out->speed_mbps = speed;
  return true;
}

std::string format_cm_binding(std::uint64_t service_id, const wire::IpAddr& ip, unsigned flags) {
  char sid[24];
  std::snprintf(sid, sizeof(sid), "%llx", static_cast<unsigned long long>(service_id));
  return std::string(sid) + " " + ip.to_string() + " " + std::to_string(flags);
}

bool parse_cm_binding(std::string_view text, std::uint64_t* service_id, wire::IpAddr* ip,
                      unsigned* flags) {
  const std::size_t a = text.find(' ');
  const std::size_t b = a == std::string_view::npos ? a : text.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  // Each field whole, digits only (from_chars takes no sign, space or 0x).
  const auto whole = [](std::string_view f, auto* v, int base) {
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), *v, base);
    return !f.empty() && ec == std::errc{} && end == f.data() + f.size();
  };
  const auto parsed = wire::IpAddr::parse(text.substr(a + 1, b - a - 1));
  if (!whole(text.substr(0, a), service_id, 16) || !parsed ||
      !whole(text.substr(b + 1), flags, 10) || (*flags & ~0xfu) != 0)
    return false;
  *ip = *parsed;
  return true;
}

}  // namespace uroce::daemon
