/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/device.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "log/log.h"
#include "pfc/classify.h"
#include "port/fault_port.h"
#include "stats/stats_server.h"
#include "transport/limits.h"
#include "transport/random.h"
#include "verbs/dm.h"
#include "verbs/gsi.h"
#include "verbs/mr.h"
#include "verbs/netdev_gids.h"
#include "verbs/netdev_neighbors.h"
#include "verbs/pd.h"
#include "verbs/port_driver.h"

namespace uroce::verbs {

namespace {

// Modified EUI-64 of a MAC (RFC 4291 appendix A): the node GUID and the
// interface identifier of the link-local GID.
std::array<std::uint8_t, 8> eui64(const wire::MacAddr& m) {
  return {static_cast<std::uint8_t>(m.bytes[0] ^ 2),
          m.bytes[1],
          m.bytes[2],
          0xFF,
          0xFE,
          m.bytes[3],
          m.bytes[4],
          m.bytes[5]};
}

}  // namespace

std::unique_ptr<Device> Device::open(const DeviceConfig& dc, const Config& c, std::string* error) {
  const PortDriver* driver = find_port_driver(dc);
  if (!driver) {
    *error = dc.name + ": no port driver for '" + dc.port + "'";
    return nullptr;
  }
  std::unique_ptr<port::Port> port = driver->open(dc, c, error);
  if (!port) {
    *error = dc.name + ": " + *error;
    return nullptr;
  }
  return open(dc, c, std::move(port), error);
}

std::unique_ptr<port::Port> Device::with_faults(std::unique_ptr<port::Port> port, const Config& c) {
  // Fault injection, a test feature ([fault]), wraps whatever port it is.
  const FaultSettings& f = c.fault;
  port::FaultConfig faults;
  faults.rx = {f.rx_drop, f.rx_duplicate, f.rx_reorder, f.rx_corrupt};
  faults.tx = {f.tx_drop, f.tx_duplicate, f.tx_reorder, f.tx_corrupt};
  faults.seed = f.seed;
  return port::with_faults(std::move(port), faults);
}

std::vector<wire::IpAddr> Device::gid_table(const DeviceConfig& dc, const wire::MacAddr& mac,
                                            std::string* error) {
  // GID 0: fe80::/64 with the EUI-64 of the MAC, as every RoCE NIC has;
  // then the configured addresses.
  wire::IpAddr ll;
  ll.bytes[0] = 0xFE;
  ll.bytes[1] = 0x80;
  const auto id = eui64(mac);
  std::copy(id.begin(), id.end(), ll.bytes.begin() + 8);
  std::vector<wire::IpAddr> gids{ll};
  for (const IpPrefix& p : dc.ip) {
    const auto ip = wire::IpAddr::parse(p.address);
    if (!ip) {
      *error = dc.name + ": bad address " + p.address;
      return {};
    }
    gids.push_back(*ip);
  }
  return gids;
}

bool Device::engine_setup(const DeviceConfig& dc, const Config& c, const wire::MacAddr& mac,
                          std::vector<wire::IpAddr>* gids, engine::EngineConfig* ec,
                          std::string* error) {
  *gids = gid_table(dc, mac, error);
  if (gids->empty()) return false;
  // The configured addresses come first: the engine sources ARP and
  // neighbour solicitations from the first address of the family. The
  // link-local one follows, so traffic to GID 0 is received and answered.
  ec->addresses.assign(gids->begin() + 1, gids->end());
  ec->addresses.push_back(gids->front());
  const FaultSettings& f = c.fault;
  ec->rx_buffer.bytes = std::uint64_t{f.rx_buffer_kb} * 1024;
  ec->rx_buffer.rate_mbps = f.rx_rate_mbps;
  const PfcSettings& pfc = c.pfc;
  ec->pfc.enabled = pfc.enabled;
  ec->pfc.xoff.lossless = pfc.priorities;
  ec->pfc.xoff.xoff_bytes = std::uint64_t{pfc.xoff_kb} * 1024;
  ec->pfc.xoff.xon_bytes = std::uint64_t{pfc.xon_kb} * 1024;
  ec->pfc.xoff.quanta = pfc.quanta;
  ec->pfc.watchdog.detection_ns = std::uint64_t{pfc.watchdog_ms} * 1'000'000;
  ec->pfc.watchdog.restoration_ns = std::uint64_t{pfc.restoration_ms} * 1'000'000;
  const bool tagged = dc.priority_tag || dc.vlan_id != 0;
  ec->ud_priority = tagged ? dc.pcp : pfc::dscp_priority(dc.dscp);
  ec->vlan_id = dc.vlan_id;
  ec->kernel_stack = !dc.netdev.empty();
  if (ec->kernel_stack) ec->kernel_neighbors = kernel_neighbors(dc.netdev);
  return true;
}

void Device::serve_prometheus(const Config& c) {
  if (c.stats.prometheus.empty()) return;
  static std::once_flag once;
  std::call_once(once, [&] {
    std::string why = "the stats endpoint could not start";
    auto* server = stats::StatsServer::instance();
    if (!server || !server->serve_prometheus(c.stats.prometheus, &why))
      log::get().error("stats.prometheus: {}; no metrics over HTTP", why);
  });
}

std::unique_ptr<Device> Device::open(const DeviceConfig& dc, const Config& c,
                                     std::unique_ptr<port::Port> port, std::string* error) {
  std::unique_ptr<Device> d(new Device());
  d->cfg_ = dc;
  // Lcores 1 and up each poll a queue of the port (the fault decorator,
  // if any, on each).
  std::vector<std::unique_ptr<port::Port>> queues;
  if (dc.lcores == 0 || dc.lcores > engine::kMaxLcores) {
    *error = "lcores: " + std::to_string(dc.lcores) + " is not 1 to " +
             std::to_string(engine::kMaxLcores);
    return nullptr;
  }
  if (dc.lcores > 1) {
    if (port->shared()) {
      *error = "lcores: a device served by uroced runs on the daemon's lcore; set lcores = 1";
      return nullptr;
    }
    if (c.fault.rx_rate_mbps != 0) {
      *error = "lcores: the slow receiver (fault.rx_rate_mbps) needs lcores = 1";
      return nullptr;
    }
    for (std::uint16_t q = 1; q < dc.lcores; ++q) {
      auto queue = port->open_queue(q);
      if (!queue) {
        *error = "lcores = " + std::to_string(dc.lcores) + ": port " + dc.port + " has no queue " +
                 std::to_string(q) + " (a port of one queue runs on one lcore)";
        return nullptr;
      }
      queues.push_back(with_faults(std::move(queue), c));
    }
  }
  d->port_ = with_faults(std::move(port), c);
  const wire::MacAddr mac = d->port_->mac();
  // Programs check the port once, right after opening (perftest refuses a
  // port that is down): give a link that needs its peer (memif) time.
  const auto link_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(dc.link_wait_ms);
  while (!d->port_->link_up() && std::chrono::steady_clock::now() < link_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  engine::EngineConfig ec;
  std::vector<wire::IpAddr> gids;
  if (!engine_setup(dc, c, mac, &gids, &ec, error)) return nullptr;
  d->gid_table_ = GidTable(gids.front(), {gids.begin() + 1, gids.end()}, kGidTableLen);
  d->addresses_ = dc.ip;
  if (!dc.netdev.empty()) {
    // A netdev device's GIDs are its interface's addresses, as they come
    // and go (rxe's follow the same notifications).
    std::string why;
    d->address_watch_ = config::AddressWatch::open(dc.netdev, &why);
    if (!d->address_watch_)
      log::get().warn("{}: {}; the GID table stays as it is now", dc.name, why);
  }
  if (d->port_->shared()) {
    // Another program's XRC target QP, for a request to an SRQ of ours.
    Device* dev = d.get();
    ec.adopt_qp = [dev](const wire::RocePacket& pkt) {
      return dev->xrc_domains().adopt_target(pkt);
    };
  }
  if (dc.lcores > 1) {
    d->handoff_ = std::make_unique<engine::Handoff>(dc.lcores);
    ec.handoff = d->handoff_.get();
  }
  d->engine_ = std::make_unique<engine::Engine>(*d->port_, ec);
  if (dc.lcores > 1 && c.pfc.enabled && !d->engine_->hardware_pfc()) {
    // Pauses are lcore 0's to hear and would hold its QPs only.
    *error = "lcores: PFC in software (the port has none of its own) needs lcores = 1";
    return nullptr;
  }
  for (std::uint16_t i = 1; i < dc.lcores; ++i) {
    MoreLcore l;
    l.port = std::move(queues[i - 1]);
    engine::EngineConfig lc = ec;
    lc.lcore = i;
    lc.pfc.enabled = false;  // the NIC's (above): lcore 0 counts its frames
    l.engine = std::make_unique<engine::Engine>(*l.port, std::move(lc));
    d->more_.push_back(std::move(l));
  }
  d->dcqcn_ = c.dcqcn;
  for (std::uint16_t i = 0; i < dc.lcores; ++i) {
    if (c.dcqcn.enabled) d->np_.push_back(std::make_unique<cc::NotificationPoint>(d->dcqcn_));
    d->cc_counters_.push_back(std::make_unique<cc::Counters>());
  }
  d->link_was_up_ = d->port_->link_up();
  Device* self = d.get();
  d->poller_ = std::make_unique<engine::PollThread>(*d->engine_, [self] { self->housekeep(); });
  for (MoreLcore& l : d->more_) l.poller = std::make_unique<engine::PollThread>(*l.engine);

  // Every limit comes from verbs/limits.h; the identity from the port.
  for (std::uint8_t b : eui64(mac)) d->attr_.node_guid = d->attr_.node_guid << 8 | b;
  if (auto* server = stats::StatsServer::instance()) {
    d->stats_handle_ = server->add(dc.name, [self](std::string& out) { self->write_stats(out); });
  }
  serve_prometheus(c);
  log::get().info("{}: opened on {}, {} GIDs", dc.name, dc.port, gids.size());
  return d;
}

void Device::end_of_process() {
  if (Gsi* g = gsi_.load(std::memory_order_acquire)) g->drain();
  // The ACKs of what the program received last may wait for its next
  // call, which will not come.
  engine_->finish_turn();
  for (MoreLcore& l : more_) l.engine->finish_turn();
  poller_->stop();
  for (MoreLcore& l : more_) l.poller->stop();
  write_stats_file();
}

Device::~Device() {
  write_stats_file();
  // The poll thread first (it runs the CM's timers), then QP 1, then the
  // engine under it.
  poller_.reset();
  for (MoreLcore& l : more_) l.poller.reset();
  gsi_.store(nullptr, std::memory_order_release);
  gsi_owner_.reset();
  xrc_->drop_adopted();
  // Every lcore's engine before any queue: an engine gives its port
  // queue's frames back as it goes.
  for (MoreLcore& l : more_) l.engine.reset();
  engine_.reset();
  more_.clear();  // the queues before the port they are queues of
  port_.reset();
}

void Device::write_stats_file() {
  if (stats_written_) return;
  stats_written_ = true;
  if (stats_handle_ != 0) stats::StatsServer::instance()->remove(stats_handle_);
  stats_handle_ = 0;
  // UROCE_STATS_FILE keeps the counters of a program that is gone
  // (perftest, a test): the last snapshot, appended as uroce-stat prints.
  // A device that failed to open has no engine and no counters.
  if (const char* path = std::getenv("UROCE_STATS_FILE"); engine_ && path && *path) {
    std::string out;
    write_stats(out);
    if (std::FILE* f = std::fopen(path, "a")) {
      std::size_t start = 0;
      for (std::size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1)
        std::fprintf(f, "%s %.*s\n", cfg_.name.c_str(), static_cast<int>(nl - start),
                     out.data() + start);
      std::fclose(f);
    }
  }
}

Gsi& Device::gsi() {
  if (Gsi* g = gsi_.load(std::memory_order_acquire)) return *g;
  std::lock_guard lock(gsi_mu_);
  if (!gsi_owner_) {
    gsi_owner_ = std::make_unique<Gsi>(*this);
    gsi_.store(gsi_owner_.get(), std::memory_order_release);
  }
  return *gsi_owner_;
}

std::vector<wire::IpAddr> Device::gids() const {
  std::lock_guard lock(gid_mu_);
  return gid_table_.entries();
}

std::vector<IpPrefix> Device::addresses() const {
  std::lock_guard lock(gid_mu_);
  return addresses_;
}

void Device::follow_addresses() {
  if (!address_watch_ || !address_watch_->changed()) return;
  std::vector<wire::IpAddr> entries;
  std::vector<wire::IpAddr> engine_addresses;
  {
    std::lock_guard lock(gid_mu_);
    const auto changed = reread_netdev(cfg_.netdev, gid_table_, addresses_);
    if (!changed || !*changed) return;
    if (gid_table_.left_out() != 0)
      log::get().warn("{}: the GID table is full; {} address(es) left out", cfg_.name,
                      gid_table_.left_out());
    entries = gid_table_.entries();
    engine_addresses = gid_table_.addresses();
  }
  // Outside gid_mu_: the engine thread reads the GIDs holding the engine.
  for (std::uint16_t i = 1; i < lcores(); ++i) engine_at(i).set_addresses(engine_addresses);
  engine_->set_addresses(std::move(engine_addresses));
  {
    // Under gsi_mu_: a Gsi made meanwhile copied the table, old or new;
    // one made after this sees the new one.
    std::lock_guard lock(gsi_mu_);
    if (gsi_owner_) gsi_owner_->set_gids(entries);
  }
  log::get().info("{}: the GID table changed, {} entries", cfg_.name, entries.size());
  std::lock_guard lock(link_mu_);
  for (const auto& [handle, fn] : link_listeners_) fn(PortEvent::kGidChange);
}

void Device::set_housekeeping_hook(std::function<void()> fn) {
  std::lock_guard lock(link_mu_);
  housekeeping_hook_ = std::move(fn);
}

void Device::housekeep() {
  watch_link();
  follow_addresses();
  std::function<void()> hook;
  {
    std::lock_guard lock(link_mu_);
    hook = housekeeping_hook_;
  }
  if (hook) hook();  // outside the lock: it may read every counter
  if (Gsi* g = gsi_.load(std::memory_order_acquire)) g->housekeep();
}

void Device::poll() {
  for (std::uint16_t i = 0; i < lcores(); ++i) engine_at(i).poll(engine::now_ns());
}

void Device::drive() {
  if (more_.empty()) {
    poller_->drive();
    return;
  }
  // One pace for them all: an idle device yields once per look, not once
  // per lcore.
  std::uint32_t work = poller_->poll_once();
  for (MoreLcore& l : more_) work += l.poller->poll_once();
  poller_->pace(work);
}

void Device::begin_wait() {
  for (std::uint16_t i = 0; i < lcores(); ++i) poller_at(i).begin_wait();
}

void Device::end_wait() {
  for (std::uint16_t i = 0; i < lcores(); ++i) poller_at(i).end_wait();
}

void Device::hold_from(std::uint16_t i, const std::function<void()>& fn) {
  if (i == lcores()) {
    fn();
    return;
  }
  engine_at(i).locked([&] { hold_from(static_cast<std::uint16_t>(i + 1), fn); });
}

PortAttr Device::port_attr() const {
  PortAttr p;
  p.state = port_->link_up() ? PortState::kActive : PortState::kDown;
  p.active_mtu = wire::mtu_for_link(port_->mtu()).value_or(wire::Mtu::k256);
  {
    std::lock_guard lock(gid_mu_);
    p.gid_tbl_len = static_cast<std::uint32_t>(gid_table_.capacity());
  }
  p.speed_mbps = port_->speed_mbps();
  return p;
}

int Device::add_link_listener(std::function<void(PortEvent)> fn) {
  std::lock_guard lock(link_mu_);
  link_listeners_.emplace_back(next_listener_, std::move(fn));
  return next_listener_++;
}

void Device::remove_link_listener(int handle) {
  std::lock_guard lock(link_mu_);
  std::erase_if(link_listeners_, [handle](const auto& l) { return l.first == handle; });
}

void Device::watch_link() {
  if (!failed() && port_->failed()) {
    // The daemon of a shared port is gone, and with it the wire: what
    // waits on a QP fails now instead of never.
    log::get().error("{}: the device is lost (its daemon exited)", cfg_.name);
    failed_.store(true, std::memory_order_release);
    for (std::uint16_t i = 0; i < lcores(); ++i) engine_at(i).fail_all(engine::now_ns());
    std::lock_guard lock(link_mu_);
    link_was_up_ = false;
    for (const auto& [handle, fn] : link_listeners_) fn(PortEvent::kDown);
    for (const auto& [handle, fn] : link_listeners_) fn(PortEvent::kFatal);
    return;
  }
  const bool up = !failed() && port_->link_up();
  std::lock_guard lock(link_mu_);
  if (up == link_was_up_) return;
  link_was_up_ = up;
  log::get().info("{}: link {}", cfg_.name, up ? "up" : "down");
  for (const auto& [handle, fn] : link_listeners_) fn(up ? PortEvent::kActive : PortEvent::kDown);
}

namespace {

// The counters of `n` sets summed name by name: each(i, add) reports set
// i's, add(name, value), every set the same names in the same order (an
// lcore's engine, fault decorator, DCQCN).
template <typename Each>
std::vector<std::pair<std::string, std::uint64_t>> summed(std::size_t n, Each&& each) {
  std::vector<std::pair<std::string, std::uint64_t>> total;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t k = 0;
    each(i, [&](std::string_view name, std::uint64_t v) {
      if (k == total.size()) total.emplace_back(name, 0);
      total[k++].second += v;
    });
  }
  return total;
}

}  // namespace

void Device::for_each_counter(const CounterFn& fn) {
  // The engine's counters summed over its lcores, as a NIC's are over its
  // queues; each lcore's own below, when there are several.
  const auto engine_total = summed(lcores(), [&](std::size_t i, const auto& add) {
    engine_at(static_cast<std::uint16_t>(i)).counters().for_each(add);
  });
  for (const auto& [name, v] : engine_total) fn("engine", name, v);
  const auto faults = summed(lcores(), [&](std::size_t i, const auto& add) {
    port::for_each_fault_counter(port_at(static_cast<std::uint16_t>(i)), add);
  });
  for (const auto& [name, v] : faults) fn("engine", name, v);
  const auto drops = summed(lcores(), [&](std::size_t i, const auto& add) {
    engine_at(static_cast<std::uint16_t>(i)).counters().for_each_drop(add);
  });
  for (const auto& [name, v] : drops) fn("drop", name, v);
  if (lcores() > 1) {
    for (std::uint16_t i = 0; i < lcores(); ++i) {
      const std::string scope = "lcore:" + std::to_string(i);
      engine_at(i).counters().for_each(
          [&](std::string_view name, std::uint64_t v) { fn(scope, name, v); });
    }
  }
  port_->for_each_stat([&](std::string_view name, std::uint64_t v) { fn("nic", name, v); });
  engine_->pfc_counters().for_each(
      [&](const std::string& name, std::uint64_t v) { fn("pfc", name, v); });
  // The transport's counters summed over every QP the device has had,
  // as RoCE NICs keep them per port (mlx5's hw_counters).
  std::array<std::uint64_t, transport::Counters::kSize> total;
  {
    std::lock_guard lock(retired_mu_);
    total = retired_;
  }
  for (std::uint16_t l = 0; l < lcores(); ++l) {
    engine_at(l).for_each_qp([&](const transport::Qp& qp) {
      std::size_t i = 0;
      qp.counters().for_each([&](std::string_view, std::uint64_t v) { total[i++] += v; });
    });
  }
  for (std::size_t i = 0; i < total.size(); ++i)
    fn("port", transport::name(static_cast<transport::Counter>(i)), total[i]);
  // DCQCN's, summed over the lcores (none on a device that failed to
  // open).
  const auto cc_total = summed(
      cc_counters_.size(), [&](std::size_t i, const auto& add) { cc_counters_[i]->for_each(add); });
  for (const auto& [name, v] : cc_total) fn("port", name, v);
  for (std::uint16_t l = 0; l < lcores(); ++l)
    engine_at(l).for_each_qp([&](const transport::Qp& qp) {
      char scope[16];
      std::snprintf(scope, sizeof(scope), "qp:%06x", qp.qpn());
      qp.counters().for_each([&](std::string_view name, std::uint64_t v) { fn(scope, name, v); });
      // Where it stands: its state (ibv_qp_state's numbers: 3 RTS, 6 ERR),
      // its peer, its PSNs, what it still has to send, its retry budgets.
      // A connection that stopped moving shows why here.
      const transport::Qp::Progress p = qp.progress_state();
      fn(scope, "state", static_cast<std::uint64_t>(qp.state()));
      fn(scope, "dest_qp_num", qp.attr().dest_qp_num);
      fn(scope, "sq_psn", p.sq_psn);
      fn(scope, "sq_unacked_psn", p.sq_unacked_psn);
      fn(scope, "rq_psn", p.rq_psn);
      fn(scope, "sq_wqes", p.sq_wqes);
      fn(scope, "retry_left", p.retry_left);
      fn(scope, "rnr_retry_left", p.rnr_retry_left);
      // DCQCN's state of the QP: current and target rate, alpha.
      if (const auto* cc = dynamic_cast<const cc::QpCongestion*>(qp.gate())) {
        fn(scope, "dcqcn_rate_mbps", cc->rate_bps() / 1'000'000);
        fn(scope, "dcqcn_target_mbps", cc->target_bps() / 1'000'000);
        fn(scope, "dcqcn_alpha_x1024", static_cast<std::uint64_t>(cc->alpha() * 1024));
      }
    });
  if (const Gsi* g = gsi_.load(std::memory_order_acquire))
    g->for_each_counter([&](std::string_view name, std::uint64_t v) { fn("cm", name, v); });
}

void Device::write_stats(std::string& out) {
  for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
    out.append(scope).append(" ").append(name).append(" ").append(std::to_string(v)).append("\n");
  });
}

