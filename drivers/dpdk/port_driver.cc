/* SPDX-License-Identifier: BSD-3-Clause */
// The driver of DPDK ports (verbs/port_driver.h): EAL once per process,
// then the ethdev a device's configuration names. It registers itself
// when the library is loaded, as DPDK's PMDs do; programs link this
// library whole (CMake's WHOLE_ARCHIVE) so that its registration is kept.

#include "verbs/port_driver.h"

#include "config/netdev.h"
#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"

namespace uroce::dpdk {

namespace {

// Every port string is DPDK's, a vdev or a PCI address, but those of the
// device daemon's devices ("uroced:<device>", lib/daemon's driver) and
// uroce's own packet ports ("packet:<iface>", drivers/packet).
// net_af_packet has a socket per queue pair (qpairs=), in one fanout
// group that spreads received frames over them by flow hash: a device on
// several lcores gets one per lcore unless the string says otherwise.
std::string with_queues(const std::string& port, std::uint16_t lcores) {
  if (lcores <= 1 || !port.starts_with("net_af_packet") ||
      port.find("qpairs=") != std::string::npos)
    return port;
  return port + ",qpairs=" + std::to_string(lcores);
}

bool claims(const DeviceConfig& dc) {
  return !dc.port.starts_with("uroced:") && !dc.port.starts_with("packet:");
}

std::unique_ptr<port::Port> open(const DeviceConfig& dc, const Config& c, std::string* error) {
  // EAL starts once per process and probes its devices then: hand it
  // every configured device's port, not only this one's.
  EalOptions eal;
  eal.devices = {with_queues(dc.port, dc.lcores)};
  eal.hugepages = dc.hugepages;
  for (const DeviceConfig& other : c.devices) {
    if (other.port == dc.port) continue;
    eal.devices.push_back(with_queues(other.port, other.lcores));
    eal.hugepages = eal.hugepages || other.hugepages;
  }
  eal.memory_mb = c.eal_memory_mb;
  eal.args = c.eal_args;
  if (auto err = eal_init(eal); !err.empty()) {
    *error = err;
    return nullptr;
  }
  PortOptions po;
  po.mtu = dc.mtu != 0 ? dc.mtu : kernel_iface_mtu(dc.port);
  // Unless the configuration sets it, a kernel interface's MTU is the
  // port's, as it changes.
  po.follow_mtu = dc.mtu == 0;
  po.netdev = dc.netdev;
  po.queues = dc.lcores;
  return DpdkPort::open(with_queues(dc.port, dc.lcores), po, error);
}

// The MAC of an af_packet port's interface, asked of the kernel before
// the port opens.
std::optional<wire::MacAddr> mac(const DeviceConfig& dc) {
  const auto m = config::netdev_mac(kernel_iface(dc.port));
  if (!m) return std::nullopt;
  return wire::MacAddr{*m};
}

// Registered ahead of the program's own static initialisers (priority
// 200 runs before the default), so that a program may open a device from
// one of them.
struct Registrar {
  Registrar() { verbs::register_port_driver({"dpdk", claims, open, mac}); }
};
__attribute__((init_priority(200))) const Registrar registrar;

}  // namespace

}  // namespace uroce::dpdk
