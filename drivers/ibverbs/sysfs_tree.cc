/* SPDX-License-Identifier: BSD-3-Clause */
#include "ibverbs/sysfs_tree.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "ibverbs/provider.h"
#include "log/log.h"
#include "verbs/device.h"
#include "verbs/limits.h"
#include "verbs/port_driver.h"

namespace uroce::ibverbs {

namespace {

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  return std::fclose(f) == 0 && ok;
}

bool make_dir(const std::string& path) { return mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

// The counters' writers take turns: the threads of a process on
// counters_mu, the processes of the namespace on the port directory's
// flock, taken only under counters_mu. A fork must not fall inside that
// turn. The child would start with counters_mu held and with a copy of
// the descriptor that holds the flock, which no thread of it will close:
// its first update (when it opens or closes the device) would wait
// forever, as would every later program of the namespace on the flock.
// So fork waits for the turn to end (pthread_atfork below), as programs
// that fork with a device open do: rdma-core's tests, MPI launchers.
std::mutex counters_mu;
// What each device had counted when this process last wrote its files.
std::map<std::string, std::map<std::string, std::uint64_t>> counters_written;

void hold_counters_across_fork() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { counters_mu.lock(); }, [] { counters_mu.unlock(); },
                   [] { counters_mu.unlock(); });
  });
}

// A GID as the kernel prints one (%pI6): eight groups of four hex digits.
std::string gid_text(const wire::IpAddr& g) {
  char s[40];
  char* p = s;
  for (int i = 0; i < 16; i += 2)
    p += std::snprintf(p, 6, "%02x%02x%s", g.bytes[i], g.bytes[i + 1], i < 14 ? ":" : "");
  return s;
}

// The node GUID of a MAC, "xxxx:xxxx:xxxx:xxxx" (its modified EUI-64).
std::string guid_text(const wire::MacAddr& m) {
  char s[20];
  std::snprintf(s, sizeof s, "%02x%02x:%02xff:fe%02x:%02x%02x", m.bytes[0] ^ 2, m.bytes[1],
                m.bytes[2], m.bytes[3], m.bytes[4], m.bytes[5]);
  return s;
}

// ports/N/rate as the kernel's rate_show prints it: the lanes times the
// lane rate of the IB speed code, "10 Gb/sec (1X QDR)".
std::string rate_text(std::uint8_t width, std::uint8_t speed) {
  const int lanes = width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : width == 16 ? 2 : 1;
  struct Speed {
    std::uint8_t code;
    int tenths;  // Gb/s per lane, in tenths
    const char* name;
  };
  static constexpr Speed kSpeeds[] = {{1, 25, "SDR"},    {2, 50, "DDR"},    {4, 100, "QDR"},
                                      {8, 100, "FDR10"}, {16, 140, "FDR"},  {32, 250, "EDR"},
                                      {64, 500, "HDR"},  {128, 1000, "NDR"}};
  const Speed* s = &kSpeeds[0];
  for (const Speed& k : kSpeeds)
    if (k.code == speed) s = &k;
  const int t = lanes * s->tenths;
  char out[48];
  std::snprintf(out, sizeof out, "%d%s Gb/sec (%dX %s)", t / 10, t % 10 ? ".5" : "", lanes,
                s->name);
  return out;
}

// The kernel interface a port on it names (net_af_packet's and net_tap's
// iface=), or "".
std::string interface_of(const std::string& port) {
  const std::size_t at = port.find("iface=");
  if (at == std::string::npos) return "";
  const std::size_t from = at + 6;
  return port.substr(from, port.find(',', from) - from);
}

std::string device_dir(const std::string& name) { return sysfs_root() + "/" + name; }

// Port 1's GID table of `table_len` entries (at least) as ibv_query_gid
// reads it: each populated entry RoCE v2 on the port's interface `ifname`; the kernel refuses to
// read the attributes of an empty entry, so here they are absent.
bool write_gids(const std::string& port_dir, const std::vector<wire::IpAddr>& gids,
                const std::string& ifname, std::size_t table_len) {
  const std::size_t table = std::max(table_len, gids.size());
  for (std::size_t i = 0; i < table; ++i) {
    const std::string n = std::to_string(i);
    const bool set = i < gids.size() && gids[i] != wire::IpAddr{};
    if (!write_file(port_dir + "gids/" + n, gid_text(set ? gids[i] : wire::IpAddr{}) + "\n"))
      return false;
    const std::string type = port_dir + "gid_attrs/types/" + n;
    const std::string ndev = port_dir + "gid_attrs/ndevs/" + n;
    if (set) {
      if (!write_file(type, "RoCE v2\n") || !write_file(ndev, ifname + "\n")) return false;
    } else {
      unlink(type.c_str());
      unlink(ndev.c_str());
    }
  }
  return true;
}

