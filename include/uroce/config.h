/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

/// @file
/// uroce's configuration: one TOML file named by UROCE_CONFIG, every key
/// also settable from the environment. docs/configuration.md lists every
/// key with its default and meaning.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace uroce {

/// An IP address with its prefix length, as written in the file
/// ("10.0.1.1/24", "fd00::1/64").
struct IpPrefix {
  std::string address;  ///< the address alone
  unsigned prefix = 0;
};

/// One uroce device (uroce0, uroce1, ...).
struct DeviceConfig {
  std::string name;          ///< "uroce0"
  std::string port;          ///< DPDK device: vdev string or PCI address
  std::vector<IpPrefix> ip;  ///< the device's addresses
  /// Netdev mode: the kernel interface the device shares with the kernel
  /// (docs/netdev-mode.md). Its addresses are the device's (`ip` is
  /// filled from it when the configuration is read), the port defaults to
  /// net_af_packet on it, and the kernel keeps ARP, ND, ping and all but
  /// RoCE on it. Empty: a link of uroce's own.
  std::string netdev;
  std::uint32_t mtu = 0;   ///< link MTU; 0 keeps the port's
  bool hugepages = false;  ///< hugepage-backed memory (net_memif needs it)
  std::uint8_t dscp = 26;  ///< DSCP of RoCE traffic
  std::uint8_t pcp = 3;    ///< 802.1p priority of RoCE traffic (when tagged)
  /// Send RoCE frames with an 802.1Q priority tag (VID 0) carrying `pcp`;
  /// untagged frames carry their priority in the DSCP alone.
  bool priority_tag = false;
  /// The device's VLAN (1 to 4094), 0 for none. With a VLAN every frame
  /// uroce sends carries its tag (PCP `pcp` on RoCE), and frames of other
  /// VLANs or untagged ones are not the device's (PAUSE and PFC apart).
  std::uint16_t vlan_id = 0;
  /// Send RoCE packets ECN-capable (ECT(0)), so that switches mark them
  /// CE instead of dropping as their queues grow.
  bool ecn = false;
  /// Offer selective repeat on RC QPs (docs/transport.md): used with a
  /// peer that offers it too; any other peer gets go-back-N.
  bool selective_repeat = false;
  /// How long opening waits for the link to come up (a memif port is down
  /// until its peer connects); 0 does not wait.
  std::uint32_t link_wait_ms = 10000;
  /// The lcores (threads) the device's engine runs on, each on a queue of
  /// the port, the RC, UC and XRC QPs spread over them by QPN (the
  /// engine's "Several lcores" in docs/engine.md).
  std::uint16_t lcores = 1;
};

/// Seeded impairments at the port: a test feature.
struct FaultSettings {
  double rx_drop = 0, rx_duplicate = 0, rx_reorder = 0, rx_corrupt = 0;
  double tx_drop = 0, tx_duplicate = 0, tx_reorder = 0, tx_corrupt = 0;
  std::uint64_t seed = 1;
  /// A receiver made slow on purpose: received frames wait in a buffer of
  /// rx_buffer_kb and leave it for the transport at rx_rate_mbps at most
  /// (0: as fast as the engine goes). A full buffer drops.
  std::uint32_t rx_rate_mbps = 0;
  std::uint32_t rx_buffer_kb = 1024;
};

/// Priority-based Flow Control (802.1Qbb) of every device: in the NIC
/// where the port offers it, in uroce otherwise.
struct PfcSettings {
  bool enabled = false;
  std::uint8_t priorities = 1u << 3;  ///< lossless priorities, bit n = priority n
  std::uint32_t xoff_kb = 512;        ///< receive backlog that sends XOFF
  std::uint32_t xon_kb = 256;         ///< receive backlog that sends XON (xoff_kb / 2)
  std::uint16_t quanta = 0xFFFF;      ///< pause time an XOFF asks for
  std::uint32_t watchdog_ms = 200;    ///< storm detection time; 0: no watchdog
  std::uint32_t restoration_ms = 200;
};

