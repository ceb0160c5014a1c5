/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A uroce device: a port with its engine and poll thread, its GID table,
// the QPN space, the memory region table and device memory, and the
// counters of it all. What ibv_open_device opens; the objects programs
// make on it (verbs/pd.h, mr.h, cq.h, srq.h, ah.h, dm.h, queue_pair.h)
// belong to a context of it (verbs/context.h).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/qp_congestion.h"
#include "config/address_watch.h"
#include "engine/engine.h"
#include "engine/poll_thread.h"
#include "port/port.h"
#include "transport/limits.h"
#include "transport/qp.h"
#include "uroce/config.h"
#include "verbs/address_vector.h"
#include "verbs/device_memory.h"
#include "verbs/gid_table.h"
#include "verbs/limits.h"
#include "verbs/mr_table.h"
#include "verbs/xrcd.h"

namespace uroce::verbs {

class Pd;
class Mr;
class Dm;
class Gsi;

enum class PortState : std::uint8_t { kDown = 1, kActive = 4 };  // IBV_PORT_*

struct PortAttr {
  PortState state = PortState::kDown;
  wire::Mtu max_mtu = wire::Mtu::k4096;
  wire::Mtu active_mtu = wire::Mtu::k1024;
  std::uint32_t gid_tbl_len = 0;
  std::uint32_t speed_mbps = 0;
};

class Device {
 public:
  /// Opens the device `dc` describes on `port` (which a port driver
  /// opened: verbs/port_driver.h), with its engine and poll thread. Null
  /// with *error on failure.
  static std::unique_ptr<Device> open(const DeviceConfig& dc, const Config& c,
                                      std::unique_ptr<port::Port> port, std::string* error);
  /// The same on the port the configuration names, opened by the driver
  /// that claims it.
  static std::unique_ptr<Device> open(const DeviceConfig& dc, const Config& c, std::string* error);
  ~Device();
  /// The process is ending (exit(), from whichever thread): its counters
  /// go to UROCE_STATS_FILE, QP 1 says its last, the poll thread stops.
  /// The objects stay: another thread of the program may still be inside
  /// a verbs call (rping's CM thread calls exit() while its main thread
  /// tears down), and must find them until the process is gone.
  void end_of_process();

  /// `port` behind the fault decorator when the configuration asks for
  /// faults ([fault]), else `port` itself.
  static std::unique_ptr<port::Port> with_faults(std::unique_ptr<port::Port> port, const Config& c);
  /// Starts the process's Prometheus endpoint when the configuration
  /// names one ([stats] prometheus): once per process, by the first
  /// device (or the daemon). A failure is logged and the process runs on.
  static void serve_prometheus(const Config& c);
  /// The GID table of device `dc` on a port with MAC `mac`: GID 0 the
  /// link-local address of the MAC, then the configured addresses. Empty
  /// with *error on a bad address.
  static std::vector<wire::IpAddr> gid_table(const DeviceConfig& dc, const wire::MacAddr& mac,
                                             std::string* error);
  /// The GID table and the engine's configuration of device `dc` on a
  /// port with MAC `mac`: what open() sets up, and what the device daemon
  /// runs its engine with. False with *error on a bad address.
  static bool engine_setup(const DeviceConfig& dc, const Config& c, const wire::MacAddr& mac,
                           std::vector<wire::IpAddr>* gids, engine::EngineConfig* ec,
                           std::string* error);

  const std::string& name() const { return cfg_.name; }
  const DeviceConfig& config() const { return cfg_; }
  const DeviceAttr& attr() const { return attr_; }
  PortAttr port_attr() const;
  /// GID table: index 0 is the IPv6 link-local address made from the MAC,
  /// then one RoCEv2 GID per address (IPv4-mapped for IPv4), an empty
  /// entry zero (verbs/gid_table.h). A copy: a netdev device's table
  /// follows its interface's addresses.
  std::vector<wire::IpAddr> gids() const;
  /// The device's addresses with their prefixes: the configured ones, or
  /// a netdev device's interface's as they are now.
  std::vector<IpPrefix> addresses() const;

  /// The engine of lcore 0, which runs the host stack (ARP, neighbour
  /// discovery, ping), QP 1, the UD QPs and multicast.
  engine::Engine& engine() { return *engine_; }
  /// The engine that owns QP `qpn` (engine/handoff.h): lcore 0's unless
  /// the device runs on several lcores.
  engine::Engine& engine_of(std::uint32_t qpn) { return engine_at(owner(qpn)); }
  /// The poll thread of the lcore that owns QP `qpn`.
  engine::PollThread& progress_of(std::uint32_t qpn) { return poller_at(owner(qpn)); }
  /// The lcores the device's engine runs on (DeviceConfig::lcores).
  std::uint16_t lcores() const { return static_cast<std::uint16_t>(1 + more_.size()); }
  /// Runs one iteration of every lcore's engine on this thread, waiting
  /// for each if another thread has it.
  void poll();
  /// PollThread::drive on every lcore: a program polling a CQ, whose
  /// completions may come from the QPs of any lcore.
  void drive();
  /// PollThread::begin_wait and end_wait on every lcore.
  void begin_wait();
  void end_wait();
  /// Runs `fn` holding the engine of every lcore (taken in lcore order,
  /// the one order anything takes two in): for what no engine may be
  /// running through meanwhile (a region's deregistration, a CQ's resize).
  void hold_all(const std::function<void()>& fn) { hold_from(0, fn); }

