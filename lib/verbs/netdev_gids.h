/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A netdev device's GID table kept in step with its interface: what the
// device (verbs::Device) and the device daemon do when the interface's
// addresses change (config/address_watch.h says when).

#include <optional>
#include <string>
#include <vector>

#include "uroce/config.h"
#include "verbs/gid_table.h"

namespace uroce::verbs {

/// Reads the addresses of interface `netdev` again: `table` takes them
/// (GidTable::update) and `addresses` becomes them with their prefixes in
/// the table's order, what the table left out dropped. Whether an entry
/// of the table changed; nullopt, with nothing changed, when there is no
/// such interface any more.
std::optional<bool> reread_netdev(const std::string& netdev, GidTable& table,
                                  std::vector<IpPrefix>& addresses);

}  // namespace uroce::verbs