/// DCQCN congestion control of every device (docs/congestion-control.md):
/// RoCE leaves ECN-capable, CE marks are answered with CNPs (notification
/// point) and CNPs cut the QP's rate (reaction point). The parameters
/// carry ConnectX firmware's names and defaults.
struct DcqcnSettings {
  /// On by default, as ConnectX enables its notification and reaction
  /// points on every priority: RoCE then leaves ECN-capable (ECT(0)) and a
  /// marking switch can slow it down.
  bool enabled = true;
  std::uint8_t rp_priorities = 1u << 3;  ///< reaction point on these priorities
  std::uint8_t np_priorities = 1u << 3;  ///< notification point on these
  // ---- reaction point (the sender) ----
  std::uint32_t rpg_time_reset_us = 300;  ///< rate-increase timer T
  std::uint32_t rpg_byte_reset = 32767;   ///< byte counter B, in bytes (0: timer only)
  std::uint32_t rpg_threshold = 1;        ///< F: increase events before AI/HAI
  std::uint32_t rpg_ai_rate_mbps = 5;     ///< additive increase R_AI
  std::uint32_t rpg_hai_rate_mbps = 50;   ///< hyper increase R_HAI
  /// The cut is Rc * (1 - alpha / 2^rpg_gd) with alpha in 1/1024 units:
  /// 11 with alpha 1023 halves the rate.
  std::uint32_t rpg_gd = 11;
  std::uint32_t rpg_min_dec_fac = 50;               ///< a cut keeps at least this % of the rate
  std::uint32_t rpg_min_rate_mbps = 1;              ///< the rate never goes below
  std::uint32_t rpg_max_rate_mbps = 0;              ///< 0: the link speed
  std::uint32_t rate_to_set_on_first_cnp_mbps = 0;  ///< 0: the usual cut
  bool clamp_tgt_rate = false;                      ///< every cut sets Rt = Rc
  bool clamp_tgt_rate_after_time_inc = true;  ///< ... or when the last increase was the timer's
  std::uint32_t dce_tcp_g = 1019;             ///< g = (1024 - dce_tcp_g) / 1024
  /// The alpha update period K, in microseconds (the firmware's unit is
  /// undocumented; 55 us is the paper's K).
  std::uint32_t dce_tcp_rtt_us = 55;
  std::uint32_t initial_alpha_value = 1023;         ///< alpha at the first CNP, 1/1024 units
  std::uint32_t rate_reduce_monitor_period_us = 4;  ///< at most one cut per period
  // ---- notification point (the receiver) ----
  std::uint32_t min_time_between_cnps_us = 4;  ///< per QP
  std::uint8_t cnp_dscp = 48;
  std::uint8_t cnp_802p_prio = 6;
};

/// What each process serves its counters on, besides its stats socket.
struct StatsSettings {
  /// "host:port" ("[::1]:9464" for IPv6) where GET /metrics answers in
  /// Prometheus' text format; empty: no such endpoint.
  std::string prometheus;
};

struct Config {
  std::vector<DeviceConfig> devices;
  std::vector<std::string> eal_args;  ///< extra EAL arguments
  unsigned eal_memory_mb = 512;
  std::string log_level = "warn";  ///< trace, debug, info, warn, error, off
  FaultSettings fault;
  PfcSettings pfc;
  DcqcnSettings dcqcn;
  StatsSettings stats;
  /// The device daemon's socket ([daemon] socket): uroced listens on it,
  /// and a program whose configuration names no device of its own attaches
  /// to the devices of the daemon there.
  std::string daemon_socket = "/run/uroce/uroced.sock";
  /// The device daemon's nice value ([daemon] nice): it is on every
  /// frame's path, so on a busy machine it should get the core when it has
  /// frames to move (it gives it up when it has none).
  int daemon_nice = -10;
};

/// The result of loading: a configuration, or an error that names the key.
struct ConfigResult {
  std::optional<Config> config;
  std::string error;
};

/// Parses TOML text, then applies environment overrides from `env` (pairs
/// of NAME=VALUE, e.g. from environ). `origin` names the text in errors.
ConfigResult parse_config(const std::string& text, const std::string& origin,
                          const std::vector<std::string>& env);

/// Loads the file UROCE_CONFIG names (or an empty configuration if it is
/// unset) and applies the process environment.
ConfigResult load_config();

}  // namespace uroce
