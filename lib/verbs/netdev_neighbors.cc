/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/netdev_neighbors.h"

#include <algorithm>
#include <atomic>

#include "config/kernel_neighbors.h"
#include "log/log.h"

namespace uroce::verbs {

namespace {

config::KernelNeighbors::Address to_kernel(const wire::IpAddr& ip) {
  config::KernelNeighbors::Address a;
  a.v4 = ip.is_v4();
  if (a.v4)
    std::copy(ip.bytes.begin() + 12, ip.bytes.end(), a.bytes.begin());  // after ::ffff:
  else
    a.bytes = ip.bytes;
  return a;
}

class KernelNeighborSource final : public engine::NeighborSource {
 public:
  explicit KernelNeighborSource(std::unique_ptr<config::KernelNeighbors> table)
      : table_(std::move(table)) {}

  std::optional<wire::MacAddr> lookup(const wire::IpAddr& ip) override {
    const auto mac = table_->lookup(to_kernel(ip));
    if (!mac) return std::nullopt;
    wire::MacAddr m;
    std::copy(mac->begin(), mac->end(), m.bytes.begin());
    return m;
  }

  bool solicit(const wire::IpAddr& ip) override {
    std::string why;
    if (table_->solicit(to_kernel(ip), &why)) return true;
    // Once: a resolve asks every 100 ms.
    if (!warned_.exchange(true))
      log::get().warn("resolving {} through the kernel: {}", ip.to_string(), why);
    return false;
  }

 private:
  std::atomic<bool> warned_{false};
  std::unique_ptr<config::KernelNeighbors> table_;
};

}  // namespace

std::shared_ptr<engine::NeighborSource> kernel_neighbors(const std::string& netdev) {
  std::string why;
  auto table = config::KernelNeighbors::open(netdev, &why);
  if (!table) {
    log::get().warn(
        "{}: the kernel's neighbour table: {}; peers are found with uroce's own ARP "
        "and neighbour discovery",
        netdev, why);
    return nullptr;
  }
  return std::make_shared<KernelNeighborSource>(std::move(table));
}

}  // namespace uroce::verbs
