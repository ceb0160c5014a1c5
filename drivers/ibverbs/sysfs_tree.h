/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// /sys/class/infiniband/<device> as the kernel presents an RDMA device,
// for the tools that read sysfs rather than ask libibverbs: ibstat
// (libibumad), UCX (a GID's RoCE version, its netdev), Open MPI's device
// match (device/driver), NCCL, hwloc, node_exporter. `uroce-run --sysfs`
// gives the program a mount namespace of its own in which
// /sys/class/infiniband is a tmpfs and names it in UROCE_SYSFS_TREE; the
// binding writes each device's tree there when it lists its devices, and
// the port's state and rate again when the device opens and when its
// link changes. Outside such a namespace nothing is written.

#include <cstdint>
#include <string>

namespace uroce::verbs {
class Device;
}

namespace uroce::ibverbs {

struct UDevice;

/// The directory the trees go in (UROCE_SYSFS_TREE), or "" when the
/// program has none.
const std::string& sysfs_root();

/// Writes `u`'s tree under sysfs_root() from its configuration: what is
/// known before the port opens (its GUID from the port's MAC, its GIDs,
/// the port taken as up at 10 Gb/s). False, with a warning logged, when
/// a file cannot be written.
bool write_sysfs_device(const UDevice& u);

/// Rewrites port 1's state, physical state and rate from the live port.
void update_sysfs_port(const std::string& device, bool active, std::uint8_t width,
                       std::uint8_t speed);

/// Rewrites port 1's counters/ (the IBA port counters a NIC's PMA
/// reports: packets and data in and out, discards, errors) from the
/// engine's, and hw_counters/ from the transport's over every QP and
/// DCQCN's (verbs::Device's "port" scope, named as rxe and mlx5 name
/// them).
void update_sysfs_counters(verbs::Device& dev);

/// Forgets what this process last wrote for `device`'s counters: its
/// device is a new one (a forked child's, of the device daemon), whose
/// counters start again from 0.
void forget_sysfs_counters(const std::string& device);

/// Rewrites port 1's GID table (gids/, gid_attrs/) from the device's
/// (a netdev device's interface gained or lost an address).
void update_sysfs_gids(const verbs::Device& dev);

}  // namespace uroce::ibverbs
