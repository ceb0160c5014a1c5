/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-switch's options: the file's schema, one function per table, read
// through config/toml_reader.h; then the command line. Values spelled with
// units are switch/units.h's.

#include "switch/options.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config/toml_reader.h"

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

using config::EmptyList;
using config::TomlReader;

[[noreturn]] void fail(const std::string& what) { throw config::Error(what); }

// `text` when it is `a` or `b`.
std::string one_of(const std::string& what, const std::string& text, const char* a, const char* b) {
  if (text != a && text != b) config::fail(what, "'" + text + "' is not " + a + " or " + b);
  return text;
}

Scheduling scheduling(const std::string& what, const std::string& text) {
  return one_of(what, text, "strict", "dwrr") == "strict" ? Scheduling::kStrict : Scheduling::kDwrr;
}

PortConfig& port(SwitchOptions* o, std::size_t i) {
  if (o->cfg.ports.size() <= i) o->cfg.ports.resize(i + 1);
  return o->cfg.ports[i];
}

// ---- the file ----

// Sizes in the file are whole KiB; ECN thresholds any number of them.
std::optional<std::uint64_t> kib(const TomlReader& t, std::string_view key) {
  const auto v = t.whole(key);
  if (!v) return std::nullopt;
  return kib_bytes(t.where(key), static_cast<double>(*v));
}

std::optional<std::uint64_t> fractional_kib(const TomlReader& t, std::string_view key) {
  const auto v = t.number(key);
  if (!v) return std::nullopt;
  return kib_bytes(t.where(key), *v);
}

void read_switch(const TomlReader& t, SwitchOptions* o) {
  t.only({"buffer_kb", "port_limit_kb", "scheduling", "aging_s", "seed", "control", "duration_s"});
  SwitchConfig& c = o->cfg;
  c.buffer_bytes = kib(t, "buffer_kb").value_or(c.buffer_bytes);
  c.port_limit_bytes = kib(t, "port_limit_kb").value_or(c.port_limit_bytes);
  if (auto v = t.string("scheduling")) c.scheduling = scheduling(t.where("scheduling"), *v);
  if (auto v = t.whole("aging_s")) {
    if (*v < 1 || *v > 1'000'000) t.fail("aging_s", "must be 1 to 1000000");
    c.aging_ns = *v * 1'000'000'000;
  }
  c.seed = t.whole("seed").value_or(c.seed);
  o->control = t.string("control").value_or(o->control);
  if (auto v = t.number("duration_s")) {
    if (*v < 0) t.fail("duration_s", "must be 0 or more");
    o->duration_s = *v;
  }
}

// [ecn]: one marking for the queues it names, every queue by default.
void read_ecn(const TomlReader& t, SwitchConfig* c) {
  t.only({"enabled", "kmin_kb", "kmax_kb", "pmax", "queues"});
  EcnConfig e;
  e.enabled = t.boolean("enabled", true);
  e.kmin_bytes = fractional_kib(t, "kmin_kb").value_or(e.kmin_bytes);
  e.kmax_bytes = fractional_kib(t, "kmax_kb").value_or(e.kmax_bytes);
  e.pmax = t.number("pmax", e.pmax, 0, 1);
  if (e.kmax_bytes <= e.kmin_bytes) t.fail("kmax_kb", "must be above kmin_kb");
  const std::uint8_t queues = t.priorities("queues", 0xFF, EmptyList::kAllowed);
  for (unsigned q = 0; q < kQueues; ++q) {
    if (queues & (1u << q)) c->queues[q].ecn = e;
  }
}

