/* SPDX-License-Identifier: BSD-3-Clause */
// Loading and validating the configuration. The file is TOML, read one
// function per table through config/toml_reader.h; environment variables
// override single keys for one-off runs. Every error names the key, and
// where it came from, and why.

#include "uroce/config.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "config/netdev.h"
#include "config/toml_reader.h"

extern char** environ;

namespace uroce {
namespace {

using config::fail;
using config::TomlReader;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A value from the environment, typed as it reads: integer, float,
// boolean, or else string.
void set_from_text(toml::table& t, const std::string& key, const std::string& text) {
  char* end = nullptr;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0') {
    t.insert_or_assign(key, i);
    return;
  }
  const double d = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0') {
    t.insert_or_assign(key, d);
    return;
  }
  if (lower(text) == "true" || lower(text) == "false") {
    t.insert_or_assign(key, lower(text) == "true");
    return;
  }
  t.insert_or_assign(key, text);
}

toml::array split_list(const std::string& text, char sep) {
  toml::array a;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) {
    if (!item.empty()) a.push_back(item);
  }
  return a;
}

toml::table& subtable(toml::table& root, const std::string& name) {
  if (!root.contains(name)) root.insert(name, toml::table{});
  auto* t = root[name].as_table();
  if (!t) fail(name, "must be a table");
  return *t;
}

// Applies UROCE_<TABLE>_<KEY> and UROCE_DEVICE<N>_<KEY> variables to the
// parsed file; remembers which keys they set, for error messages.
void apply_env(toml::table& root, const std::vector<std::string>& env,
               std::map<std::string, std::string>& origin) {
  for (const std::string& kv : env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    const std::string value = kv.substr(eq + 1);
    if (name == "UROCE_LOG") {
      subtable(root, "log").insert_or_assign("level", value);
      origin["log.level"] = name;
      continue;
    }
    // UROCE_STATS_DIR and UROCE_STATS_FILE are the stats endpoint's own,
    // not keys of [stats].
    if (name == "UROCE_STATS_PROMETHEUS") {
      subtable(root, "stats").insert_or_assign("prometheus", value);
      origin["stats.prometheus"] = name;
      continue;
    }
    for (const std::string table : {"EAL", "LOG", "FAULT", "PFC", "DCQCN", "DAEMON"}) {
      const std::string prefix = "UROCE_" + table + "_";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string key = lower(name.substr(prefix.size()));
      toml::table& t = subtable(root, lower(table));
      if (table == "EAL" && key == "args") {
        t.insert_or_assign(key, split_list(value, ' '));
      } else if ((table == "PFC" && key == "priorities") ||
                 (table == "DCQCN" && (key == "rp_priorities" || key == "np_priorities"))) {
        toml::array a;  // "3,4"
        std::stringstream ss(value);
        for (std::string item; std::getline(ss, item, ',');) {
          char* end = nullptr;
          const long v = std::strtol(item.c_str(), &end, 10);
          if (*end != '\0') fail(name, "expected priorities like 3,4");
          a.push_back(static_cast<std::int64_t>(v));
        }
        t.insert_or_assign(key, std::move(a));
      } else {
        set_from_text(t, key, value);
      }
      origin[lower(table) + "." + key] = name;
    }
    if (name.rfind("UROCE_DEVICE", 0) == 0) {
      const std::string rest = name.substr(12);
      const auto us = rest.find('_');
      if (us == std::string::npos || us == 0) fail(name, "expected UROCE_DEVICE<N>_<KEY>");
      const int n = std::atoi(rest.substr(0, us).c_str());
      const std::string key = lower(rest.substr(us + 1));
      if (!root.contains("device")) root.insert("device", toml::array{});
      auto* devs = root["device"].as_array();
      if (!devs) fail("device", "must be an array of tables ([[device]])");
      if (n < 0 || static_cast<std::size_t>(n) > devs->size())
        fail(name, "device " + std::to_string(n) + " does not exist and is not the next one");
      if (static_cast<std::size_t>(n) == devs->size()) devs->push_back(toml::table{});
      auto* dev = devs->get(static_cast<std::size_t>(n))->as_table();
      if (key == "ip") {
        dev->insert_or_assign(key, split_list(value, ','));
      } else {
        set_from_text(*dev, key, value);
      }
      origin["device[" + std::to_string(n) + "]." + key] = name;
    }
  }
}

