/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/host_xrc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "verbs/xrc_target_block.h"
#include "wire/opcode.h"

namespace uroce::daemon {

HostXrc::~HostXrc() {
  for (auto& [qpn, t] : targets_) close(t.fd);
  for (auto& [d, dom] : domains_) close(dom.fd);
}

std::int64_t HostXrc::open_domain(Program& p, std::pair<dev_t, ino_t> file, int fd, int oflags) {
  if ((oflags & ~(O_CREAT | O_EXCL)) != 0) return -EINVAL;
  std::uint32_t d;
  if (const auto it = by_file_.find(file); it != by_file_.end()) {
    if (oflags & O_EXCL) return -EINVAL;
    d = it->second;
  } else {
    if (!(oflags & O_CREAT)) return -EINVAL;
    const int held = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (held < 0) return -errno;
    do {
      d = next_domain_++;
    } while (d == 0 || domains_.count(d));
    domains_[d].file = file;
    domains_[d].fd = held;
    by_file_[file] = d;
  }
  ++domains_[d].opens[&p];
  return d;
}

bool HostXrc::has_open(const Program& p, std::uint32_t domain) const {
  const auto it = domains_.find(domain);
  return it != domains_.end() && it->second.opens.count(const_cast<Program*>(&p)) != 0;
}

bool HostXrc::close_domain(Program& p, std::uint32_t domain) {
  const auto it = domains_.find(domain);
  if (it == domains_.end()) return false;
  const auto o = it->second.opens.find(&p);
  if (o == it->second.opens.end()) return false;
  if (--o->second == 0) it->second.opens.erase(o);
  drop_domain_if_unused(domain);
  return true;
}

void HostXrc::drop_domain_if_unused(std::uint32_t domain) {
  const auto it = domains_.find(domain);
  if (it == domains_.end() || !it->second.opens.empty()) return;
  // Its SRQs and target QPs went before its last closing (ibv_close_xrcd
  // is EBUSY until they do); anything left is a program's that lied.
  std::erase_if(srqs_, [&](const auto& s) { return s.second.domain == domain; });
  std::erase_if(targets_, [&](const auto& t) {
    if (t.second.domain != domain) return false;
    close(t.second.fd);
    return true;
  });
  by_file_.erase(it->second.file);
  close(it->second.fd);
  domains_.erase(it);
}

bool HostXrc::add_srq(Program& p, std::uint32_t domain, std::uint32_t srqn) {
  if (!has_open(p, domain)) return false;
  return srqs_.emplace(srqn, Srq{&p, domain}).second;
}

bool HostXrc::remove_srq(Program& p, std::uint32_t srqn) {
  const auto it = srqs_.find(srqn);
  if (it == srqs_.end() || it->second.program != &p) return false;
  srqs_.erase(it);
  return true;
}

int HostXrc::open_target(Program& p, std::uint32_t* domain, std::uint32_t qpn, bool create) {
  if (create) {
    if (!has_open(p, *domain)) return -EINVAL;
    if (targets_.count(qpn)) return -EEXIST;
    const int fd = verbs::make_xrc_target_block();
    if (fd < 0) return fd;
    targets_[qpn] = Target{&p, *domain, fd};
    return fd;
  }
  const auto it = targets_.find(qpn);
  if (it == targets_.end()) return -ENOENT;
  const Target& t = it->second;
  // Only a program with the target QP's domain open may receive for it
  // (ibv_open_qp: the XRCD given must be the QP's).
  if ((*domain != 0 && *domain != t.domain) || !has_open(p, t.domain)) return -EINVAL;
  *domain = t.domain;
  return t.fd;
}

bool HostXrc::close_target(Program& p, std::uint32_t qpn) {
  const auto it = targets_.find(qpn);
  if (it == targets_.end() || it->second.maker != &p) return false;
  close(it->second.fd);
  targets_.erase(it);
  return true;
}

void HostXrc::forget_qpn(Program& p, std::uint32_t qpn) {
  (void)remove_srq(p, qpn);
  (void)close_target(p, qpn);
}

void HostXrc::forget(Program& p) {
  std::erase_if(srqs_, [&](const auto& s) { return s.second.program == &p; });
  std::erase_if(targets_, [&](const auto& t) {
    if (t.second.maker != &p) return false;
    close(t.second.fd);
    return true;
  });
  std::vector<std::uint32_t> held;
  for (auto& [d, dom] : domains_)
    if (dom.opens.erase(&p)) held.push_back(d);
  for (std::uint32_t d : held) drop_domain_if_unused(d);
}

Program* HostXrc::route(const wire::RocePacket& pkt) const {
  if (targets_.empty() || !pkt.info->is_request() ||
      wire::transport_of(pkt.bth.opcode) != wire::Transport::kXrc)
    return nullptr;
  const auto t = targets_.find(pkt.bth.dest_qp);
  if (t == targets_.end()) return nullptr;
  const auto s = srqs_.find(pkt.ext.xrc_srqn);
  if (s == srqs_.end() || s->second.domain != t->second.domain) return nullptr;
  return s->second.program;
}

}  // namespace uroce::daemon
