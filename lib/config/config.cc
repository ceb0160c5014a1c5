/* SPDX-License-Identifier: BSD-3-Clause */
// Loading and validating the configuration. The file is TOML (toml++);
// environment variables override single keys for one-off runs. Every error
// names the key, and where it came from, and why.

#include "uroce/config.h"

#include <arpa/inet.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace uroce {
namespace {

// Thrown inside this file only, turned into ConfigResult::error.
struct ConfigError {
  std::string message;
};

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw ConfigError{key + ": " + why};
}

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
    for (const std::string table : {"EAL", "LOG", "FAULT", "PFC", "DCQCN"}) {
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

class Reader {
 public:
  Reader(const std::map<std::string, std::string>& origin, std::string file)
      : origin_(origin), file_(std::move(file)) {}

  // The key as the user wrote it: the environment variable, or the file.
  std::string where(const std::string& key) const {
    const auto it = origin_.find(key);
    return it != origin_.end() ? it->second + " (" + key + ")" : file_ + ": " + key;
  }

  void only(const toml::table& t, const std::string& path,
            std::initializer_list<std::string_view> known) const {
    for (const auto& [k, v] : t) {
      bool ok = false;
      for (auto name : known) ok = ok || k.str() == name;
      if (!ok) fail(where(path + std::string(k.str())), "unknown key");
    }
  }

  template <typename T>
  T number(const toml::table& t, const std::string& path, const char* key, T dflt, T lo,
           T hi) const {
    const toml::node* n = t.get(key);
    if (!n) return dflt;
    const std::string k = path + key;
    double v;
    if (auto i = n->value_exact<std::int64_t>()) {
      v = static_cast<double>(*i);
    } else if (auto d = n->value_exact<double>(); d && !std::is_integral_v<T>) {
      v = *d;
    } else {
      fail(where(k), std::is_integral_v<T> ? "expected an integer" : "expected a number");
    }
    if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
      auto text = [](T x) {
        if constexpr (std::is_integral_v<T>)
          return std::to_string(static_cast<unsigned long long>(x));
        std::ostringstream os;
        os << x;
        return os.str();
      };
      fail(where(k), "must be between " + text(lo) + " and " + text(hi));
    }
    return static_cast<T>(v);
  }

  bool boolean(const toml::table& t, const std::string& path, const char* key, bool dflt) const {
    const toml::node* n = t.get(key);
    if (!n) return dflt;
    if (auto b = n->value_exact<bool>()) return *b;
    fail(where(path + key), "expected true or false");
  }

  std::optional<std::string> string(const toml::table& t, const std::string& path,
                                    const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto s = n->value_exact<std::string>()) return *s;
    fail(where(path + key), "expected a string");
  }

  // A list of priorities, [3, 4], as a mask (bit n: priority n).
  std::uint8_t priorities(const toml::table& t, const std::string& path, const char* key,
                          std::uint8_t dflt) const {
    const toml::node* n = t.get(key);
    if (!n) return dflt;
    const toml::array* a = n->as_array();
    if (!a || a->empty()) fail(where(path + key), "expected a list of priorities, like [3]");
    std::uint8_t m = 0;
    for (const auto& e : *a) {
      const auto v = e.value_exact<std::int64_t>();
      if (!v || *v < 0 || *v > 7) fail(where(path + key), "priorities are 0 to 7");
      m |= static_cast<std::uint8_t>(1u << *v);
    }
    return m;
  }

  std::vector<std::string> strings(const toml::table& t, const std::string& path,
                                   const char* key) const {
    const toml::node* n = t.get(key);
    std::vector<std::string> out;
    if (!n) return out;
    if (auto s = n->value_exact<std::string>()) return {*s};
    const toml::array* a = n->as_array();
    if (!a) fail(where(path + key), "expected a string or an array of strings");
    for (const auto& e : *a) {
      auto s = e.value_exact<std::string>();
      if (!s) fail(where(path + key), "expected an array of strings");
      out.push_back(*s);
    }
    return out;
  }

 private:
  const std::map<std::string, std::string>& origin_;
  std::string file_;
};

IpPrefix parse_prefix(const Reader& r, const std::string& key, const std::string& text) {
  const auto slash = text.find('/');
  IpPrefix p;
  p.address = text.substr(0, slash);
  unsigned char buf[16];
  const bool v4 = inet_pton(AF_INET, p.address.c_str(), buf) == 1;
  const bool v6 = !v4 && inet_pton(AF_INET6, p.address.c_str(), buf) == 1;
  if (!v4 && !v6) fail(r.where(key), "'" + text + "' is not an IP address");
  const unsigned max = v4 ? 32 : 128;
  p.prefix = max;
  if (slash != std::string::npos) {
    char* end = nullptr;
    const unsigned long len = std::strtoul(text.c_str() + slash + 1, &end, 10);
    if (*end != '\0' || slash + 1 == text.size() || len > max)
      fail(r.where(key), "'" + text + "' has a bad prefix length");
    p.prefix = static_cast<unsigned>(len);
  }
  return p;
}