IpPrefix parse_prefix(const TomlReader& device, const std::string& text) {
  const auto slash = text.find('/');
  IpPrefix p;
  p.address = text.substr(0, slash);
  unsigned char buf[16];
  const bool v4 = inet_pton(AF_INET, p.address.c_str(), buf) == 1;
  const bool v6 = !v4 && inet_pton(AF_INET6, p.address.c_str(), buf) == 1;
  if (!v4 && !v6) device.fail("ip", "'" + text + "' is not an IP address");
  const unsigned max = v4 ? 32 : 128;
  p.prefix = max;
  if (slash != std::string::npos) {
    char* end = nullptr;
    const unsigned long len = std::strtoul(text.c_str() + slash + 1, &end, 10);
    if (*end != '\0' || slash + 1 == text.size() || len > max)
      device.fail("ip", "'" + text + "' has a bad prefix length");
    p.prefix = static_cast<unsigned>(len);
  }
  return p;
}

// Each key defaults to its member's initial value, here and below, so that
// config.h alone states the defaults.
DeviceConfig read_device(const TomlReader& t, std::size_t index) {
  t.only({"name", "port", "ip", "netdev", "mtu", "hugepages", "dscp", "pcp", "priority_tag",
          "vlan_id", "ecn", "selective_repeat", "link_wait_ms", "lcores"});
  DeviceConfig dev;
  dev.name = t.string("name").value_or("uroce" + std::to_string(index));
  // The name goes into the port's vdev string, the daemon's device list
  // and stats scopes: letters, digits, '_', '-', '.' only (IB_DEVICE_NAME_MAX
  // is 64 with its NUL).
  if (dev.name.empty() || dev.name.size() > 63 ||
      dev.name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != std::string::npos)
    t.fail("name", "'" + dev.name + "' is not 1 to 63 letters, digits, '_', '-' or '.'");
  dev.netdev = t.string("netdev").value_or("");
  if (dev.netdev.find_first_of(",= \t\n") != std::string::npos)
    t.fail("netdev", "'" + dev.netdev + "' is no interface name");
  const auto port = t.string("port");
  if (!dev.netdev.empty() && port && port->starts_with("uroced:")) {
    // A device daemon's netdev device, as the daemon describes it to its
    // programs: the addresses it read from the interface.
    dev.port = *port;
    for (const std::string& ip : t.strings("ip")) dev.ip.push_back(parse_prefix(t, ip));
  } else if (!dev.netdev.empty()) {
    // Netdev mode: the interface's addresses, read now, in the namespace
    // the program runs in.
    if (!t.strings("ip").empty())
      t.fail("ip", "comes from the interface with netdev = '" + dev.netdev + "'");
    const auto ips = config::netdev_addresses(dev.netdev);
    if (!ips) t.fail("netdev", "'" + dev.netdev + "' is no interface in this network namespace");
    dev.ip = *ips;
    // The port: net_af_packet unless `port` says af_xdp or packet (or
    // names any DPDK device on the interface).
    if (!port || port->empty() || *port == "af_packet")
      dev.port = "net_af_packet_" + dev.name + ",iface=" + dev.netdev;
    else if (*port == "af_xdp")
      dev.port = "net_af_xdp_" + dev.name + ",iface=" + dev.netdev;
    else if (*port == "packet")
      dev.port = "packet:" + dev.netdev;
    else
      dev.port = *port;
  } else {
    if (!port || port->empty()) t.fail("port", "is required (a DPDK device)");
    dev.port = *port;
    for (const std::string& ip : t.strings("ip")) dev.ip.push_back(parse_prefix(t, ip));
    if (dev.ip.empty()) t.fail("ip", "is required (one or more addresses)");
  }
  dev.mtu = t.number("mtu", dev.mtu, 0, 9600);
  if (dev.mtu != 0 && dev.mtu < 576) t.fail("mtu", "must be 0 or at least 576");
  dev.hugepages = t.boolean("hugepages", dev.hugepages);
  dev.dscp = t.number("dscp", dev.dscp, 0, 63);
  dev.pcp = t.number("pcp", dev.pcp, 0, 7);
  dev.priority_tag = t.boolean("priority_tag", dev.priority_tag);
  dev.ecn = t.boolean("ecn", dev.ecn);
  dev.selective_repeat = t.boolean("selective_repeat", dev.selective_repeat);
  dev.vlan_id = t.number("vlan_id", dev.vlan_id, 0, 4094);
  dev.link_wait_ms = t.number("link_wait_ms", dev.link_wait_ms, 0, 600000);
  dev.lcores = t.number("lcores", dev.lcores, 1, 16);
  return dev;
}