// A netdev device's interface is its netdev, a daemon's device included
// (its port names the daemon, not the interface).
std::string interface_of(const DeviceConfig& dc) {
  return dc.netdev.empty() ? interface_of(dc.port) : dc.netdev;
}

}  // namespace

const std::string& sysfs_root() {
  static const std::string root = [] {
    const char* r = std::getenv("UROCE_SYSFS_TREE");
    return std::string(r ? r : "");
  }();
  return root;
}

void update_sysfs_port(const std::string& device, bool active, std::uint8_t width,
                       std::uint8_t speed) {
  if (sysfs_root().empty()) return;
  const std::string port = device_dir(device) + "/ports/1/";
  write_file(port + "state", active ? "4: ACTIVE\n" : "1: DOWN\n");
  write_file(port + "phys_state", active ? "5: LinkUp\n" : "3: Disabled\n");
  write_file(port + "rate", rate_text(width, speed) + "\n");
}

void update_sysfs_counters(verbs::Device& dev) {
  if (sysfs_root().empty()) return;
  const std::string port = device_dir(dev.name()) + "/ports/1/";
  std::map<std::string, std::uint64_t, std::less<>> engine;
  std::uint64_t malformed = 0;
  std::vector<std::pair<std::string, std::uint64_t>> now;
  dev.for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
    if (scope == "engine") engine.emplace(name, v);
    if (scope == "drop") malformed += v;
    if (scope == "port") now.emplace_back("hw_counters/" + std::string(name), v);
  });
  const auto at = [&](const char* name) {
    const auto it = engine.find(name);
    return it == engine.end() ? 0 : it->second;
  };
  // counters/: the port counters of IBA 16.1.3.5 (PortCounters and
  // PortCountersExtended) as a RoCE NIC's PMA reports them, data in
  // 32-bit words. What a software port has no cause for (symbol and link
  // errors, VL15, waits) stays 0.
  const std::uint64_t tx = at("tx_frames"), rx = at("rx_frames");
  const std::pair<const char*, std::uint64_t> pma[] = {
      {"port_xmit_data", at("tx_bytes") / 4},
      {"port_rcv_data", at("rx_bytes") / 4},
      {"port_xmit_packets", tx},
      {"port_rcv_packets", rx},
      {"unicast_xmit_packets", tx - std::min(tx, at("multicast_xmit_packets"))},
      {"unicast_rcv_packets", rx - std::min(rx, at("multicast_rcv_packets"))},
      {"multicast_xmit_packets", at("multicast_xmit_packets")},
      {"multicast_rcv_packets", at("multicast_rcv_packets")},
      {"port_xmit_discards", at("tx_dropped")},
      {"port_rcv_discards", at("rx_buffer_dropped")},
      {"port_rcv_errors", malformed},
      {"symbol_error", 0},
      {"link_error_recovery", 0},
      {"link_downed", 0},
      {"port_rcv_remote_physical_errors", 0},
      {"port_rcv_switch_relay_errors", 0},
      {"port_xmit_constraint_errors", 0},
      {"port_rcv_constraint_errors", 0},
      {"local_link_integrity_errors", 0},
      {"excessive_buffer_overrun_errors", 0},
      {"VL15_dropped", 0},
      {"port_xmit_wait", 0},
  };
  for (const auto& [name, v] : pma) now.emplace_back(std::string("counters/") + name, v);

  // The tree is the namespace's, as a NIC's counters count every program
  // since the port came up; each program's device counts its own. So a
  // program adds to each file what its device counted since it last
  // wrote, holding the port directory's lock against the others.
  hold_counters_across_fork();
  std::lock_guard lock(counters_mu);
  auto& last = counters_written[dev.name()];
  const int dir = open(port.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || flock(dir, LOCK_EX) != 0) {
    if (dir >= 0) close(dir);
    return;
  }
  bool ok = true;
  for (const auto& [file, v] : now) {
    std::uint64_t& seen = last[file];
    const std::uint64_t delta = v >= seen ? v - seen : 0;
    std::uint64_t total = 0;
    if (std::FILE* f = std::fopen((port + file).c_str(), "r")) {
      if (std::fscanf(f, "%" SCNu64, &total) != 1) total = 0;
      std::fclose(f);
    }
    if (delta == 0 && total != 0) continue;  // unchanged (a new file is written with 0)
    ok = ok && write_file(port + file, std::to_string(total + delta) + "\n");
    seen = v;
  }
  close(dir);  // and with it the lock
  if (!ok)
    log::get().warn("{}: rewriting its sysfs counters failed: {}", dev.name(),
                    std::strerror(errno));
}