  /// DCQCN for a new QP, or null when congestion control is off: its
  /// gate and observer go into the QP's QpInit.
  std::unique_ptr<cc::QpCongestion> make_congestion(const transport::Qp* const* qp,
                                                    std::uint32_t qpn);
  MrTable& mrs() { return mrs_; }
  /// Device memory (ibv_alloc_dm), shared by every context of the device.
  DmPool& dm() { return dm_; }
  /// XRC domains and XRC SRQs (verbs/xrcd.h), device-wide: a domain
  /// opened on a file is shared by every context that opens the file.
  XrcDomains& xrc_domains() { return *xrc_; }
  /// The device's port (its daemon's calls, for a shared one).
  port::Port& port() { return *port_; }

  /// A new QP number, unpredictable and unused on this device (on the
  /// host, for a device shared through its daemon); 0 when none can be
  /// had (the daemon is gone).
  /// `on_lcore0`: one lcore 0 owns (a UD QP's: engine/handoff.h).
  std::uint32_t alloc_qpn(bool on_lcore0 = false);
  void free_qpn(std::uint32_t qpn);
  /// PD ids and device memory handles, device-wide: every context of the
  /// device shares its memory region table, which checks PD ids.
  std::uint32_t alloc_pd_id() { return next_pd_.fetch_add(1, std::memory_order_relaxed); }
  std::uint32_t alloc_dm_handle() { return next_dm_.fetch_add(1, std::memory_order_relaxed); }

  /// The device's PDs, regions and device memory by handle (PD id, lkey,
  /// DM handle), for another context of the device to import
  /// (ibv_import_pd/mr/dm). The objects enter and leave themselves.
  void remember(Pd& pd);
  void remember(Mr& mr);
  void remember(Dm& dm);
  void forget(Pd& pd);
  void forget(Mr& mr);
  void forget(Dm& dm);
  /// Takes a PD or device memory out of the registry if nothing uses it
  /// (EBUSY otherwise), atomically with the imports that look it up, so
  /// that none can take a use of an object on its way out.
  int retire(Pd& pd);
  int retire(Dm& dm);
  /// Deregisters a region with `dereg` and takes it out of the registry
  /// if that succeeds, holding the registry meanwhile.
  int retire(Mr& mr, const std::function<int()>& dereg);
  /// Calls fn on the object behind `handle` (or with null), holding the
  /// registry so the object cannot go meanwhile.
  int with_pd(std::uint32_t handle, const std::function<int(Pd*)>& fn);
  int with_mr(std::uint32_t handle, const std::function<int(Mr*)>& fn);
  int with_dm(std::uint32_t handle, const std::function<int(Dm*)>& fn);

