/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/options.h"

#include <toml++/toml.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace uroce::sw {

const char* const kSwitchUsage =
    "usage: uroce-switch --port SPEC --port SPEC ... [--config FILE]\n"
    "         [--rate PORT=RATE] [--ecn kmin=B,kmax=B,pmax=P] [--pfc]\n"
    "         [--loss P] [--duplicate P] [--reorder P] [--delay TIME[+JITTER]]\n"
    "         [--corrupt P] [--seed N] [--buffer-kb N] [--scheduling dwrr|strict]\n"
    "         [--trust-pcp]\n"
    "         [--stats-file FILE] [--stats-format csv|json] [--stats-interval MS]\n"
    "         [--control SOCKET] [--duration SECONDS] [--hugepages] [--log LEVEL]\n"
    "PORT is the port's index in the order given; RATE is like 300mbit or 10gbit;\n"
    "TIME is like 100us or 2ms. Impairments on the command line apply to every\n"
    "port on transmit; the file sets them per port and direction.\n";

namespace {

struct Error {
  std::string what;
};

[[noreturn]] void fail(const std::string& what) { throw Error{what}; }

std::optional<double> number(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Splits "123.5unit" into the number and the unit.
bool split_unit(const std::string& text, double* v, std::string* unit) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const auto n = number(text.substr(0, i));
  if (!n || *n < 0) return false;
  *v = *n;
  *unit = text.substr(i);
  return true;
}

double probability(const std::string& what, const std::string& text) {
  const auto v = number(text);
  if (!v || *v < 0 || *v > 1) fail(what + ": '" + text + "' is not a probability between 0 and 1");
  return *v;
}

std::uint64_t integer(const std::string& what, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' ||
      errno == ERANGE)
    fail(what + ": '" + text + "' is not a number");
  return v;
}

// KiB to bytes, refusing what would not fit (or make sense): up to 1 TiB.
std::uint64_t kib(const std::string& what, double v) {
  if (!(v >= 0) || v > static_cast<double>(std::uint64_t{1} << 30))
    fail(what + ": must be between 0 and 1073741824 KiB");
  return static_cast<std::uint64_t>(v * 1024);
}

std::uint64_t rate(const std::string& what, const std::string& text) {
  const auto r = parse_rate(text);
  if (!r) fail(what + ": '" + text + "' is not a rate like 300mbit or 10gbit");
  return *r;
}

std::uint64_t time_ns(const std::string& what, const std::string& text) {
  const auto t = parse_time_ns(text);
  if (!t) fail(what + ": '" + text + "' is not a time like 100us or 2ms");
  return *t;
}

// kmin=B,kmax=B,pmax=P: the ECN marking of every queue (the file can set
// queues apart).
void ecn_option(const std::string& text, SwitchOptions* o) {
  EcnConfig e;
  e.enabled = true;
  std::stringstream ss(text);
  for (std::string kv; std::getline(ss, kv, ',');) {
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq);
    const std::string v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (k == "kmin") {
      e.kmin_bytes = integer("--ecn kmin", v);
    } else if (k == "kmax") {
      e.kmax_bytes = integer("--ecn kmax", v);
    } else if (k == "pmax") {
      e.pmax = probability("--ecn pmax", v);
    } else {
      fail("--ecn: unknown '" + k + "' (kmin=B,kmax=B,pmax=P)");
    }
  }
  if (e.kmax_bytes <= e.kmin_bytes) fail("--ecn: kmax must be above kmin");
  for (unsigned q = 0; q < kQueues; ++q) o->cfg.queues[q].ecn = e;
}

PortConfig& port(SwitchOptions* o, std::size_t i) {
  if (o->cfg.ports.size() <= i) o->cfg.ports.resize(i + 1);
  return o->cfg.ports[i];
}

// ---- the file ----

class Toml {
 public:
  Toml(const std::string& origin) : origin_(origin) {}

