/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "daemon/protocol.h"
#include "log/log.h"
#include "stats/stats_server.h"
#include "verbs/device.h"
#include "verbs/netdev_gids.h"
#include "verbs/port_driver.h"

namespace uroce::daemon {

namespace {

// The daemon is on every frame's path, both ways: while traffic is
// recent it keeps looking, yielding the core on each empty look (a
// program that wants it gets it; on an idle machine yield returns at
// once). Past that it naps, briefly at first (a program's next frame
// waits for the nap to end), then longer, so that an idle daemon leaves
// the cores to the programs.
constexpr engine::Nanos kYieldForNs = 5'000'000;
constexpr engine::Nanos kNapForNs = 1'000'000'000;
constexpr auto kNap = std::chrono::microseconds(20);
constexpr auto kSleep = std::chrono::milliseconds(1);
// How often a busy loop looks at the control socket.
constexpr engine::Nanos kControlEveryNs = 1'000'000;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// The socket's directory (/run/uroce by default), made if missing.
bool make_parent(const std::string& path, std::string* error) {
  const auto slash = path.rfind('/');
  if (slash == 0 || slash == std::string::npos) return true;
  const std::string dir = path.substr(0, slash);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot make " + dir + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<Server> Server::open(const Config& c, std::string* error) {
  std::unique_ptr<Server> s(new Server());
  // A daemon may start with no device and be given them with
  // `uroce link add`, as rxe's are with `rdma link add`.
  s->config_ = c;
  verbs::Device::serve_prometheus(c);
  for (const DeviceConfig& dc : c.devices)
    if (!s->add_device(dc, error)) return nullptr;

  s->path_ = c.daemon_socket;
  if (!make_parent(s->path_, error)) return nullptr;
  sockaddr_un addr{};
  if (s->path_.size() >= sizeof(addr.sun_path)) {
    *error = "daemon.socket is too long for a socket path";
    return nullptr;
  }
  s->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd_ < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, s->path_.data(), s->path_.size());
  // A socket left by a daemon that died is stale; one that answers is a
  // daemon that runs, and two must not serve the same devices.
  if (const int probe = connect_daemon(s->path_); probe >= 0) {
    close(probe);
    *error = "another uroced is serving " + s->path_;
    // Not ours to unlink: ~Server removes the socket of a daemon that
    // listened, and this one never will.
    close(s->listen_fd_);
    s->listen_fd_ = -1;
    return nullptr;
  }
  unlink(s->path_.c_str());
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(s->listen_fd_, 64) != 0) {
    *error = "cannot listen on " + s->path_ + ": " + std::strerror(errno);
    return nullptr;
  }
  // Programs of any user may attach, as any user may open a NIC's
  // /dev/infiniband/uverbs*.
  chmod(s->path_.c_str(), 0666);
  log::get().info("listening on {}", s->path_);
  return s;
}

Server::~Server() {
  // Programs see their sockets hang up and fail their devices.
  for (Conn& c : conns_) close_conn(c);
  conns_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
  for (Device& d : devices_) {
    if (d.stats_handle != 0) stats::StatsServer::instance()->remove(d.stats_handle);
    d.sw.reset();
    d.capture.reset();
    d.port.reset();
  }
}

