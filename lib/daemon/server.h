/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// uroced's core: the devices of the configuration, each on its port with
// its HostSwitch, the control socket programs attach through, and the one
// loop that runs them all. A program that attaches gets its rings; one
// whose socket hangs up (it exited, or was killed) loses its rings and its
// QPNs at once. When the daemon stops, every program's socket hangs up and
// their devices fail (IBV_EVENT_DEVICE_FATAL).

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "config/address_watch.h"
#include "daemon/capture.h"
#include "daemon/host_switch.h"
#include "daemon/protocol.h"
#include "port/port.h"
#include "uroce/config.h"
#include "verbs/gid_table.h"

namespace uroce::daemon {

class Server {
 public:
  /// Opens every device of `c` (its port through the port driver that
  /// claims it, with the configured faults) and listens on
  /// c.daemon_socket. Null with *error (naming the device or the socket)
  /// on failure.
  static std::unique_ptr<Server> open(const Config& c, std::string* error);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Runs the devices and the socket until `stop` is set.
  void run(const std::atomic<bool>& stop);
  /// One iteration: every device's engine, then (when `control` holds)
  /// the socket. Returns the work done (frames received and sent).
  std::uint32_t run_once(bool control);

  const std::string& socket_path() const { return path_; }
  std::size_t device_count() const { return devices_.size(); }
  HostSwitch& device(std::size_t i) { return *devices_[i].sw; }
  /// The devices as the [[device]] tables a program parses (kDevices).
  std::string devices_toml() const;

 private:
  struct Device {
    DeviceConfig cfg;
    std::unique_ptr<port::Port> port;
    std::unique_ptr<Capture> capture;  ///< on the port's CapturePort, inside the faults
    std::unique_ptr<HostSwitch> sw;
    int stats_handle = 0;
    /// A netdev device's addresses follow its interface's: the watch,
    /// and the table that keeps each address's place (cfg.ip is the list
    /// programs that attach are given).
    std::unique_ptr<config::AddressWatch> watch;
    std::unique_ptr<verbs::GidTable> gids;
  };
  struct Conn {
    int fd = -1;
    pid_t pid = 0;
    uid_t uid = 0;  ///< who it is (SO_PEERCRED): uroce link is root's and the daemon's user's
    HostSwitch* sw = nullptr;  ///< the device it attached to, if any
    Program* program = nullptr;
    Capture* capture = nullptr;  ///< the device it captures, if it asked to
  };

  Server() = default;
  /// Opens device `dc` (its port through the port driver that claims it,
  /// with the configuration's faults) and serves it from now on.
  bool add_device(const DeviceConfig& dc, std::string* error);
  /// Removes device `name`: ENODEV when there is none, EBUSY while
  /// programs are attached to it. 0 when done.
  int delete_device(const std::string& name, std::string* error);
  /// One line per device for `uroce link show` (protocol.h, kLinks).
  std::string links() const;
  /// Whether `c` may add and delete devices: root, or the daemon's user
  /// (the socket is open to every program of the host).
  static bool may_manage(const Conn& c);
  void serve_control();
  /// Takes what the interfaces of netdev devices gained or lost, and
  /// their MTU.
  void follow_addresses();
  /// Answers what `c` asks; false when the connection is to close.
  bool serve(Conn& c);
  void close_conn(Conn& c);
  static PortInfo port_info(const Device& d);

  /// The daemon's configuration: the faults, PFC and EAL settings a
  /// device added later is opened with.
  Config config_;
  std::string path_;
  int listen_fd_ = -1;
  std::vector<Device> devices_;
  std::vector<Conn> conns_;
  engine::Nanos followed_at_ = 0;  ///< when follow_addresses last read the MTUs
};

}  // namespace uroce::daemon