  std::string where(const std::string& key) const { return origin_ + ": " + key; }

  void only(const toml::table& t, const std::string& path,
            std::initializer_list<std::string_view> known) const {
    for (const auto& [k, v] : t) {
      bool ok = false;
      for (auto name : known) ok = ok || k.str() == name;
      if (!ok) fail(where(path + std::string(k.str())) + ": unknown key");
    }
  }
  const toml::table* table(const toml::table& t, const std::string& path, const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return nullptr;
    if (!n->as_table()) fail(where(path + key) + ": must be a table");
    return n->as_table();
  }
  std::optional<double> num(const toml::table& t, const std::string& path, const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto i = n->value_exact<std::int64_t>()) return static_cast<double>(*i);
    if (auto d = n->value_exact<double>(); d && std::isfinite(*d)) return *d;
    fail(where(path + key) + ": expected a number");
  }
  std::optional<std::uint64_t> uint(const toml::table& t, const std::string& path,
                                    const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    auto i = n->value_exact<std::int64_t>();
    if (!i || *i < 0) fail(where(path + key) + ": expected a whole number, 0 or more");
    return static_cast<std::uint64_t>(*i);
  }
  std::optional<bool> boolean(const toml::table& t, const std::string& path,
                              const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto b = n->value_exact<bool>()) return *b;
    fail(where(path + key) + ": expected true or false");
  }
  std::optional<std::string> str(const toml::table& t, const std::string& path,
                                 const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto s = n->value_exact<std::string>()) return *s;
    fail(where(path + key) + ": expected a string");
  }
  double prob(const toml::table& t, const std::string& path, const char* key, double dflt) const {
    const auto v = num(t, path, key);
    if (!v) return dflt;
    if (*v < 0 || *v > 1) fail(where(path + key) + ": must be between 0 and 1");
    return *v;
  }
  std::uint8_t priority_mask(const toml::table& t, const std::string& path, const char* key,
                             std::uint8_t dflt) const {
    const toml::node* n = t.get(key);
    if (!n) return dflt;
    const toml::array* a = n->as_array();
    if (!a) fail(where(path + key) + ": expected a list of priorities, like [3]");
    std::uint8_t m = 0;
    for (const auto& e : *a) {
      const auto v = e.value_exact<std::int64_t>();
      if (!v || *v < 0 || *v > 7) fail(where(path + key) + ": priorities are 0 to 7");
      m |= static_cast<std::uint8_t>(1u << *v);
    }
    return m;
  }

 private:
  std::string origin_;
};

void impairment(const Toml& r, const toml::table& t, const std::string& path, ImpairmentConfig* c) {
  r.only(t, path, {"loss", "duplicate", "reorder", "corrupt", "delay", "jitter"});
  c->drop = r.prob(t, path, "loss", c->drop);
  c->duplicate = r.prob(t, path, "duplicate", c->duplicate);
  c->reorder = r.prob(t, path, "reorder", c->reorder);
  c->corrupt = r.prob(t, path, "corrupt", c->corrupt);
  if (auto d = r.str(t, path, "delay")) c->delay_ns = time_ns(r.where(path + "delay"), *d);
  if (auto j = r.str(t, path, "jitter")) c->jitter_ns = time_ns(r.where(path + "jitter"), *j);
}

}  // namespace

std::optional<std::uint64_t> parse_rate(const std::string& text) {
  double v;
  std::string unit;
  if (!split_unit(text, &v, &unit)) return std::nullopt;
  double mul;
  if (unit.empty() || unit == "bit") {
    mul = 1;
  } else if (unit == "kbit") {
    mul = 1e3;
  } else if (unit == "mbit") {
    mul = 1e6;
  } else if (unit == "gbit") {
    mul = 1e9;
  } else {
    return std::nullopt;
  }
  const double r = v * mul;
  if (r < 1000 || r > 1e12) return std::nullopt;  // 1 kbit/s to 1 Tbit/s
  return static_cast<std::uint64_t>(r);
}