bool Server::add_device(const DeviceConfig& dc, std::string* error) {
  for (const Device& d : devices_) {
    if (d.cfg.name == dc.name) {
      *error = dc.name + ": there is a device of that name";
      return false;
    }
  }
  const verbs::PortDriver* driver = verbs::find_port_driver(dc);
  if (!driver) {
    *error = dc.name + ": no port driver for '" + dc.port + "'";
    return false;
  }
  std::unique_ptr<port::Port> port = driver->open(dc, config_, error);
  if (!port) {
    *error = dc.name + ": " + *error;
    return false;
  }
  // The capture sees the wire: inside the faults, what they drop is not
  // on it.
  auto tapped = std::make_unique<port::CapturePort>(std::move(port));
  auto capture = std::make_unique<Capture>(*tapped);
  port = verbs::Device::with_faults(std::move(tapped), config_);
  std::vector<wire::IpAddr> gids;
  engine::EngineConfig ec;
  if (!verbs::Device::engine_setup(dc, config_, port->mac(), &gids, &ec, error)) return false;
  ec.loopback_tap = [cap = capture.get()](wire::ConstBytes f) { cap->loopback(f); };
  Device d;
  d.cfg = dc;
  if (!dc.netdev.empty()) {
    std::string why;
    d.watch = config::AddressWatch::open(dc.netdev, &why);
    if (!d.watch) log::get().warn("{}: {}; its addresses stay as they are now", dc.name, why);
    d.gids = std::make_unique<verbs::GidTable>(
        gids.front(), std::vector<wire::IpAddr>(gids.begin() + 1, gids.end()), verbs::kGidTableLen);
  }
  d.capture = std::move(capture);
  d.sw = std::make_unique<HostSwitch>(dc, *port, std::move(ec));
  d.port = std::move(port);
  if (auto* stats = stats::StatsServer::instance()) {
    HostSwitch* sw = d.sw.get();
    const Capture* cap = d.capture.get();
    d.stats_handle = stats->add(d.cfg.name, [sw, cap](std::string& out) {
      const auto line = [&](std::string_view scope, std::string_view name, std::uint64_t v) {
        out.append(scope).append(" ").append(name).append(" ").append(std::to_string(v));
        out.append("\n");
      };
      sw->for_each_counter(line);
      cap->for_each_counter(
          [&](std::string_view name, std::uint64_t v) { line("capture", name, v); });
    });
  }
  devices_.push_back(std::move(d));
  log::get().info("{}: serving on {}", dc.name, dc.port);
  return true;
}

int Server::delete_device(const std::string& name, std::string* error) {
  const auto it = std::find_if(devices_.begin(), devices_.end(),
                               [&](const Device& d) { return d.cfg.name == name; });
  if (it == devices_.end()) {
    *error = "no device " + name;
    return ENODEV;
  }
  // Programs hold QPs and memory on it; a capture is a user's too. The
  // kernel would take an rxe device from under its users; uroce asks
  // them to go first.
  if (const std::size_t n = it->sw->programs().size(); n != 0) {
    *error = name + " has " + std::to_string(n) + " program(s) attached";
    return EBUSY;
  }
  if (it->capture->clients() != 0) {
    *error = name + " is being captured";
    return EBUSY;
  }
  if (it->stats_handle != 0) stats::StatsServer::instance()->remove(it->stats_handle);
  log::get().info("{}: deleted (it was on {})", name, it->cfg.port);
  // The switch (its engine frees frames into the port) before the port,
  // as ~Server does: erase would move the later devices over this one
  // member by member, the port first.
  it->sw.reset();
  it->capture.reset();
  it->port.reset();
  devices_.erase(it);
  return 0;
}

std::string Server::links() const {
  std::string out;
  for (const Device& d : devices_) {
    const DeviceConfig& dc = d.cfg;
    out += dc.name + " state=" + (d.port->link_up() ? "up" : "down") + " netdev=" + dc.netdev +
           " port=" + dc.port + " mtu=" + std::to_string(d.port->mtu()) +
           " programs=" + std::to_string(d.sw->programs().size()) + " gids=";
    for (std::size_t i = 0; i < dc.ip.size(); ++i) out += (i ? "," : "") + dc.ip[i].address;
    out += "\n";
  }
  return out;
}

std::string Server::devices_toml() const {
  std::string out;
  for (const Device& d : devices_) {
    const DeviceConfig& dc = d.cfg;
    out += "[[device]]\nname = " + quoted(dc.name) + "\nport = " + quoted("uroced:" + dc.name) +
           (dc.netdev.empty() ? "" : "\nnetdev = " + quoted(dc.netdev)) + "\nip = [";
    for (std::size_t i = 0; i < dc.ip.size(); ++i)
      out += (i ? ", " : "") + quoted(dc.ip[i].address + "/" + std::to_string(dc.ip[i].prefix));
    out += "]\nmtu = " + std::to_string(d.port->mtu()) + "\ndscp = " + std::to_string(dc.dscp) +
           "\npcp = " + std::to_string(dc.pcp) +
           "\npriority_tag = " + (dc.priority_tag ? "true" : "false") +
           "\nvlan_id = " + std::to_string(dc.vlan_id) + "\necn = " + (dc.ecn ? "true" : "false") +
           "\nselective_repeat = " + (dc.selective_repeat ? "true" : "false") +
           "\nlink_wait_ms = 0\n";
  }
  return out;
}

