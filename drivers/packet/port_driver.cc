/* SPDX-License-Identifier: BSD-3-Clause */
// The driver of packet ports (verbs/port_driver.h), "packet:<iface>". It
// registers itself when the library is loaded; programs link this library
// whole, as they do drivers/dpdk.

#include "verbs/port_driver.h"

#include "config/netdev.h"
#include "packet/packet_port.h"

namespace uroce::packet {

namespace {

bool claims(const DeviceConfig& dc) { return dc.port.starts_with("packet:"); }

std::unique_ptr<port::Port> open(const DeviceConfig& dc, const Config&, std::string* error) {
  PacketPortOptions opts;
  if (!parse_port(dc.port, &opts, error)) return nullptr;
  if (!dc.netdev.empty() && opts.iface != dc.netdev) {
    *error = "device " + dc.name + ": port " + dc.port + " is not on netdev " + dc.netdev;
    return nullptr;
  }
  opts.netdev = !dc.netdev.empty();
  opts.mtu = dc.mtu;
  return PacketPort::open(opts, error);
}

// The MAC of the port's interface, asked of the kernel before the port
// opens.
std::optional<wire::MacAddr> mac(const DeviceConfig& dc) {
  PacketPortOptions opts;
  std::string error;
  if (!parse_port(dc.port, &opts, &error)) return std::nullopt;
  const auto m = config::netdev_mac(opts.iface);
  if (!m) return std::nullopt;
  return wire::MacAddr{*m};
}

struct Registrar {
  Registrar() { verbs::register_port_driver({"packet", claims, open, mac}); }
};
__attribute__((init_priority(200))) const Registrar registrar;

}  // namespace

}  // namespace uroce::packet
