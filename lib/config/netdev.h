/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A kernel interface as a netdev device sees it ([device] netdev): its
// addresses, which become the device's GIDs, as rxe takes its netdev's.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "uroce/config.h"

namespace uroce::config {

/// The IPv4 and IPv6 addresses of `iface` in this network namespace, with
/// their prefixes, in the kernel's order; IPv6 link-local ones left out
/// (GID 0 is the link-local address of the MAC, as on every RoCE NIC).
/// nullopt when there is no such interface.
std::optional<std::vector<IpPrefix>> netdev_addresses(const std::string& iface);

/// The MAC of `iface` in this network namespace (asked of the kernel
/// through a socket: sysfs shows the namespace it was mounted in, not
/// necessarily ours); nullopt when there is no such interface.
std::optional<std::array<std::uint8_t, 6>> netdev_mac(const std::string& iface);

}  // namespace uroce::config