std::optional<std::uint64_t> parse_time_ns(const std::string& text) {
  double v;
  std::string unit;
  if (!split_unit(text, &v, &unit)) return std::nullopt;
  double mul;
  if (unit == "ns") {
    mul = 1;
  } else if (unit == "us") {
    mul = 1e3;
  } else if (unit == "ms") {
    mul = 1e6;
  } else if (unit == "s") {
    mul = 1e9;
  } else {
    return std::nullopt;
  }
  if (v * mul > 60e9) return std::nullopt;  // a minute is plenty
  return static_cast<std::uint64_t>(v * mul);
}

std::string apply_switch_toml(const std::string& text, const std::string& origin,
                              SwitchOptions* o) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
       << e.description();
    return os.str();
  }
  try {
    const Toml r(origin);
    r.only(root, "", {"switch", "ecn", "pfc", "priority", "queue", "port", "stats"});
    SwitchConfig& c = o->cfg;
    if (const auto* t = r.table(root, "", "switch")) {
      r.only(
          *t, "switch.",
          {"buffer_kb", "port_limit_kb", "scheduling", "aging_s", "seed", "control", "duration_s"});
      if (auto v = r.uint(*t, "switch.", "buffer_kb"))
        c.buffer_bytes = kib(r.where("switch.buffer_kb"), static_cast<double>(*v));
      if (auto v = r.uint(*t, "switch.", "port_limit_kb"))
        c.port_limit_bytes = kib(r.where("switch.port_limit_kb"), static_cast<double>(*v));
      if (auto v = r.str(*t, "switch.", "scheduling")) {
        if (*v == "strict") {
          c.scheduling = Scheduling::kStrict;
        } else if (*v == "dwrr") {
          c.scheduling = Scheduling::kDwrr;
        } else {
          fail(r.where("switch.scheduling") + ": '" + *v + "' is not strict or dwrr");
        }
      }
      if (auto v = r.uint(*t, "switch.", "aging_s")) {
        if (*v < 1 || *v > 1'000'000) fail(r.where("switch.aging_s") + ": must be 1 to 1000000");
        c.aging_ns = *v * 1'000'000'000;
      }
      if (auto v = r.uint(*t, "switch.", "seed")) c.seed = *v;
      if (auto v = r.str(*t, "switch.", "control")) o->control = *v;
      if (auto v = r.num(*t, "switch.", "duration_s")) {
        if (*v < 0) fail(r.where("switch.duration_s") + ": must be 0 or more");
        o->duration_s = *v;
      }
    }
    if (const auto* t = r.table(root, "", "ecn")) {
      r.only(*t, "ecn.", {"enabled", "kmin_kb", "kmax_kb", "pmax", "queues"});
      EcnConfig e;
      e.enabled = r.boolean(*t, "ecn.", "enabled").value_or(true);
      if (auto v = r.num(*t, "ecn.", "kmin_kb")) e.kmin_bytes = kib(r.where("ecn.kmin_kb"), *v);
      if (auto v = r.num(*t, "ecn.", "kmax_kb")) e.kmax_bytes = kib(r.where("ecn.kmax_kb"), *v);
      e.pmax = r.prob(*t, "ecn.", "pmax", e.pmax);
      if (e.kmax_bytes <= e.kmin_bytes) fail(r.where("ecn.kmax_kb") + ": must be above kmin_kb");
      const std::uint8_t queues = r.priority_mask(*t, "ecn.", "queues", 0xFF);
      for (unsigned q = 0; q < kQueues; ++q)
        if (queues & (1u << q)) c.queues[q].ecn = e;
    }
    if (const auto* t = r.table(root, "", "pfc")) {
      r.only(*t, "pfc.",
             {"enabled", "priorities", "xoff_kb", "xon_kb", "headroom_kb", "quanta", "watchdog_ms",
              "restoration_ms"});
      SwitchPfcConfig& p = c.pfc;
      p.enabled = r.boolean(*t, "pfc.", "enabled").value_or(true);
      p.lossless = r.priority_mask(*t, "pfc.", "priorities", p.lossless);
      if (auto v = r.uint(*t, "pfc.", "xoff_kb"))
        p.xoff_bytes = kib(r.where("pfc.xoff_kb"), static_cast<double>(*v));
      p.xon_bytes = p.xoff_bytes / 2;
      if (auto v = r.uint(*t, "pfc.", "xon_kb"))
        p.xon_bytes = kib(r.where("pfc.xon_kb"), static_cast<double>(*v));
      if (p.xon_bytes >= p.xoff_bytes) fail(r.where("pfc.xon_kb") + ": must be below xoff_kb");
      if (auto v = r.uint(*t, "pfc.", "headroom_kb"))
        p.headroom_bytes = kib(r.where("pfc.headroom_kb"), static_cast<double>(*v));
      if (auto v = r.uint(*t, "pfc.", "quanta")) {
        if (*v < 1 || *v > 0xFFFF) fail(r.where("pfc.quanta") + ": must be between 1 and 65535");
        p.quanta = static_cast<std::uint16_t>(*v);
      }
      if (auto v = r.uint(*t, "pfc.", "watchdog_ms")) {
        if (*v > 60000) fail(r.where("pfc.watchdog_ms") + ": must be 0 to 60000");
        p.watchdog.detection_ns = *v * 1'000'000;
      }
      if (auto v = r.uint(*t, "pfc.", "restoration_ms")) {
        if (*v < 1 || *v > 60000) fail(r.where("pfc.restoration_ms") + ": must be 1 to 60000");
        p.watchdog.restoration_ns = *v * 1'000'000;
      }
    }
    if (const auto* t = r.table(root, "", "priority")) {
      r.only(*t, "priority.", {"trust", "dscp", "pcp"});
      if (auto v = r.str(*t, "priority.", "trust")) {
        if (*v != "dscp" && *v != "pcp")
          fail(r.where("priority.trust") + ": '" + *v + "' is not dscp or pcp");
        c.priority_map.trust_pcp = *v == "pcp";
      }
      if (const auto* d = r.table(*t, "priority.", "dscp")) {
        for (const auto& [k, v] : *d) {
          const std::string name(k.str());
          const std::string key = "priority.dscp." + name;
          char* end = nullptr;
          const long dscp = std::strtol(name.c_str(), &end, 10);
          const auto prio = v.value_exact<std::int64_t>();
          if (*end != '\0' || dscp < 0 || dscp > 63) fail(r.where(key) + ": DSCP is 0 to 63");
          if (!prio || *prio < 0 || *prio > 7) fail(r.where(key) + ": priority is 0 to 7");
          c.priority_map.dscp[static_cast<std::size_t>(dscp)] = static_cast<std::uint8_t>(*prio);
        }
      }
      if (const toml::node* n = t->get("pcp")) {
        const toml::array* a = n->as_array();
        if (!a || a->size() != 8) fail(r.where("priority.pcp") + ": expected 8 priorities");
        for (std::size_t i = 0; i < 8; ++i) {
          const auto prio = a->get(i)->value_exact<std::int64_t>();
          if (!prio || *prio < 0 || *prio > 7)
            fail(r.where("priority.pcp") + ": priority is 0 to 7");
          c.priority_map.pcp[i] = static_cast<std::uint8_t>(*prio);
        }
      }
    }
    if (const toml::node* n = root.get("queue")) {
      const toml::array* a = n->as_array();
      if (!a) fail(r.where("queue") + ": must be an array of tables ([[queue]])");
      for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string path = "queue[" + std::to_string(i) + "].";
        const toml::table* t = a->get(i)->as_table();
        if (!t) fail(r.where("queue[" + std::to_string(i) + "]") + ": must be a table");
        r.only(*t, path, {"priority", "limit_kb", "weight", "ecn", "kmin_kb", "kmax_kb", "pmax"});
        const auto q = r.uint(*t, path, "priority");
        if (!q || *q > 7) fail(r.where(path + "priority") + ": required, 0 to 7");
        // This queue's own marking, over what [ecn] set for it.
        EcnConfig& e = c.queues[*q].ecn;
        if (auto v = r.boolean(*t, path, "ecn")) e.enabled = *v;
        if (auto v = r.num(*t, path, "kmin_kb")) e.kmin_bytes = kib(r.where(path + "kmin_kb"), *v);
        if (auto v = r.num(*t, path, "kmax_kb")) e.kmax_bytes = kib(r.where(path + "kmax_kb"), *v);
        e.pmax = r.prob(*t, path, "pmax", e.pmax);
        if (e.kmax_bytes <= e.kmin_bytes)
          fail(r.where(path + "kmax_kb") + ": must be above kmin_kb");
        if (auto v = r.uint(*t, path, "limit_kb"))
          c.queues[*q].limit_bytes = kib(r.where(path + "limit_kb"), static_cast<double>(*v));
        if (auto v = r.uint(*t, path, "weight")) {
          if (*v < 1 || *v > 1000) fail(r.where(path + "weight") + ": must be between 1 and 1000");
          c.queues[*q].weight = static_cast<std::uint32_t>(*v);
        }
      }
    }
    if (const toml::node* n = root.get("port")) {
      const toml::array* a = n->as_array();
      if (!a) fail(r.where("port") + ": must be an array of tables ([[port]])");
      for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string path = "port[" + std::to_string(i) + "].";
        const toml::table* t = a->get(i)->as_table();
        if (!t) fail(r.where("port[" + std::to_string(i) + "]") + ": must be a table");
        r.only(*t, path, {"device", "rate", "rx", "tx"});
        const auto dev = r.str(*t, path, "device");
        if (!dev || dev->empty()) fail(r.where(path + "device") + ": is required (a DPDK device)");
        if (o->ports.size() <= i) o->ports.resize(i + 1);
        o->ports[i] = *dev;
        PortConfig& pc = port(o, i);
        if (auto v = r.str(*t, path, "rate")) pc.rate_bps = rate(r.where(path + "rate"), *v);
        if (const auto* rx = r.table(*t, path, "rx")) impairment(r, *rx, path + "rx.", &pc.rx);
        if (const auto* tx = r.table(*t, path, "tx")) impairment(r, *tx, path + "tx.", &pc.tx);
      }
    }
    if (const auto* t = r.table(root, "", "stats")) {
      r.only(*t, "stats.", {"file", "format", "interval_ms"});
      if (auto v = r.str(*t, "stats.", "file")) o->stats_file = *v;
      if (auto v = r.str(*t, "stats.", "format")) {
        if (*v != "csv" && *v != "json")
          fail(r.where("stats.format") + ": '" + *v + "' is not csv or json");
        o->stats_format = *v;
      }
      if (auto v = r.uint(*t, "stats.", "interval_ms")) {
        if (*v < 1) fail(r.where("stats.interval_ms") + ": must be 1 or more");
        o->stats_interval_ms = static_cast<std::uint32_t>(*v);
      }
    }
  } catch (const Error& e) {
    return e.what;
  }
  return {};
}