void Server::run(const std::atomic<bool>& stop) {
  for (Device& d : devices_) d.port->attach_thread();
  engine::Nanos worked_at = engine::now_ns();
  engine::Nanos control_at = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const engine::Nanos now = engine::now_ns();
    const engine::Nanos idle = now - worked_at;
    const bool control = now >= control_at || idle > kYieldForNs;
    if (control) control_at = now + kControlEveryNs;
    if (run_once(control) > 0) {
      worked_at = now;
      continue;
    }
    if (idle < kYieldForNs) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(idle < kNapForNs ? kNap : kSleep);
    }
  }
}

std::uint32_t Server::run_once(bool control) {
  std::uint32_t work = 0;
  const engine::Nanos now = engine::now_ns();
  for (Device& d : devices_) work += d.sw->engine().poll(now);
  if (control) {
    follow_addresses();
    serve_control();
  }
  return work;
}

void Server::follow_addresses() {
  // A port on a kernel interface reads its MTU again (programs that
  // attach from now on are told it), every 100 ms as a device does.
  const engine::Nanos now = engine::now_ns();
  const bool mtu = now - followed_at_ >= 100'000'000;
  if (mtu) followed_at_ = now;
  for (Device& d : devices_) {
    if (mtu) d.port->link_up();
    if (!d.watch || !d.watch->changed()) continue;
    // Programs that attach from now on are given the addresses in the
    // table's order (d.cfg.ip): their GID indices are the daemon's while
    // the table has no empty entry (the list they are given has none).
    const auto changed = verbs::reread_netdev(d.cfg.netdev, *d.gids, d.cfg.ip);
    if (!changed || !*changed) continue;
    // Programs attached follow the interface themselves (verbs::Device);
    // the host's switch and engine take and check frames for the new set.
    d.sw->set_addresses(d.gids->addresses());
    log::get().info("{}: the interface's addresses changed, {} now", d.cfg.name, d.cfg.ip.size());
  }
}

void Server::serve_control() {
  std::vector<pollfd> fds;
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const Conn& c : conns_) fds.push_back({c.fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), 0) <= 0) return;
  // Requests first (the connections polled), then new connections.
  std::vector<Conn> keep;
  keep.reserve(conns_.size());
  for (std::size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    const short ev = fds[i + 1].revents;
    if (ev == 0 || serve(c)) {
      keep.push_back(c);
    } else {
      close_conn(c);
    }
  }
  conns_.swap(keep);
  if (fds[0].revents & POLLIN) {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(fd);
        continue;
      }
      conns_.push_back({fd, cred.pid, cred.uid, nullptr, nullptr, nullptr});
    }
  }
}

bool Server::may_manage(const Conn& c) { return c.uid == 0 || c.uid == geteuid(); }