// [[device]]: programs open a device by its name, so no two share one.
std::vector<DeviceConfig> read_devices(const TomlReader& root) {
  std::vector<DeviceConfig> devices;
  const std::vector<TomlReader> tables = root.tables("device");
  for (std::size_t i = 0; i < tables.size(); ++i) {
    DeviceConfig dev = read_device(tables[i], i);
    for (const DeviceConfig& other : devices) {
      if (other.name == dev.name) tables[i].fail("name", "'" + dev.name + "' is taken");
    }
    devices.push_back(std::move(dev));
  }
  return devices;
}

void read_eal(const TomlReader& t, Config* c) {
  t.only({"args", "memory_mb"});
  c->eal_args = t.strings("args");
  c->eal_memory_mb = t.number("memory_mb", c->eal_memory_mb, 64, 1u << 20);
}

std::string read_log_level(const TomlReader& t, const std::string& dflt) {
  t.only({"level"});
  const std::string level = t.string("level").value_or(dflt);
  for (const char* known : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == known) return level;
  }
  t.fail("level", "'" + level + "' is not trace, debug, info, warn, error or off");
}

FaultSettings read_fault(const TomlReader& t) {
  t.only({"rx_drop", "rx_duplicate", "rx_reorder", "rx_corrupt", "tx_drop", "tx_duplicate",
          "tx_reorder", "tx_corrupt", "seed", "rx_rate_mbps", "rx_buffer_kb"});
  FaultSettings s;
  s.rx_drop = t.number("rx_drop", s.rx_drop, 0, 1);
  s.rx_duplicate = t.number("rx_duplicate", s.rx_duplicate, 0, 1);
  s.rx_reorder = t.number("rx_reorder", s.rx_reorder, 0, 1);
  s.rx_corrupt = t.number("rx_corrupt", s.rx_corrupt, 0, 1);
  s.tx_drop = t.number("tx_drop", s.tx_drop, 0, 1);
  s.tx_duplicate = t.number("tx_duplicate", s.tx_duplicate, 0, 1);
  s.tx_reorder = t.number("tx_reorder", s.tx_reorder, 0, 1);
  s.tx_corrupt = t.number("tx_corrupt", s.tx_corrupt, 0, 1);
  s.seed = t.number("seed", s.seed, 0, UINT64_MAX);
  s.rx_rate_mbps = t.number("rx_rate_mbps", s.rx_rate_mbps, 0, 400000);
  s.rx_buffer_kb = t.number("rx_buffer_kb", s.rx_buffer_kb, 16, 1u << 20);
  return s;
}

