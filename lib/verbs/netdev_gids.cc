/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/netdev_gids.h"

#include "config/netdev.h"

namespace uroce::verbs {

std::optional<bool> reread_netdev(const std::string& netdev, GidTable& table,
                                  std::vector<IpPrefix>& addresses) {
  const auto now = config::netdev_addresses(netdev);
  if (!now) return std::nullopt;  // the interface is gone: its link is down anyway
  std::vector<wire::IpAddr> ips;
  for (const IpPrefix& p : *now)
    if (const auto ip = wire::IpAddr::parse(p.address)) ips.push_back(*ip);
  const bool changed = table.update(ips);
  addresses.clear();
  for (const wire::IpAddr& g : table.entries())
    for (const IpPrefix& p : *now)
      if (wire::IpAddr::parse(p.address) == g) addresses.push_back(p);
  return changed;
}

}  // namespace uroce::verbs
