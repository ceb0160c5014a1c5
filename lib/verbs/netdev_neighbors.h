/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A netdev device's peers' MACs from the kernel's neighbour table
// (config/kernel_neighbors.h), as the engine asks for them
// (engine::NeighborSource): the device, and the device daemon's switch.

#include <memory>
#include <string>

#include "engine/neighbors.h"

namespace uroce::verbs {

/// The kernel's neighbour table of interface `netdev`; null, with a
/// warning logged, when no rtnetlink socket can be had (the engine then
/// finds its peers with ARP and neighbour discovery of its own).
std::shared_ptr<engine::NeighborSource> kernel_neighbors(const std::string& netdev);

}  // namespace uroce::verbs
