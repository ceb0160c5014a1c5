/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Port drivers: what opens the port a device's configuration names. The
// object model does not know DPDK; drivers/dpdk registers the driver of
// DPDK ports when it is linked in (as DPDK's own PMDs register themselves
// at load time), and a device is handed the port it opened. Tests hand
// devices ports of their own.

#include <memory>
#include <optional>
#include <string>

#include "port/port.h"
#include "uroce/config.h"
#include "wire/ethernet.h"

namespace uroce::verbs {

struct PortDriver {
  const char* name;
  /// Whether this driver opens the port `dc` names.
  bool (*claims)(const DeviceConfig& dc);
  /// Opens it; null with *error (naming what failed) on failure.
  std::unique_ptr<port::Port> (*open)(const DeviceConfig& dc, const Config& c,
                                        std::string* error);
  /// The MAC the port will have, when it can be known before it is opened
  /// (ibv_get_device_guid of a device not yet opened); nullopt otherwise.
  std::optional<wire::MacAddr> (*mac)(const DeviceConfig& dc);
};

/// Adds a driver; later ones are asked first.
void register_port_driver(const PortDriver& driver);
/// The driver that claims `dc`, or null.
const PortDriver* find_port_driver(const DeviceConfig& dc);

}  // namespace uroce::verbs