std::unique_ptr<cc::QpCongestion> Device::make_congestion(const transport::Qp* const* qp,
                                                          std::uint32_t qpn) {
  if (np_.empty()) return nullptr;
  // RP and NP by priority, as mlx5's ecn/roce_rp/enable/N and
  // roce_np/enable/N: the priority of the device's RoCE traffic.
  const bool tagged = cfg_.priority_tag || cfg_.vlan_id != 0;
  const unsigned prio = tagged ? cfg_.pcp : pfc::dscp_priority(cfg_.dscp);
  const std::uint64_t line =
      std::uint64_t{port_->speed_mbps() != 0 ? port_->speed_mbps() : 10000} * 1'000'000;
  const std::uint8_t cnp_dscp = dcqcn_.cnp_dscp;
  const std::uint8_t cnp_prio = dcqcn_.cnp_802p_prio;
  // The QP's lcore's: its receive, which sends the CNP, runs there.
  engine::Engine* engine = &engine_of(qpn);
  return std::make_unique<cc::QpCongestion>(
      dcqcn_, line, dcqcn_.rp_priorities >> prio & 1, dcqcn_.np_priorities >> prio & 1,
      *np_[owner(qpn)], *cc_counters_[owner(qpn)], [engine, qp, cnp_dscp, cnp_prio] {
        // Toward the QP's peer, on the CNP's own DSCP and
        // priority.
        wire::RoceRoute r = (*qp)->attr().route;
        r.dscp = cnp_dscp;
        r.pcp = cnp_prio;
        r.ecn = wire::Ecn::kNotEct;
        engine->send_cnp(r, (*qp)->attr().dest_qp_num);
      });
}