void forget_sysfs_counters(const std::string& device) {
  std::lock_guard lock(counters_mu);
  counters_written.erase(device);
}

void update_sysfs_gids(const verbs::Device& dev) {
  if (sysfs_root().empty()) return;
  if (!write_gids(device_dir(dev.name()) + "/ports/1/", dev.gids(), interface_of(dev.config()),
                  dev.port_attr().gid_tbl_len))
    log::get().warn("{}: rewriting its sysfs GID table failed: {}", dev.name(),
                    std::strerror(errno));
}

bool write_sysfs_device(const UDevice& u) {
  if (sysfs_root().empty()) return true;
  const DeviceConfig& dc = u.cfg;
  const std::string d = device_dir(dc.name);
  // The first program of the namespace writes it; the programs it starts
  // (which inherit the preload) find it there without asking the port
  // (or its daemon) for its MAC again, and a device once open keeps its
  // port's files current.
  struct stat st;
  if (stat(d.c_str(), &st) == 0) return true;
  const auto mac = mac_before_open(dc);
  std::string err;
  const std::vector<wire::IpAddr> gids =
      mac ? verbs::Device::gid_table(dc, *mac, &err) : std::vector<wire::IpAddr>{};
  if (gids.empty()) {
    log::get().warn("{}: no sysfs tree: {}", dc.name, mac ? err : "the port's MAC is unknown");
    return false;
  }
  const std::string ifname = interface_of(dc);
  const std::string guid = guid_text(*mac) + "\n";
  bool ok = make_dir(d) && make_dir(d + "/device") && make_dir(d + "/device/net") &&
            make_dir(d + "/ports") && make_dir(d + "/ports/1") && make_dir(d + "/ports/1/gids") &&
            make_dir(d + "/ports/1/gid_attrs") && make_dir(d + "/ports/1/gid_attrs/types") &&
            make_dir(d + "/ports/1/gid_attrs/ndevs") && make_dir(d + "/ports/1/pkeys") &&
            make_dir(d + "/ports/1/counters") && make_dir(d + "/ports/1/hw_counters");
  // The device: what libibumad requires (node_type, node_guid,
  // sys_image_guid) and what ibstat shows besides.
  ok = ok && write_file(d + "/node_type", "1: CA\n") && write_file(d + "/node_guid", guid) &&
       write_file(d + "/sys_image_guid", guid) &&
       write_file(d + "/fw_ver", std::string("uroce ") + UROCE_VERSION + "\n") &&
       write_file(d + "/hw_rev", "0\n") && write_file(d + "/hca_type", "uroce\n") &&
       write_file(d + "/board_id", std::string("uroce-") + UROCE_VERSION + "\n") &&
       write_file(d + "/node_desc", dc.name + " uroce\n");
  // device/: no PCI function behind it (NCCL and hwloc take the device
  // as attached to the first CPU); its driver's name is what Open MPI's
  // pml ucx matches against pml_ucx_devices; net/ names its interface.
  ok = ok && write_file(d + "/device/numa_node", "-1\n") && make_dir(d + "/device/uroce") &&
       (symlink("uroce", (d + "/device/driver").c_str()) == 0 || errno == EEXIST);
  if (!ifname.empty()) {
    symlink(("/sys/class/net/" + ifname).c_str(), (d + "/device/net/" + ifname).c_str());
  }
  // Port 1, a RoCE port: no LID, no SM; its GID table.
  const std::string p = d + "/ports/1/";
  char cap[16];
  std::snprintf(cap, sizeof cap, "0x%08x\n", IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS);
  ok = ok && write_file(p + "lid", "0x0\n") && write_file(p + "sm_lid", "0x0\n") &&
       write_file(p + "sm_sl", "0\n") && write_file(p + "lid_mask_count", "0\n") &&
       write_file(p + "cap_mask", cap) && write_file(p + "link_layer", "Ethernet\n") &&
       write_file(p + "pkeys/0", "0xffff\n") &&
       // hw_counters' refresh period in ms, as the kernel's (the device
       // rewrites the counters about once a second: update_sysfs_counters).
       write_file(p + "hw_counters/lifespan", "10\n");
  ok = ok && write_gids(p, gids, ifname, verbs::kGidTableLen);
  if (!ok) {
    log::get().warn("{}: writing its sysfs tree in {} failed: {}", dc.name, d,
                    std::strerror(errno));
    return false;
  }
  // Before the port opens it is taken as up, at what af_packet reports.
  update_sysfs_port(dc.name, true, 1, 4);
  return true;
}

}  // namespace uroce::ibverbs