void read_pfc(const TomlReader& t, SwitchPfcConfig* p) {
  t.only({"enabled", "priorities", "xoff_kb", "xon_kb", "headroom_kb", "quanta", "watchdog_ms",
          "restoration_ms"});
  p->enabled = t.boolean("enabled", true);
  p->lossless = t.priorities("priorities", p->lossless, EmptyList::kAllowed);
  p->xoff_bytes = kib(t, "xoff_kb").value_or(p->xoff_bytes);
  p->xon_bytes = kib(t, "xon_kb").value_or(p->xoff_bytes / 2);
  if (p->xon_bytes >= p->xoff_bytes) t.fail("xon_kb", "must be below xoff_kb");
  p->headroom_bytes = kib(t, "headroom_kb").value_or(p->headroom_bytes);
  if (auto v = t.whole("quanta")) {
    if (*v < 1 || *v > 0xFFFF) t.fail("quanta", "must be between 1 and 65535");
    p->quanta = static_cast<std::uint16_t>(*v);
  }
  if (auto v = t.whole("watchdog_ms")) {
    if (*v > 60000) t.fail("watchdog_ms", "must be 0 to 60000");
    p->watchdog.detection_ns = *v * 1'000'000;
  }
  if (auto v = t.whole("restoration_ms")) {
    if (*v < 1 || *v > 60000) t.fail("restoration_ms", "must be 1 to 60000");
    p->watchdog.restoration_ns = *v * 1'000'000;
  }
}

// [priority]: which field a frame's priority comes from, and the maps.
void read_priority(const TomlReader& t, PriorityMap* m) {
  t.only({"trust", "dscp", "pcp"});
  if (auto v = t.string("trust"))
    m->trust_pcp = one_of(t.where("trust"), *v, "dscp", "pcp") == "pcp";
  if (const auto d = t.table("dscp")) {
    for (const auto& [k, v] : d->raw()) {
      const std::string name(k.str());
      char* end = nullptr;
      const long dscp = std::strtol(name.c_str(), &end, 10);
      const auto prio = v.value_exact<std::int64_t>();
      if (*end != '\0' || dscp < 0 || dscp > 63) d->fail(name, "DSCP is 0 to 63");
      if (!prio || *prio < 0 || *prio > 7) d->fail(name, "priority is 0 to 7");
      m->dscp[static_cast<std::size_t>(dscp)] = static_cast<std::uint8_t>(*prio);
    }
  }
  if (const toml::node* n = t.raw().get("pcp")) {
    const toml::array* a = n->as_array();
    if (!a || a->size() != 8) t.fail("pcp", "expected 8 priorities");
    for (std::size_t i = 0; i < 8; ++i) {
      const auto prio = a->get(i)->value_exact<std::int64_t>();
      if (!prio || *prio < 0 || *prio > 7) t.fail("pcp", "priority is 0 to 7");
      m->pcp[i] = static_cast<std::uint8_t>(*prio);
    }
  }
}

// [[queue]]: after [ecn], whose marking a queue's own keys override.
void read_queue(const TomlReader& t, SwitchConfig* c) {
  t.only({"priority", "limit_kb", "weight", "ecn", "kmin_kb", "kmax_kb", "pmax"});
  const auto q = t.whole("priority");
  if (!q || *q > 7) t.fail("priority", "required, 0 to 7");
  QueueConfig& queue = c->queues[*q];
  EcnConfig& e = queue.ecn;
  e.enabled = t.boolean("ecn", e.enabled);
  e.kmin_bytes = fractional_kib(t, "kmin_kb").value_or(e.kmin_bytes);
  e.kmax_bytes = fractional_kib(t, "kmax_kb").value_or(e.kmax_bytes);
  e.pmax = t.number("pmax", e.pmax, 0, 1);
  if (e.kmax_bytes <= e.kmin_bytes) t.fail("kmax_kb", "must be above kmin_kb");
  queue.limit_bytes = kib(t, "limit_kb").value_or(queue.limit_bytes);
  if (auto v = t.whole("weight")) {
    if (*v < 1 || *v > 1000) t.fail("weight", "must be between 1 and 1000");
    queue.weight = static_cast<std::uint32_t>(*v);
  }
}

void read_impairment(const TomlReader& t, ImpairmentConfig* c) {
  t.only({"loss", "duplicate", "reorder", "corrupt", "delay", "jitter"});
  c->drop = t.number("loss", c->drop, 0, 1);
  c->duplicate = t.number("duplicate", c->duplicate, 0, 1);
  c->reorder = t.number("reorder", c->reorder, 0, 1);
  c->corrupt = t.number("corrupt", c->corrupt, 0, 1);
  if (auto v = t.string("delay")) c->delay_ns = time_ns(t.where("delay"), *v);
  if (auto v = t.string("jitter")) c->jitter_ns = time_ns(t.where("jitter"), *v);
}