void Device::retire_qp_counters(const transport::Counters& c) {
  std::lock_guard lock(retired_mu_);
  std::size_t i = 0;
  c.for_each([&](std::string_view, std::uint64_t v) { retired_[i++] += v; });
}

std::uint32_t Device::alloc_qpn(bool on_lcore0) {
  // On a shared port the host's daemon keeps the QPN space.
  if (port_->shared()) return port_->alloc_qpn();
  std::lock_guard lock(qpn_mu_);
  for (;;) {
    const std::uint32_t q = transport::secure_random_qpn();
    if (on_lcore0 && owner(q) != 0) continue;
    if (std::find(qpns_.begin(), qpns_.end(), q) == qpns_.end()) {
      qpns_.push_back(q);
      return q;
    }
  }
}

void Device::free_qpn(std::uint32_t qpn) {
  if (port_->shared()) {
    port_->free_qpn(qpn);
    return;
  }
  std::lock_guard lock(qpn_mu_);
  qpns_.erase(std::remove(qpns_.begin(), qpns_.end(), qpn), qpns_.end());
}

void Device::remember(Pd& pd) {
  std::lock_guard lock(handles_mu_);
  pds_[pd.id()] = &pd;
}
void Device::remember(Mr& mr) {
  std::lock_guard lock(handles_mu_);
  mrs_by_handle_[mr.lkey()] = &mr;
}
void Device::remember(Dm& dm) {
  std::lock_guard lock(handles_mu_);
  dms_[dm.handle()] = &dm;
}