bool Server::serve(Conn& c) {
  Message m;
  const int r = recv_message(c.fd, &m);
  if (r < 0 && errno == EAGAIN) return true;
  if (r <= 0) return false;  // hung up (exited, killed), or spoke nonsense
  // Programs hand us no descriptors, but the file of an XRC domain, which
  // is read (its inode) and closed right away.
  const int file = m.op == Op::kXrcdOpen ? m.fd : -1;
  if (m.fd >= 0 && file < 0) close(m.fd);
  if (c.capture) {  // a capture's connection only receives
    if (file >= 0) close(file);
    return false;
  }
  const auto reply = [&](Op op, std::uint32_t value, std::string text = {}, int fd = -1) {
    Message out;
    out.op = op;
    out.value = value;
    out.text = std::move(text);
    out.fd = fd;
    // A program that does not read its replies loses its connection.
    return send_message(c.fd, out);
  };
  switch (m.op) {
    case Op::kList:
      return reply(Op::kDevices, 0, devices_toml());
    case Op::kPortInfo:
      for (Device& d : devices_)
        if (d.cfg.name == m.text) return reply(Op::kPort, 0, format_port_info(port_info(d)));
      return reply(Op::kError, ENODEV, "no device " + m.text);
    case Op::kAttach: {
      if (c.program) return reply(Op::kError, EBUSY, "this connection is attached already");
      for (Device& d : devices_) {
        if (d.cfg.name != m.text) continue;
        std::string err;
        Program* p = d.sw->attach(c.fd, c.pid, &err);
        if (!p) return reply(Op::kError, ENOMEM, err);
        c.sw = d.sw.get();
        c.program = p;
        log::get().info("{}: pid {} attached", d.cfg.name, c.pid);
        return reply(Op::kAttached, 0, format_port_info(port_info(d)), p->rings().fd());
      }
      return reply(Op::kError, ENODEV, "no device " + m.text);
    }
    case Op::kAllocQpn: {
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      const std::uint32_t q = c.sw->alloc_qpn(*c.program);
      if (q == 0) return reply(Op::kError, ENOMEM, "no QPN left for this program");
      return reply(Op::kQpn, q);
    }
    case Op::kCmServices: {
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      std::vector<std::uint64_t> sids;
      const char* p = m.text.c_str();
      while (*p) {
        char* end = nullptr;
        sids.push_back(std::strtoull(p, &end, 16));
        if (end == p || (*end != ',' && *end != '\0'))
          return reply(Op::kError, EINVAL, "not a list of ServiceIDs");
        p = *end == ',' ? end + 1 : end;
      }
      c.sw->set_cm_services(*c.program, sids);
      return reply(Op::kDone, 0);
    }
    case Op::kCmBind: {
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      std::uint64_t sid = 0;
      wire::IpAddr ip;
      unsigned flags = 0;
      if (!parse_cm_binding(m.text, &sid, &ip, &flags))
        return reply(Op::kError, EINVAL, "not a binding");
      // cma_use_port: a port below 1024 is for a privileged user only.
      if ((sid & 0xffff) < 1024 && c.uid != 0) return reply(Op::kDone, EACCES);
      return reply(Op::kDone, static_cast<std::uint32_t>(
                                  c.sw->bind_cm_port(*c.program, m.value, sid, ip, flags)));
    }
    case Op::kCmUnbind:
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      c.sw->unbind_cm_port(*c.program, m.value);
      return reply(Op::kDone, 0);
    case Op::kXrcdOpen: {
      std::int64_t d = -EINVAL;
      if (c.program && file >= 0)
        d = c.sw->open_xrc_domain(*c.program, file, std::atoi(m.text.c_str()));
      if (file >= 0) close(file);
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      if (d < 0) return reply(Op::kError, static_cast<std::uint32_t>(-d), "no such XRC domain");
      return reply(Op::kDone, static_cast<std::uint32_t>(d));
    }
    case Op::kXrcdClose:
      if (!c.program || !c.sw->close_xrc_domain(*c.program, m.value))
        return reply(Op::kError, EINVAL, "not an XRC domain this program has open");
      return reply(Op::kDone, 0);
    case Op::kXrcSrqAdd:
      if (!c.program ||
          !c.sw->add_xrc_srq(*c.program, static_cast<std::uint32_t>(std::atoi(m.text.c_str())),
                             m.value))
        return reply(Op::kError, EINVAL, "not an SRQ number of this program's, or no domain");
      return reply(Op::kDone, 0);
    case Op::kXrcSrqRemove:
      if (!c.program || !c.sw->remove_xrc_srq(*c.program, m.value))
        return reply(Op::kError, EINVAL, "not an XRC SRQ of this program's");
      return reply(Op::kDone, 0);
    case Op::kXrcTgtOpen: {
      if (!c.program) return reply(Op::kError, EINVAL, "not attached");
      unsigned long domain = 0;
      int create = 0;
      if (std::sscanf(m.text.c_str(), "%lu %d", &domain, &create) != 2)
        return reply(Op::kError, EINVAL, "not \"<domain> <create>\"");
      auto d = static_cast<std::uint32_t>(domain);
      const int fd = c.sw->open_xrc_target(*c.program, &d, m.value, create != 0);
      if (fd < 0) return reply(Op::kError, static_cast<std::uint32_t>(-fd), "no such target QP");
      return reply(Op::kDone, d, {}, fd);  // the descriptor stays the daemon's
    }
    case Op::kXrcTgtClose:
      if (!c.program || !c.sw->close_xrc_target(*c.program, m.value))
        return reply(Op::kError, EINVAL, "not a target QP this program made");
      return reply(Op::kDone, 0);
    case Op::kFreeQpn:
      if (!c.program || !c.sw->free_qpn(*c.program, m.value))
        return reply(Op::kError, EINVAL, "not a QPN of this program");
      return reply(Op::kDone, 0);
    case Op::kCapture: {
      if (c.program) return reply(Op::kError, EBUSY, "this connection is attached");
      for (Device& d : devices_) {
        if (!m.text.empty() && d.cfg.name != m.text) continue;
        if (!reply(Op::kDone, 0, d.cfg.name)) return false;
        d.capture->add(c.fd);
        c.capture = d.capture.get();
        log::get().info("{}: pid {} captures", d.cfg.name, c.pid);
        return true;
      }
      return reply(Op::kError, ENODEV, "no device " + m.text);
    }
    case Op::kLinkAdd: {
      if (!may_manage(c)) return reply(Op::kError, EPERM, "uroce link add is root's");
      // The table is read here, in the daemon's network namespace, as
      // the daemon's own configuration is: a netdev device's addresses
      // are those of the daemon's interface.
      const ConfigResult r = parse_config(m.text, "uroce link add", {});
      if (!r.config) return reply(Op::kError, EINVAL, r.error);
      if (r.config->devices.size() != 1)
        return reply(Op::kError, EINVAL, "uroce link add: one [[device]] table");
      // A netdev device on one of the three ports, nothing else: the port
      // string and the MTU are the daemon's to choose (a vdev's arguments
      // load programs, an MTU is set on the kernel's interface).
      const DeviceConfig& dc = r.config->devices.front();
      const std::string tail = "_" + dc.name + ",iface=" + dc.netdev;
      if (dc.netdev.empty() ||
          (dc.port != "net_af_packet" + tail && dc.port != "net_af_xdp" + tail &&
           dc.port != "packet:" + dc.netdev) ||
          dc.mtu != 0 || dc.hugepages)
        return reply(Op::kError, EINVAL,
                     "uroce link add: a name, netdev and port af_packet, af_xdp or packet only");
      std::string err;
      if (!add_device(r.config->devices.front(), &err)) return reply(Op::kError, EINVAL, err);
      // This thread runs the devices (run_once).
      devices_.back().port->attach_thread();
      return reply(Op::kDone, 0, r.config->devices.front().name);
    }
    case Op::kLinkDelete: {
      if (!may_manage(c)) return reply(Op::kError, EPERM, "uroce link delete is root's");
      std::string err;
      if (const int rc = delete_device(m.text, &err); rc != 0) return reply(Op::kError, rc, err);
      return reply(Op::kDone, 0);
    }
    case Op::kLinkShow:
      return reply(Op::kLinks, 0, links());
    default:
      return reply(Op::kError, EINVAL, "not a request");
  }
}

PortInfo Server::port_info(const Device& d) {
  PortInfo info;
  const wire::MacAddr mac = d.port->mac();
  std::memcpy(info.mac, mac.bytes.data(), 6);
  info.mtu = d.port->mtu();
  info.speed_mbps = d.port->speed_mbps();
  return info;
}

void Server::close_conn(Conn& c) {
  if (c.capture) c.capture->remove(c.fd);
  if (c.program) {
    log::get().info("{}: pid {} detached, {} QPs released", c.sw->config().name, c.pid,
                    c.program->qp_count());
    c.sw->detach(c.program);
  }
  close(c.fd);
  c.fd = -1;
}

}  // namespace uroce::daemon