// After [fault]: XOFF must leave headroom in the receive buffer it sets.
PfcSettings read_pfc(const TomlReader& t, const FaultSettings& fault) {
  t.only({"enabled", "priorities", "xoff_kb", "xon_kb", "quanta", "watchdog_ms", "restoration_ms"});
  PfcSettings p;
  p.enabled = t.boolean("enabled", p.enabled);
  p.priorities = t.priorities("priorities", p.priorities);
  p.xoff_kb = t.number("xoff_kb", p.xoff_kb, 1, 1u << 20);
  p.xon_kb = t.number("xon_kb", p.xoff_kb / 2, 0, 1u << 20);
  if (p.xon_kb >= p.xoff_kb) t.fail("xon_kb", "must be below pfc.xoff_kb");
  p.quanta = t.number("quanta", p.quanta, 1, 0xFFFF);
  if (p.enabled && std::uint64_t{p.xoff_kb} >= fault.rx_buffer_kb)
    t.fail("xoff_kb", "must be below fault.rx_buffer_kb (" + std::to_string(fault.rx_buffer_kb) +
                          "), the receive buffer it leaves headroom in");
  p.watchdog_ms = t.number("watchdog_ms", p.watchdog_ms, 0, 60000);
  p.restoration_ms = t.number("restoration_ms", p.restoration_ms, 1, 60000);
  return p;
}

// ConnectX firmware's names, ranges and defaults (docs/congestion-control.md).
DcqcnSettings read_dcqcn(const TomlReader& t) {
  t.only({"enabled",
          "rp_priorities",
          "np_priorities",
          "rpg_time_reset",
          "rpg_byte_reset",
          "rpg_threshold",
          "rpg_ai_rate",
          "rpg_hai_rate",
          "rpg_gd",
          "rpg_min_dec_fac",
          "rpg_min_rate",
          "rpg_max_rate",
          "rate_to_set_on_first_cnp",
          "clamp_tgt_rate",
          "clamp_tgt_rate_after_time_inc",
          "dce_tcp_g",
          "dce_tcp_rtt",
          "initial_alpha_value",
          "rate_reduce_monitor_period",
          "min_time_between_cnps",
          "cnp_dscp",
          "cnp_802p_prio"});
  DcqcnSettings d;
  d.enabled = t.boolean("enabled", d.enabled);
  d.rp_priorities = t.priorities("rp_priorities", d.rp_priorities);
  d.np_priorities = t.priorities("np_priorities", d.np_priorities);
  d.rpg_time_reset_us = t.number("rpg_time_reset", d.rpg_time_reset_us, 1, 10'000'000);
  d.rpg_byte_reset = t.number("rpg_byte_reset", d.rpg_byte_reset, 0, 1u << 30);
  d.rpg_threshold = t.number("rpg_threshold", d.rpg_threshold, 1, 1000);
  d.rpg_ai_rate_mbps = t.number("rpg_ai_rate", d.rpg_ai_rate_mbps, 0, 400000);
  d.rpg_hai_rate_mbps = t.number("rpg_hai_rate", d.rpg_hai_rate_mbps, 0, 400000);
  d.rpg_gd = t.number("rpg_gd", d.rpg_gd, 10, 20);
  d.rpg_min_dec_fac = t.number("rpg_min_dec_fac", d.rpg_min_dec_fac, 1, 100);
  d.rpg_min_rate_mbps = t.number("rpg_min_rate", d.rpg_min_rate_mbps, 1, 400000);
  d.rpg_max_rate_mbps = t.number("rpg_max_rate", d.rpg_max_rate_mbps, 0, 400000);
  d.rate_to_set_on_first_cnp_mbps =
      t.number("rate_to_set_on_first_cnp", d.rate_to_set_on_first_cnp_mbps, 0, 400000);
  d.clamp_tgt_rate = t.boolean("clamp_tgt_rate", d.clamp_tgt_rate);
  d.clamp_tgt_rate_after_time_inc =
      t.boolean("clamp_tgt_rate_after_time_inc", d.clamp_tgt_rate_after_time_inc);
  d.dce_tcp_g = t.number("dce_tcp_g", d.dce_tcp_g, 0, 1023);
  d.dce_tcp_rtt_us = t.number("dce_tcp_rtt", d.dce_tcp_rtt_us, 1, 1'000'000);
  d.initial_alpha_value = t.number("initial_alpha_value", d.initial_alpha_value, 0, 1024);
  d.rate_reduce_monitor_period_us =
      t.number("rate_reduce_monitor_period", d.rate_reduce_monitor_period_us, 0, 1'000'000);
  d.min_time_between_cnps_us =
      t.number("min_time_between_cnps", d.min_time_between_cnps_us, 0, 1'000'000);
  d.cnp_dscp = t.number("cnp_dscp", d.cnp_dscp, 0, 63);
  d.cnp_802p_prio = t.number("cnp_802p_prio", d.cnp_802p_prio, 0, 7);
  return d;
}

