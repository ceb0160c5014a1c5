/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/attached_port.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "daemon/protocol.h"
#include "log/log.h"

namespace uroce::daemon {

std::unique_ptr<AttachedPort> AttachedPort::open(const std::string& socket,
                                                 const std::string& device, std::string* error) {
  const int sock = connect_daemon(socket);
  if (sock < 0) {
    *error = "no uroced on " + socket + ": " + std::strerror(errno);
    return nullptr;
  }
  Message req;
  req.op = Op::kAttach;
  req.text = device;
  Message reply;
  if (!call(sock, req, &reply)) {
    *error = "uroced on " + socket + " did not answer: " + std::strerror(errno);
    close(sock);
    return nullptr;
  }
  PortInfo info;
  if (reply.op != Op::kAttached || reply.fd < 0 || !parse_port_info(reply.text, &info)) {
    *error = reply.op == Op::kError ? "uroced: " + reply.text : "uroced: a malformed reply";
    if (reply.fd >= 0) close(reply.fd);
    close(sock);
    return nullptr;
  }
  auto rings = port::ShmRegion::map(reply.fd, error);
  if (!rings) {
    close(sock);
    return nullptr;
  }
  port::RingPortInfo ri;
  std::memcpy(ri.mac.bytes.data(), info.mac, 6);
  ri.mtu = info.mtu;
  ri.speed_mbps = info.speed_mbps;
  return std::unique_ptr<AttachedPort>(
      new AttachedPort(socket, sock, std::make_unique<port::RingPort>(std::move(rings), ri)));
}

AttachedPort::~AttachedPort() {
  // The daemon drops our rings and QPNs when the socket closes.
  close(sock_);
}

std::uint32_t AttachedPort::alloc_qpn() {
  std::lock_guard lock(call_mu_);
  Message req;
  req.op = Op::kAllocQpn;
  Message reply;
  // A Message's op is kError until a reply sets it: whether the call
  // went through is the call's answer, not the op's.
  const bool answered = call(sock_, req, &reply);
  if (!answered || reply.op != Op::kQpn) {
    log::get().warn("uroced gave no QPN: {}", answered ? reply.text : "it hung up");
    return 0;
  }
  return reply.value;
}

void AttachedPort::free_qpn(std::uint32_t qpn) {
  std::lock_guard lock(call_mu_);
  Message req;
  req.op = Op::kFreeQpn;
  req.value = qpn;
  Message reply;
  call(sock_, req, &reply);  // a daemon gone has freed it already
}

void AttachedPort::set_cm_services(const std::vector<std::uint64_t>& service_ids) {
  std::lock_guard lock(call_mu_);
  Message req;
  req.op = Op::kCmServices;
  char hex[24];
  for (std::uint64_t sid : service_ids) {
    std::snprintf(hex, sizeof(hex), "%s%llx", req.text.empty() ? "" : ",",
                  static_cast<unsigned long long>(sid));
    req.text += hex;
  }
  Message reply;
  call(sock_, req, &reply);
}

int AttachedPort::bind_cm_port(std::uint32_t key, std::uint64_t service_id, const wire::IpAddr& ip,
                               unsigned flags) {
  std::lock_guard lock(call_mu_);
  if (!keeps_cm_ports()) return 0;
  Message req;
  req.op = Op::kCmBind;
  req.value = key;
  req.text = format_cm_binding(service_id, ip, flags);
  Message reply;
  // A daemon gone has failed the device already.
  if (!call(sock_, req, &reply) || reply.op != Op::kDone) return 0;
  return static_cast<int>(reply.value);
}

void AttachedPort::unbind_cm_port(std::uint32_t key) {
  std::lock_guard lock(call_mu_);
  if (!keeps_cm_ports()) return;
  Message req;
  req.op = Op::kCmUnbind;
  req.value = key;
  Message reply;
  call(sock_, req, &reply);
}

bool AttachedPort::knows(Op op) {
  const int probe = connect_daemon(socket_);
  Message req;
  req.op = op;
  Message reply;
  const bool known = probe >= 0 && call(probe, req, &reply);
  if (probe >= 0) close(probe);
  return known;
}

bool AttachedPort::tell(Op op, std::uint32_t value, std::string text) {
  Message req;
  req.op = op;
  req.value = value;
  req.text = std::move(text);
  Message reply;
  // (A daemon gone has forgotten it already.)
  return call(sock_, req, &reply) && reply.op == Op::kDone;
}

bool AttachedPort::keeps_cm_ports() {
  // A daemon from before the host's port spaces hangs up on kCmBind, and
  // with it on the program's hold on the device: ask it once.
  if (keeps_cm_ports_) return *keeps_cm_ports_;
  keeps_cm_ports_ = knows(Op::kCmUnbind);
  if (!*keeps_cm_ports_)
    log::get().warn("uroced on {} keeps no rdma_cm ports: this program's are its own", socket_);
  return *keeps_cm_ports_;
}

bool AttachedPort::shares_xrc() {
  if (shares_xrc_) return *shares_xrc_;
  shares_xrc_ = knows(Op::kXrcTgtClose);
  if (!*shares_xrc_)
    log::get().warn("uroced on {} shares no XRC domains: this program's are its own", socket_);
  return *shares_xrc_;
}

std::int64_t AttachedPort::open_xrc_domain(int fd, int oflags) {
  std::lock_guard lock(call_mu_);
  if (!shares_xrc()) return 0;
  Message req;
  req.op = Op::kXrcdOpen;
  req.text = std::to_string(oflags);
  req.fd = fd;  // sent, and still ours
  Message reply;
  if (!call(sock_, req, &reply)) return -EIO;
  if (reply.op != Op::kDone) return -static_cast<std::int64_t>(reply.value ? reply.value : EIO);
  return reply.value;
}

void AttachedPort::close_xrc_domain(std::uint32_t domain) {
  std::lock_guard lock(call_mu_);
  (void)tell(Op::kXrcdClose, domain);
}

bool AttachedPort::add_xrc_srq(std::uint32_t domain, std::uint32_t srqn) {
  std::lock_guard lock(call_mu_);
  return tell(Op::kXrcSrqAdd, srqn, std::to_string(domain));
}

void AttachedPort::remove_xrc_srq(std::uint32_t srqn) {
  std::lock_guard lock(call_mu_);
  (void)tell(Op::kXrcSrqRemove, srqn);
}

int AttachedPort::open_xrc_target(std::uint32_t* domain, std::uint32_t qpn, bool create) {
  std::lock_guard lock(call_mu_);
  if (!shares_xrc()) return -EOPNOTSUPP;
  Message req;
  req.op = Op::kXrcTgtOpen;
  req.value = qpn;
  req.text = std::to_string(*domain) + (create ? " 1" : " 0");
  Message reply;
  if (!call(sock_, req, &reply)) return -EIO;
  if (reply.op != Op::kDone || reply.fd < 0) {
    if (reply.fd >= 0) close(reply.fd);
    return -static_cast<int>(reply.value ? reply.value : EIO);
  }
  *domain = reply.value;
  return reply.fd;
}

void AttachedPort::close_xrc_target(std::uint32_t qpn) {
  std::lock_guard lock(call_mu_);
  (void)tell(Op::kXrcTgtClose, qpn);
}

bool AttachedPort::failed() const {
  pollfd p{sock_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

}  // namespace uroce::daemon