Config build(const toml::table& root, const Reader& r) {
  r.only(root, "", {"device", "eal", "log", "fault", "pfc", "dcqcn"});
  Config c;
  if (const toml::node* d = root.get("device")) {
    const toml::array* devs = d->as_array();
    if (!devs) fail(r.where("device"), "must be an array of tables ([[device]])");
    for (std::size_t i = 0; i < devs->size(); ++i) {
      const std::string path = "device[" + std::to_string(i) + "].";
      const toml::table* t = devs->get(i)->as_table();
      if (!t) fail(r.where("device[" + std::to_string(i) + "]"), "must be a table");
      r.only(*t, path,
             {"name", "port", "ip", "mtu", "hugepages", "dscp", "pcp", "priority_tag", "vlan_id",
              "ecn", "link_wait_ms"});
      DeviceConfig dev;
      dev.name = r.string(*t, path, "name").value_or("uroce" + std::to_string(i));
      const auto port = r.string(*t, path, "port");
      if (!port || port->empty()) fail(r.where(path + "port"), "is required (a DPDK device)");
      dev.port = *port;
      for (const std::string& ip : r.strings(*t, path, "ip"))
        dev.ip.push_back(parse_prefix(r, path + "ip", ip));
      if (dev.ip.empty()) fail(r.where(path + "ip"), "is required (one or more addresses)");
      dev.mtu = r.number<std::uint32_t>(*t, path, "mtu", 0, 0, 9600);
      if (dev.mtu != 0 && dev.mtu < 576) fail(r.where(path + "mtu"), "must be 0 or at least 576");
      dev.hugepages = r.boolean(*t, path, "hugepages", false);
      dev.dscp = r.number<std::uint8_t>(*t, path, "dscp", 26, 0, 63);
      dev.pcp = r.number<std::uint8_t>(*t, path, "pcp", 3, 0, 7);
      dev.priority_tag = r.boolean(*t, path, "priority_tag", false);
      dev.ecn = r.boolean(*t, path, "ecn", false);
      dev.vlan_id = r.number<std::uint16_t>(*t, path, "vlan_id", 0, 0, 4094);
      dev.link_wait_ms = r.number<std::uint32_t>(*t, path, "link_wait_ms", 10000, 0, 600000);
      for (const DeviceConfig& other : c.devices) {
        if (other.name == dev.name) fail(r.where(path + "name"), "'" + dev.name + "' is taken");
      }
      c.devices.push_back(std::move(dev));
    }
  }
  if (const toml::node* e = root.get("eal")) {
    const toml::table* t = e->as_table();
    if (!t) fail(r.where("eal"), "must be a table");
    r.only(*t, "eal.", {"args", "memory_mb"});
    c.eal_args = r.strings(*t, "eal.", "args");
    c.eal_memory_mb = r.number<unsigned>(*t, "eal.", "memory_mb", 512, 64, 1u << 20);
  }
  if (const toml::node* l = root.get("log")) {
    const toml::table* t = l->as_table();
    if (!t) fail(r.where("log"), "must be a table");
    r.only(*t, "log.", {"level"});
    c.log_level = r.string(*t, "log.", "level").value_or(c.log_level);
    static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
    bool ok = false;
    for (const char* lvl : kLevels) ok = ok || c.log_level == lvl;
    if (!ok)
      fail(r.where("log.level"),
           "'" + c.log_level + "' is not trace, debug, info, warn, error or off");
  }
  if (const toml::node* f = root.get("fault")) {
    const toml::table* t = f->as_table();
    if (!t) fail(r.where("fault"), "must be a table");
    r.only(*t, "fault.",
           {"rx_drop", "rx_duplicate", "rx_reorder", "rx_corrupt", "tx_drop", "tx_duplicate",
            "tx_reorder", "tx_corrupt", "seed", "rx_rate_mbps", "rx_buffer_kb"});
    FaultSettings& s = c.fault;
    s.rx_drop = r.number<double>(*t, "fault.", "rx_drop", 0, 0, 1);
    s.rx_duplicate = r.number<double>(*t, "fault.", "rx_duplicate", 0, 0, 1);
    s.rx_reorder = r.number<double>(*t, "fault.", "rx_reorder", 0, 0, 1);
    s.rx_corrupt = r.number<double>(*t, "fault.", "rx_corrupt", 0, 0, 1);
    s.tx_drop = r.number<double>(*t, "fault.", "tx_drop", 0, 0, 1);
    s.tx_duplicate = r.number<double>(*t, "fault.", "tx_duplicate", 0, 0, 1);
    s.tx_reorder = r.number<double>(*t, "fault.", "tx_reorder", 0, 0, 1);
    s.tx_corrupt = r.number<double>(*t, "fault.", "tx_corrupt", 0, 0, 1);
    s.seed = r.number<std::uint64_t>(*t, "fault.", "seed", 1, 0, UINT64_MAX);
    s.rx_rate_mbps = r.number<std::uint32_t>(*t, "fault.", "rx_rate_mbps", 0, 0, 400000);
    s.rx_buffer_kb = r.number<std::uint32_t>(*t, "fault.", "rx_buffer_kb", 1024, 16, 1u << 20);
  }
  if (const toml::node* n = root.get("pfc")) {
    const toml::table* t = n->as_table();
    if (!t) fail(r.where("pfc"), "must be a table");
    r.only(
        *t, "pfc.",
        {"enabled", "priorities", "xoff_kb", "xon_kb", "quanta", "watchdog_ms", "restoration_ms"});
    PfcSettings& p = c.pfc;
    p.enabled = r.boolean(*t, "pfc.", "enabled", false);
    p.priorities = r.priorities(*t, "pfc.", "priorities", p.priorities);
    p.xoff_kb = r.number<std::uint32_t>(*t, "pfc.", "xoff_kb", 512, 1, 1u << 20);
    p.xon_kb = r.number<std::uint32_t>(*t, "pfc.", "xon_kb", p.xoff_kb / 2, 0, 1u << 20);
    if (p.xon_kb >= p.xoff_kb) fail(r.where("pfc.xon_kb"), "must be below pfc.xoff_kb");
    p.quanta = r.number<std::uint16_t>(*t, "pfc.", "quanta", 0xFFFF, 1, 0xFFFF);
    if (p.enabled && std::uint64_t{p.xoff_kb} >= c.fault.rx_buffer_kb)
      fail(r.where("pfc.xoff_kb"), "must be below fault.rx_buffer_kb (" +
                                       std::to_string(c.fault.rx_buffer_kb) +
                                       "), the receive buffer it leaves headroom in");
    p.watchdog_ms = r.number<std::uint32_t>(*t, "pfc.", "watchdog_ms", 200, 0, 60000);
    p.restoration_ms = r.number<std::uint32_t>(*t, "pfc.", "restoration_ms", 200, 1, 60000);
  }
  if (const toml::node* n = root.get("dcqcn")) {
    const toml::table* t = n->as_table();
    if (!t) fail(r.where("dcqcn"), "must be a table");
    r.only(*t, "dcqcn.",
           {"enabled",
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
    DcqcnSettings& d = c.dcqcn;
    const std::string P = "dcqcn.";
    auto u32 = [&](const char* key, std::uint32_t dflt, std::uint32_t lo, std::uint32_t hi) {
      return r.number<std::uint32_t>(*t, P, key, dflt, lo, hi);
    };
    d.enabled = r.boolean(*t, P, "enabled", false);
    d.rp_priorities = r.priorities(*t, P, "rp_priorities", d.rp_priorities);
    d.np_priorities = r.priorities(*t, P, "np_priorities", d.np_priorities);
    d.rpg_time_reset_us = u32("rpg_time_reset", 300, 1, 10'000'000);
    d.rpg_byte_reset = u32("rpg_byte_reset", 32767, 0, 1u << 30);
    d.rpg_threshold = u32("rpg_threshold", 1, 1, 1000);
    d.rpg_ai_rate_mbps = u32("rpg_ai_rate", 5, 0, 400000);
    d.rpg_hai_rate_mbps = u32("rpg_hai_rate", 50, 0, 400000);
    d.rpg_gd = u32("rpg_gd", 11, 10, 20);
    d.rpg_min_dec_fac = u32("rpg_min_dec_fac", 50, 1, 100);
    d.rpg_min_rate_mbps = u32("rpg_min_rate", 1, 1, 400000);
    d.rpg_max_rate_mbps = u32("rpg_max_rate", 0, 0, 400000);
    d.rate_to_set_on_first_cnp_mbps = u32("rate_to_set_on_first_cnp", 0, 0, 400000);
    d.clamp_tgt_rate = r.boolean(*t, P, "clamp_tgt_rate", false);
    d.clamp_tgt_rate_after_time_inc = r.boolean(*t, P, "clamp_tgt_rate_after_time_inc", true);
    d.dce_tcp_g = u32("dce_tcp_g", 1019, 0, 1023);
    d.dce_tcp_rtt_us = u32("dce_tcp_rtt", 55, 1, 1'000'000);
    d.initial_alpha_value = u32("initial_alpha_value", 1023, 0, 1024);
    d.rate_reduce_monitor_period_us = u32("rate_reduce_monitor_period", 4, 0, 1'000'000);
    d.min_time_between_cnps_us = u32("min_time_between_cnps", 4, 0, 1'000'000);
    d.cnp_dscp = r.number<std::uint8_t>(*t, P, "cnp_dscp", 48, 0, 63);
    d.cnp_802p_prio = r.number<std::uint8_t>(*t, P, "cnp_802p_prio", 6, 0, 7);
  }
  return c;
}

}  // namespace

ConfigResult parse_config(const std::string& text, const std::string& origin,
                          const std::vector<std::string>& env) {
  ConfigResult result;
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
       << e.description();
    result.error = os.str();
    return result;
  }
  try {
    std::map<std::string, std::string> from_env;
    apply_env(root, env, from_env);
    result.config = build(root, Reader(from_env, origin));
  } catch (const ConfigError& e) {
    result.error = "configuration: " + e.message;
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
