/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What a program sees of the device daemon: the devices it serves, as
// device configurations whose ports ("uroced:<device>") the attach driver
// opens. A program whose configuration names devices of its own keeps to
// those (in-process mode); one that names none asks the daemon.

#include <string>
#include <vector>

#include "uroce/config.h"

namespace uroce::daemon {

/// The devices of the daemon listening on c.daemon_socket; empty when no
/// daemon answers there (a program started before the daemon sees no
/// uroce device).
std::vector<DeviceConfig> daemon_devices(const Config& c);

/// Whether `dc` is a device of the daemon (its port is "uroced:<name>").
bool is_daemon_device(const DeviceConfig& dc);

}  // namespace uroce::daemon
