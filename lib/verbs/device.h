/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A uroce device: one DPDK port with its engine and poll thread, its GID
// table, memory regions and queue pairs. What ibv_open_device opens.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cc/qp_congestion.h"
#include "engine/engine.h"
#include "engine/poll_thread.h"
#include "port/port.h"
#include "transport/limits.h"
#include "transport/qp.h"
#include "uroce/config.h"
#include "verbs/device_memory.h"
#include "verbs/mr_table.h"

namespace uroce::verbs {

/// Device attributes, from transport/limits.h (ibv_device_attr's subset).
struct DeviceAttr {
  std::uint64_t node_guid = 0;  ///< EUI-64 of the port's MAC
  /// uroce has no IEEE OUI and claims no vendor's: 0xFFFFFF, as rxe
  /// reports, since 0 reads as "no device" to some tools and tests.
  std::uint32_t vendor_id = 0xFFFFFF;
  std::uint32_t vendor_part_id = 0;
  std::uint64_t max_mr_size = 0;
  std::uint32_t max_qp = 0;
  std::uint32_t max_qp_wr = 0;
  std::uint32_t max_sge = 0;
  std::uint32_t max_cqe = 0;
  std::uint32_t max_mr = 0;
  std::uint32_t max_qp_rd_atom = 0;
  std::uint32_t max_qp_init_rd_atom = 0;
  std::uint32_t max_inline_data = 0;
  std::uint64_t max_dm_size = 0;  ///< device memory, all allocations together
};

enum class PortState : std::uint8_t { kDown = 1, kActive = 4 };  // IBV_PORT_*

/// Entries in the port's GID table: the link-local GID, one per address,
/// the rest unused (zero from ibv_query_gid, ENODATA from
/// ibv_query_gid_ex), as a NIC's table has room to spare.
inline constexpr std::uint32_t kGidTableLen = 16;

struct PortAttr {
  PortState state = PortState::kDown;
  wire::Mtu max_mtu = wire::Mtu::k4096;
  wire::Mtu active_mtu = wire::Mtu::k1024;
  std::uint32_t gid_tbl_len = 0;
  std::uint32_t speed_mbps = 0;
};

/// Where an RC/UC QP's packets go (ibv_ah_attr's RoCE part).
struct AddressVector {
  std::uint8_t sgid_index = 0;
  std::array<std::uint8_t, 16> dgid{};
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
};

class Device {
 public:
  /// Opens the device `dc` describes: EAL (once per process), its port,
  /// the engine and its poll thread. Null with *error on failure.
  static std::unique_ptr<Device> open(const DeviceConfig& dc, const Config& c, std::string* error);
  ~Device();

  const std::string& name() const { return cfg_.name; }
  const DeviceAttr& attr() const { return attr_; }
  PortAttr port_attr() const;
  /// GID table: index 0 is the IPv6 link-local address made from the MAC,
  /// then one RoCEv2 GID per configured address (IPv4-mapped for IPv4).
  const std::vector<wire::IpAddr>& gids() const { return gids_; }

  engine::Engine& engine() { return *engine_; }

  /// DCQCN for a new QP, or null when congestion control is off: its
  /// gate and observer go into the QP's QpInit.
  std::unique_ptr<cc::QpCongestion> make_congestion(const transport::Qp* const* qp);
  const cc::Counters& cc_counters() const { return cc_counters_; }
  engine::PollThread& progress() { return *poller_; }
  MrTable& mrs() { return mrs_; }
  /// Device memory (ibv_alloc_dm), shared by every context of the device.
  DmPool& dm() { return dm_; }

  /// A new QP number, unpredictable and unused on this device.
  std::uint32_t alloc_qpn();
  void free_qpn(std::uint32_t qpn);

  /// The route (Ethernet/IP/UDP template) an address vector describes,
  /// resolving the peer's MAC with ARP; EINVAL for a bad GID index,
  /// EHOSTUNREACH when the peer does not answer.
  int resolve(const AddressVector& av, std::uint32_t src_qpn, std::uint32_t dst_qpn,
              wire::RoceRoute* out);

  /// Calls `fn(up)` from the poll thread whenever the port's link goes up
  /// or down (IBV_EVENT_PORT_ACTIVE / IBV_EVENT_PORT_ERR). Returns a handle
  /// for remove_link_listener.
  int add_link_listener(std::function<void(bool up)> fn);
  void remove_link_listener(int handle);

  /// Calls fn(scope, name, value) for every counter of the device: the
  /// engine's ("engine", "drop", "pfc"), the transport's summed over every
  /// QP the device has had and DCQCN's ("port"), and each live QP's
  /// ("qp:<qpn>"). uroce-stat, the C++ API and UROCE_STATS_FILE read
  /// through it.
  using CounterFn =
      std::function<void(std::string_view scope, std::string_view name, std::uint64_t value)>;
  void for_each_counter(const CounterFn& fn);
  /// The device's counters as stats lines ("<scope> <counter> <value>").
  void write_stats(std::string& out);

  /// Adds a QP's transport counters to the device's totals (scope
  /// "port"), as the QP goes away.
  void retire_qp_counters(const transport::Counters& c);

  /// modify_qp: resolves the address vector (kAv in mask), then moves the
  /// QP while holding the engine.
  int modify_qp(transport::Qp& qp, transport::QpAttr attr, const AddressVector* av, unsigned mask);

 private:
  Device() = default;
  DeviceConfig cfg_;
  DcqcnSettings dcqcn_;
  std::optional<cc::NotificationPoint> np_;  ///< engine thread only
  cc::Counters cc_counters_;
  DeviceAttr attr_;
  std::vector<wire::IpAddr> gids_;
  std::unique_ptr<port::Port> port_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::PollThread> poller_;
  MrTable mrs_{[this] { engine_->locked([] {}); }};
  DmPool dm_{transport::kMaxDmSize};
  std::mutex qpn_mu_;
  std::vector<std::uint32_t> qpns_;
  int stats_handle_ = 0;
  std::mutex retired_mu_;
  std::array<std::uint64_t, transport::Counters::kSize> retired_{};
  void watch_link();
  std::mutex link_mu_;
  std::vector<std::pair<int, std::function<void(bool)>>> link_listeners_;
  int next_listener_ = 1;
  bool link_was_up_ = false;
};

}  // namespace uroce::verbs