// [[port]] number i: its device, line rate and impairments.
void read_port(const TomlReader& t, std::size_t i, SwitchOptions* o) {
  t.only({"device", "rate", "rx", "tx"});
  const auto dev = t.string("device");
  if (!dev || dev->empty()) t.fail("device", "is required (a DPDK device)");
  if (o->ports.size() <= i) o->ports.resize(i + 1);
  o->ports[i] = *dev;
  PortConfig& pc = port(o, i);
  if (auto v = t.string("rate")) pc.rate_bps = rate_bps(t.where("rate"), *v);
  if (const auto rx = t.table("rx")) read_impairment(*rx, &pc.rx);
  if (const auto tx = t.table("tx")) read_impairment(*tx, &pc.tx);
}

void read_stats(const TomlReader& t, SwitchOptions* o) {
  t.only({"file", "format", "interval_ms"});
  o->stats_file = t.string("file").value_or(o->stats_file);
  if (auto v = t.string("format")) o->stats_format = one_of(t.where("format"), *v, "csv", "json");
  if (auto v = t.whole("interval_ms")) {
    if (*v < 1) t.fail("interval_ms", "must be 1 or more");
    o->stats_interval_ms = static_cast<std::uint32_t>(*v);
  }
}

// ---- the command line ----

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
      e.kmin_bytes = whole_number("--ecn kmin", v);
    } else if (k == "kmax") {
      e.kmax_bytes = whole_number("--ecn kmax", v);
    } else if (k == "pmax") {
      e.pmax = probability("--ecn pmax", v);
    } else {
      fail("--ecn: unknown '" + k + "' (kmin=B,kmax=B,pmax=P)");
    }
  }
  if (e.kmax_bytes <= e.kmin_bytes) fail("--ecn: kmax must be above kmin");
  for (unsigned q = 0; q < kQueues; ++q) o->cfg.queues[q].ecn = e;
}

}  // namespace

std::string apply_switch_toml(const std::string& text, const std::string& origin,
                              SwitchOptions* o) {
  std::string error;
  const std::optional<toml::table> root = config::parse_toml(text, origin, &error);
  if (!root) return error;
  try {
    const config::KeySource source{origin, {}};
    const TomlReader r(*root, source);
    r.only({"switch", "ecn", "pfc", "priority", "queue", "port", "stats"});
    if (const auto t = r.table("switch")) read_switch(*t, o);
    if (const auto t = r.table("ecn")) read_ecn(*t, &o->cfg);
    if (const auto t = r.table("pfc")) read_pfc(*t, &o->cfg.pfc);
    if (const auto t = r.table("priority")) read_priority(*t, &o->cfg.priority_map);
    for (const TomlReader& t : r.tables("queue")) read_queue(t, &o->cfg);
    const std::vector<TomlReader> ports = r.tables("port");
    for (std::size_t i = 0; i < ports.size(); ++i) read_port(ports[i], i, o);
    if (const auto t = r.table("stats")) read_stats(*t, o);
  } catch (const config::Error& e) {
    return e.what();
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
        const std::uint64_t p = whole_number("--rate PORT", v.substr(0, eq));
        if (p > 255) fail("--rate: port " + std::to_string(p) + " is out of range");
        port(o, p).rate_bps = rate_bps("--rate", v.substr(eq + 1));
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
        o->cfg.seed = whole_number(a, next());
      } else if (a == "--buffer-kb") {
        o->cfg.buffer_bytes = kib_bytes(a, static_cast<double>(whole_number(a, next())));
      } else if (a == "--scheduling") {
        o->cfg.scheduling = scheduling(a, next());
      } else if (a == "--trust-pcp") {
        o->cfg.priority_map.trust_pcp = true;
      } else if (a == "--stats-file") {
        o->stats_file = next();
      } else if (a == "--stats-format") {
        o->stats_format = one_of(a, next(), "csv", "json");
      } else if (a == "--stats-interval") {
        o->stats_interval_ms = static_cast<std::uint32_t>(whole_number(a, next()));
        if (o->stats_interval_ms == 0) fail("--stats-interval: must be 1 ms or more");
      } else if (a == "--control") {
        o->control = next();
      } else if (a == "--duration") {
        const auto v = parse_number(next());
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
  } catch (const config::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace uroce::sw