  /// The route (Ethernet/IP/UDP template) an address vector describes,
  /// resolving the peer's MAC with ARP; EINVAL for an address without a
  /// GRH, another port, a bad GID index or a source and destination of
  /// different families; EHOSTUNREACH when the peer does not answer
  /// within `timeout` (with 0, when its MAC is not known already: then
  /// this neither waits nor takes the engine).
  int resolve(const AddressVector& av, std::uint32_t src_qpn, std::uint32_t dst_qpn,
              wire::RoceRoute* out,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

  /// Attaches `qp` to the multicast group `group` in the engine, within
  /// the device's limits on groups and attachments (ENOMEM past them, as
  /// rxe). The QP's own rules are QueuePair::attach_mcast's.
  int attach_mcast(const wire::IpAddr& group, transport::Qp& qp);
  /// EINVAL when the QP was not attached to the group.
  int detach_mcast(const wire::IpAddr& group, std::uint32_t qpn);

  /// QP 1 and the connection manager (verbs/gsi.h), made on first use.
  Gsi& gsi();

  /// What a link listener hears (IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR,
  /// IBV_EVENT_GID_CHANGE, IBV_EVENT_DEVICE_FATAL).
  enum class PortEvent : std::uint8_t { kActive, kDown, kGidChange, kFatal };
  /// Calls `fn(event)` from the poll thread whenever the port's link goes
  /// up or down, when the GID table changes (a netdev device's interface
  /// gained or lost an address), and once when the port is lost for good
  /// (the daemon of a shared port exited: every QP is then in error).
  /// Returns a handle for remove_link_listener.
  int add_link_listener(std::function<void(PortEvent)> fn);
  /// Whether the device is lost (PortEvent::kFatal was raised).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  void remove_link_listener(int handle);
  /// Calls `fn()` from the poll thread's housekeeping, about ten times a
  /// second, from now on (the sysfs tree refreshes its counters so).
  void set_housekeeping_hook(std::function<void()> fn);

  /// Calls fn(scope, name, value) for every counter of the device: the
  /// engine's ("engine", "drop", "pfc"), the transport's summed over every
  /// QP the device has had and DCQCN's ("port"), and each live QP's
  /// ("qp:<qpn>"), and once it is in use the connection manager's ("cm").
  /// uroce-stat, the C++ API and UROCE_STATS_FILE read through it.
  using CounterFn =
      std::function<void(std::string_view scope, std::string_view name, std::uint64_t value)>;
  void for_each_counter(const CounterFn& fn);
  /// The device's counters as stats lines ("<scope> <counter> <value>").
  void write_stats(std::string& out);

  /// Adds a QP's transport counters to the device's totals (scope
  /// "port"), as the QP goes away.
  void retire_qp_counters(const transport::Counters& c);

 private:
  Device() = default;
  DeviceConfig cfg_;
  DcqcnSettings dcqcn_;
  /// DCQCN's notification point of each lcore, its engine thread only.
  std::vector<std::unique_ptr<cc::NotificationPoint>> np_;
  /// DCQCN's counters of each lcore, its QPs' to write (one writer each).
  std::vector<std::unique_ptr<cc::Counters>> cc_counters_;
  DeviceAttr attr_;
  mutable std::mutex gid_mu_;
  GidTable gid_table_{wire::IpAddr{}, {}, kGidTableLen};
  std::vector<IpPrefix> addresses_;
  std::unique_ptr<config::AddressWatch> address_watch_;  ///< netdev devices; poll thread
  std::unique_ptr<port::Port> port_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::PollThread> poller_;
  // A device on several lcores: the frames between their engines, and
  // lcores 1 and up, each with its queue of the port, its engine and its
  // poll thread (lcore 0's are port_, engine_ and poller_).
  struct MoreLcore {
    std::unique_ptr<port::Port> port;
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<engine::PollThread> poller;
  };
  std::unique_ptr<engine::Handoff> handoff_;
  std::vector<MoreLcore> more_;
  std::uint16_t owner(std::uint32_t qpn) const { return handoff_ ? handoff_->owner(qpn) : 0; }
  port::Port& port_at(std::uint16_t i) { return i == 0 ? *port_ : *more_[i - 1].port; }
  engine::Engine& engine_at(std::uint16_t i) { return i == 0 ? *engine_ : *more_[i - 1].engine; }
  engine::PollThread& poller_at(std::uint16_t i) {
    return i == 0 ? *poller_ : *more_[i - 1].poller;
  }
  void hold_from(std::uint16_t i, const std::function<void()>& fn);
  MrTable mrs_{[this] { hold_all([] {}); }};
  DmPool dm_{transport::kMaxDmSize};
  std::unique_ptr<XrcDomains> xrc_ = std::make_unique<XrcDomains>(*this);
  std::mutex qpn_mu_;
  std::vector<std::uint32_t> qpns_;
  std::atomic<std::uint32_t> next_pd_{1};
  std::atomic<std::uint32_t> next_dm_{1};
  std::mutex handles_mu_;
  std::unordered_map<std::uint32_t, Pd*> pds_;
  std::unordered_map<std::uint32_t, Mr*> mrs_by_handle_;
  std::unordered_map<std::uint32_t, Dm*> dms_;
  int stats_handle_ = 0;
  std::mutex retired_mu_;
  std::array<std::uint64_t, transport::Counters::kSize> retired_{};
  void watch_link();
  void follow_addresses();
  void housekeep();
  void write_stats_file();
  bool stats_written_ = false;
  std::mutex mcast_mu_;
  std::map<std::array<std::uint8_t, 16>, std::uint32_t> mcast_members_;  ///< group -> QPs
  std::uint32_t mcast_attached_ = 0;  ///< attachments over every group
  std::mutex gsi_mu_;
  std::unique_ptr<Gsi> gsi_owner_;
  std::atomic<Gsi*> gsi_{nullptr};
  std::mutex link_mu_;
  std::vector<std::pair<int, std::function<void(PortEvent)>>> link_listeners_;
  std::function<void()> housekeeping_hook_;  ///< under link_mu_
  int next_listener_ = 1;
  bool link_was_up_ = false;
  std::atomic<bool> failed_{false};
};

}  // namespace uroce::verbs
