/* SPDX-License-Identifier: BSD-3-Clause */
// Cma: the port spaces' ports, as cma.c shares and hands them out
// (cma_check_port, cma_port_is_unique, cma_alloc_any_port), and on a
// shared device as the host's port spaces allow (HostPorts).

#include <algorithm>
#include <cerrno>

#include "cm/cma.h"

namespace uroce::cm {

// --- ports ---------------------------------------------------------------------------

void Cma::bind_port(Id& id, std::uint16_t port) {
  id.src.port = port;
  bind_lists_[{id.ps, port}].push_back(id.id);
  id.bound = true;
}

int Cma::host_bind(const Id& id, std::uint16_t port, bool reuseaddr, bool ephemeral) {
  if (!host_ports_) return 0;
  HostPorts::Binding b;
  b.service_id = service_id(id.ps, port);
  b.ip = id.src.ip;
  b.any = is_any(id.src.ip);
  b.reuseaddr = reuseaddr;
  b.afonly = id.afonly;
  b.ephemeral = ephemeral;
  return host_ports_->bind(id.id, b);
}

void Cma::host_rebind(const Id& id) {
  // New terms for a port the id holds: only a first pick must be free.
  if (id.bound) (void)host_bind(id, id.src.port, id.reuseaddr, false);
}

void Cma::release_port(Id& id) {
  if (!id.bound) return;
  if (host_ports_) host_ports_->unbind(id.id);
  auto it = bind_lists_.find({id.ps, id.src.port});
  if (it != bind_lists_.end()) {
    std::erase(it->second, id.id);
    if (it->second.empty()) bind_lists_.erase(it);
  }
  id.bound = false;
}

int Cma::check_port(const Id& id, bool reuseaddr) const {
  // cma_check_port: an explicit port is shared only by addresses that
  // cannot meet (different, or of different families where both are
  // AF-only), or by ids that all allow reuse.
  auto it = bind_lists_.find({id.ps, id.src.port});
  if (it == bind_lists_.end()) return 0;
  for (std::uint32_t other : it->second) {
    if (other == id.id) continue;
    const Id& cur = ids_.at(other);
    if (reuseaddr && cur.reuseaddr) continue;
    if (id.afonly && cur.afonly && id.v6 != cur.v6) continue;
    if (is_any(id.src.ip) || is_any(cur.src.ip)) return EADDRNOTAVAIL;
    if (id.src.ip == cur.src.ip) return EADDRINUSE;
  }
  return 0;
}

bool Cma::port_is_unique(const Id& id, std::uint16_t port) const {
  // cma_port_is_unique: an ephemeral port may be shared by ids whose
  // connections differ in the destination port, the source or the
  // destination address.
  auto it = bind_lists_.find({id.ps, port});
  if (it == bind_lists_.end()) return true;
  for (std::uint32_t other : it->second) {
    if (other == id.id) continue;
    const Id& cur = ids_.at(other);
    if (id.dst.port && cur.dst.port && id.dst.port != cur.dst.port) continue;
    if (!is_any(id.src.ip) && !is_any(cur.src.ip) && id.src.ip != cur.src.ip) continue;
    if (!is_any(id.dst.ip) && !is_any(cur.dst.ip) && id.dst.ip != cur.dst.ip) continue;
    return false;
  }
  return true;
}

int Cma::alloc_any_port(Id& id) {
  // cma_alloc_any_port: start at a random port of the ephemeral range and
  // walk it, skipping the port given out last. On a shared device a port
  // another program holds is skipped too.
  const unsigned low = device_.ephemeral_low;
  const unsigned high = device_.ephemeral_high;
  unsigned remaining = high - low + 1;
  unsigned rover = random_.u32() % remaining + low;
  for (;;) {
    const auto port = static_cast<std::uint16_t>(rover);
    if (rover != last_used_port_ && port_is_unique(id, port) &&
        host_bind(id, port, id.reuseaddr, true) == 0) {
      bind_port(id, port);
      last_used_port_ = port;
      return 0;
    }
    if (--remaining == 0) return EADDRNOTAVAIL;
    if (++rover > high) rover = low;
  }
}

int Cma::use_port(Id& id) {
  // Ports below 1024 are not checked for privilege here: in-process, the
  // port space is the program's own. On a shared device the daemon checks
  // (EACCES for a user other than root, as cma_use_port answers a caller
  // without CAP_NET_BIND_SERVICE).
  int ret = check_port(id, id.reuseaddr);
  if (ret == 0) ret = host_bind(id, id.src.port, id.reuseaddr, false);
  if (ret == 0) bind_port(id, id.src.port);
  return ret;
}

int Cma::get_port(Id& id) { return id.src.port == 0 ? alloc_any_port(id) : use_port(id); }

}  // namespace uroce::cm