namespace {
template <typename T>
void erase_if_is(std::unordered_map<std::uint32_t, T*>& m, std::uint32_t handle, const T* obj) {
  if (const auto it = m.find(handle); it != m.end() && it->second == obj) m.erase(it);
}
template <typename T>
int with(std::mutex& mu, std::unordered_map<std::uint32_t, T*>& m, std::uint32_t handle,
         const std::function<int(T*)>& fn) {
  std::lock_guard lock(mu);
  const auto it = m.find(handle);
  return fn(it == m.end() ? nullptr : it->second);
}
}  // namespace

void Device::forget(Pd& pd) {
  std::lock_guard lock(handles_mu_);
  erase_if_is(pds_, pd.id(), &pd);
}
void Device::forget(Mr& mr) {
  std::lock_guard lock(handles_mu_);
  erase_if_is(mrs_by_handle_, mr.lkey(), &mr);
}
void Device::forget(Dm& dm) {
  std::lock_guard lock(handles_mu_);
  erase_if_is(dms_, dm.handle(), &dm);
}
int Device::retire(Pd& pd) {
  std::lock_guard lock(handles_mu_);
  if (pd.users().busy()) return EBUSY;
  erase_if_is(pds_, pd.id(), &pd);
  return 0;
}
int Device::retire(Dm& dm) {
  std::lock_guard lock(handles_mu_);
  if (dm.users().busy()) return EBUSY;
  erase_if_is(dms_, dm.handle(), &dm);
  return 0;
}
int Device::retire(Mr& mr, const std::function<int()>& dereg) {
  std::lock_guard lock(handles_mu_);
  if (int rc = dereg(); rc != 0) return rc;
  erase_if_is(mrs_by_handle_, mr.lkey(), &mr);
  return 0;
}
int Device::with_pd(std::uint32_t handle, const std::function<int(Pd*)>& fn) {
  return with(handles_mu_, pds_, handle, fn);
}
int Device::with_mr(std::uint32_t handle, const std::function<int(Mr*)>& fn) {
  return with(handles_mu_, mrs_by_handle_, handle, fn);
}
int Device::with_dm(std::uint32_t handle, const std::function<int(Dm*)>& fn) {
  return with(handles_mu_, dms_, handle, fn);
}

