/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/discovery.h"

#include <unistd.h>

#include <cstring>
#include <optional>

#include "daemon/attached_port.h"
#include "daemon/protocol.h"
#include "log/log.h"
#include "verbs/port_driver.h"

namespace uroce::daemon {

namespace {

constexpr std::string_view kScheme = "uroced:";

std::unique_ptr<port::Port> open_attached(const DeviceConfig& dc, const Config& c,
                                          std::string* error) {
  return AttachedPort::open(c.daemon_socket, dc.port.substr(kScheme.size()), error);
}

// The MAC before the device is opened (ibv_get_device_guid, and
// librdmacm matching the CM's device to the verbs one by it).
std::optional<wire::MacAddr> port_mac(const DeviceConfig& dc) {
  const ConfigResult r = load_config();
  if (!r.config) return std::nullopt;
  const int sock = connect_daemon(r.config->daemon_socket);
  if (sock < 0) return std::nullopt;
  Message req;
  req.op = Op::kPortInfo;
  req.text = dc.port.substr(kScheme.size());
  Message reply;
  const bool ok = call(sock, req, &reply);
  close(sock);
  PortInfo info;
  if (!ok || reply.op != Op::kPort || !parse_port_info(reply.text, &info)) return std::nullopt;
  wire::MacAddr mac;
  std::memcpy(mac.bytes.data(), info.mac, 6);
  return mac;
}

// Registered as drivers/dpdk registers its own (verbs/port_driver.h).
struct Registrar {
  Registrar() {
    verbs::register_port_driver({"uroced", is_daemon_device, open_attached, port_mac});
  }
};
__attribute__((init_priority(200))) const Registrar registrar;

}  // namespace

bool is_daemon_device(const DeviceConfig& dc) { return dc.port.starts_with(kScheme); }

std::vector<DeviceConfig> daemon_devices(const Config& c) {
  const int sock = connect_daemon(c.daemon_socket);
  if (sock < 0) return {};
  Message req;
  req.op = Op::kList;
  Message reply;
  const bool ok = call(sock, req, &reply);
  close(sock);
  if (!ok || reply.op != Op::kDevices) {
    log::get().warn("uroced on {} did not list its devices", c.daemon_socket);
    return {};
  }
  ConfigResult r = parse_config(reply.text, "uroced's device list", {});
  if (!r.config) {
    log::get().warn("uroced's device list: {}", r.error);
    return {};
  }
  return r.config->devices;
}

}  // namespace uroce::daemon
