/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The neighbour table: IP address to MAC, learnt from ARP and IPv6
// neighbour discovery. Written by the engine thread, read by whoever
// resolves an address vector. A device that shares its interface with the
// kernel (netdev mode) asks the kernel's table instead (NeighborSource).

#include <map>
#include <mutex>
#include <optional>

#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::engine {

/// Another's neighbour table, which its owner keeps: the kernel's for a
/// netdev device (config/kernel_neighbors.h). Any thread.
class NeighborSource {
 public:
  virtual ~NeighborSource() = default;
  /// The MAC of `ip` when the table has a usable one.
  virtual std::optional<wire::MacAddr> lookup(const wire::IpAddr& ip) = 0;
  /// Has the owner resolve `ip` (its ARP or neighbour discovery); false
  /// when it could not be asked.
  virtual bool solicit(const wire::IpAddr& ip) = 0;
};

class Neighbors {
 public:
  void learn(const wire::IpAddr& ip, const wire::MacAddr& mac) {
    std::lock_guard lock(mu_);
    table_[key(ip)] = mac;
  }
  std::optional<wire::MacAddr> lookup(const wire::IpAddr& ip) const {
    std::lock_guard lock(mu_);
    const auto it = table_.find(key(ip));
    if (it == table_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static std::array<std::uint8_t, 16> key(const wire::IpAddr& ip) { return ip.bytes; }
  mutable std::mutex mu_;
  std::map<std::array<std::uint8_t, 16>, wire::MacAddr> table_;
};

}  // namespace uroce::engine