int Device::attach_mcast(const wire::IpAddr& group, transport::Qp& qp) {
  std::lock_guard lock(mcast_mu_);
  const auto it = mcast_members_.find(group.bytes);
  if (it == mcast_members_.end() && mcast_members_.size() >= attr_.max_mcast_grp) return ENOMEM;
  if ((it != mcast_members_.end() && it->second >= attr_.max_mcast_qp_attach) ||
      mcast_attached_ >= attr_.max_total_mcast_qp_attach)
    return ENOMEM;
  engine_->attach_mcast(group, qp);
  ++mcast_members_[group.bytes];
  ++mcast_attached_;
  return 0;
}

int Device::detach_mcast(const wire::IpAddr& group, std::uint32_t qpn) {
  std::lock_guard lock(mcast_mu_);
  if (!engine_->detach_mcast(group, qpn)) return EINVAL;
  const auto it = mcast_members_.find(group.bytes);
  if (it != mcast_members_.end() && --it->second == 0) mcast_members_.erase(it);
  --mcast_attached_;
  return 0;
}

int Device::resolve(const AddressVector& av, std::uint32_t src_qpn, std::uint32_t dst_qpn,
                    wire::RoceRoute* out, std::chrono::milliseconds timeout) {
  if (!av.has_grh || (av.port_num != 0 && av.port_num != 1)) return EINVAL;
  const std::vector<wire::IpAddr> gids = this->gids();
  if (av.sgid_index >= gids.size() || gids[av.sgid_index] == wire::IpAddr{}) return EINVAL;
  wire::IpAddr dst;
  dst.bytes = av.dgid;
  const wire::IpAddr& src = gids[av.sgid_index];
  if (src.is_v4() != dst.is_v4()) return EINVAL;
  const auto route = engine_->route_to(src, dst, timeout);
  if (!route) return EHOSTUNREACH;
  *out = *route;
  out->dscp = av.traffic_class >> 2 ? static_cast<std::uint8_t>(av.traffic_class >> 2) : cfg_.dscp;
  // The priority PFC acts on: the tag's PCP when tagged, else the DSCP's.
  out->vlan = cfg_.priority_tag || cfg_.vlan_id != 0;
  out->vid = cfg_.vlan_id;
  out->pcp = cfg_.pcp;
  // DCQCN needs ECN-capable packets for switches to mark.
  out->ecn = cfg_.ecn || dcqcn_.enabled ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  out->hop_limit = av.hop_limit ? av.hop_limit : 64;
  out->flow_label = av.flow_label;
  out->udp_sport = wire::roce_udp_sport(src_qpn, dst_qpn);
  return 0;
}

}  // namespace uroce::verbs