std::string parse_switch_options(int argc, const char* const* argv, SwitchOptions* o) {
  // The file first, so that the command line wins.
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != "--config") continue;
    std::ifstream f(argv[i + 1]);
    if (!f) return std::string("--config: cannot read ") + argv[i + 1];
    std::stringstream ss;
    ss << f.rdbuf();
    if (auto err = apply_switch_toml(ss.str(), argv[i + 1], o); !err.empty()) return err;
  }
  std::vector<std::string> cli_ports;
  ImpairmentConfig tx;
  bool any_tx = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) fail(a + ": needs a value");
        return argv[++i];
      };
      if (a == "-h" || a == "--help") return "help";
      if (a == "--config") {
        next();
      } else if (a == "--port") {
        cli_ports.push_back(next());
      } else if (a == "--rate") {
        const std::string v = next();
        const auto eq = v.find('=');
        if (eq == std::string::npos) fail("--rate: expected PORT=RATE, like 2=300mbit");
        const std::uint64_t p = integer("--rate PORT", v.substr(0, eq));
        if (p > 255) fail("--rate: port " + std::to_string(p) + " is out of range");
        port(o, p).rate_bps = rate("--rate", v.substr(eq + 1));
      } else if (a == "--ecn") {
        ecn_option(next(), o);
      } else if (a == "--pfc") {
        o->cfg.pfc.enabled = true;
      } else if (a == "--loss") {
        tx.drop = probability(a, next());
        any_tx = true;
      } else if (a == "--duplicate") {
        tx.duplicate = probability(a, next());
        any_tx = true;
      } else if (a == "--reorder") {
        tx.reorder = probability(a, next());
        any_tx = true;
      } else if (a == "--corrupt") {
        tx.corrupt = probability(a, next());
        any_tx = true;
      } else if (a == "--delay") {
        const std::string v = next();
        const auto plus = v.find('+');
        tx.delay_ns = time_ns(a, v.substr(0, plus));
        if (plus != std::string::npos) tx.jitter_ns = time_ns(a + " jitter", v.substr(plus + 1));
        any_tx = true;
      } else if (a == "--seed") {
        o->cfg.seed = integer(a, next());
      } else if (a == "--buffer-kb") {
        o->cfg.buffer_bytes = kib(a, static_cast<double>(integer(a, next())));
      } else if (a == "--scheduling") {
        const std::string v = next();
        if (v != "strict" && v != "dwrr") fail("--scheduling: '" + v + "' is not strict or dwrr");
        o->cfg.scheduling = v == "strict" ? Scheduling::kStrict : Scheduling::kDwrr;
      } else if (a == "--trust-pcp") {
        o->cfg.priority_map.trust_pcp = true;
      } else if (a == "--stats-file") {
        o->stats_file = next();
      } else if (a == "--stats-format") {
        o->stats_format = next();
        if (o->stats_format != "csv" && o->stats_format != "json")
          fail("--stats-format: '" + o->stats_format + "' is not csv or json");
      } else if (a == "--stats-interval") {
        o->stats_interval_ms = static_cast<std::uint32_t>(integer(a, next()));
        if (o->stats_interval_ms == 0) fail("--stats-interval: must be 1 ms or more");
      } else if (a == "--control") {
        o->control = next();
      } else if (a == "--duration") {
        const auto v = number(next());
        if (!v || *v < 0) fail("--duration: expected seconds");
        o->duration_s = *v;
      } else if (a == "--hugepages") {
        o->hugepages = true;
      } else if (a == "--log") {
        o->log_level = next();
      } else {
        fail("unknown option " + a);
      }
    }
    if (!cli_ports.empty()) {
      if (!o->ports.empty() && o->ports.size() != cli_ports.size())
        fail("--port: " + std::to_string(cli_ports.size()) + " ports given, the file has " +
             std::to_string(o->ports.size()));
      o->ports = cli_ports;
    }
    if (o->ports.size() < 2) fail("--port: a switch needs two ports or more");
    if (o->cfg.ports.size() > o->ports.size())
      fail("--rate: port " + std::to_string(o->cfg.ports.size() - 1) + " does not exist (" +
           std::to_string(o->ports.size()) + " ports)");
    o->cfg.ports.resize(o->ports.size());
    if (any_tx) {
      for (PortConfig& pc : o->cfg.ports) pc.tx = tx;
    }
  } catch (const Error& e) {
    return e.what;
  }
  return {};
}

}  // namespace uroce::sw