void read_daemon(const TomlReader& t, Config* c) {
  t.only({"socket", "nice"});
  c->daemon_nice = t.number("nice", c->daemon_nice, -20, 19);
  c->daemon_socket = t.string("socket").value_or(c->daemon_socket);
  if (c->daemon_socket.empty() || c->daemon_socket[0] != '/')
    t.fail("socket", "must be an absolute path");
  if (c->daemon_socket.size() >= 108) t.fail("socket", "is longer than a socket path can be");
}

// "host:port", the host an IP address ("[v6]:port"), the port 0 to 65535.
bool is_listen_address(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoul(port) > 65535)
    return false;
  unsigned char buf[16];
  if (host.front() == '[' && host.back() == ']')
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
  return inet_pton(AF_INET, host.c_str(), buf) == 1;
}

void read_stats(const TomlReader& t, Config* c) {
  t.only({"prometheus"});
  c->stats.prometheus = t.string("prometheus").value_or(c->stats.prometheus);
  if (!c->stats.prometheus.empty() && !is_listen_address(c->stats.prometheus))
    t.fail("prometheus",
           "'" + c->stats.prometheus + "' is not an address and port like 127.0.0.1:9464");
}

// Tables in this order: a later one may depend on an earlier one.
Config build(const TomlReader& root) {
  root.only({"device", "eal", "log", "fault", "pfc", "dcqcn", "daemon", "stats"});
  Config c;
  c.devices = read_devices(root);
  if (const auto t = root.table("eal")) read_eal(*t, &c);
  if (const auto t = root.table("log")) c.log_level = read_log_level(*t, c.log_level);
  if (const auto t = root.table("fault")) c.fault = read_fault(*t);
  if (const auto t = root.table("pfc")) c.pfc = read_pfc(*t, c.fault);
  if (const auto t = root.table("dcqcn")) c.dcqcn = read_dcqcn(*t);
  if (const auto t = root.table("daemon")) read_daemon(*t, &c);
  if (const auto t = root.table("stats")) read_stats(*t, &c);
  return c;
}

}  // namespace

ConfigResult parse_config(const std::string& text, const std::string& origin,
                          const std::vector<std::string>& env) {
  ConfigResult result;
  std::optional<toml::table> root = config::parse_toml(text, origin, &result.error);
  if (!root) return result;
  try {
    config::KeySource source{origin, {}};
    apply_env(*root, env, source.env);
    result.config = build(TomlReader(*root, source));
  } catch (const config::Error& e) {
    result.error = std::string("configuration: ") + e.what();
  }
  return result;
}

ConfigResult load_config() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  const char* path = std::getenv("UROCE_CONFIG");
  if (!path || !*path) return parse_config("", "(no UROCE_CONFIG)", env);
  std::ifstream f(path);
  if (!f)
    return {std::nullopt, std::string("configuration: cannot read UROCE_CONFIG file ") + path};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_config(ss.str(), path, env);
}

}  // namespace uroce
