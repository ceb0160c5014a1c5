/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// uroce-switch's pipeline: a learning bridge whose egress ports behave
// like a datacenter switch's. Each egress port has a line rate (a token
// bucket), eight priority queues served strict or DWRR, and a share of
// one buffer; its queues mark ECN like DCQCN's congestion point; PFC
// pauses a sender whose frames hold too much of the buffer and honours
// the pauses it receives; each port can be impaired in each direction.
//
//   rx -> [rx impairment] -> classify, learn, look up -> admission (buffer,
//   PFC headroom, ECN marking) -> queue[prio] -> scheduler (PFC pause,
//   shaper) -> [tx impairment] -> tx
//
// One thread calls poll(); counters are relaxed atomics any thread reads.

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "pfc/counters.h"
#include "pfc/pause_generator.h"
#include "pfc/pause_state.h"
#include "port/port.h"
#include "switch/frame.h"
#include "switch/impairment.h"
#include "switch/mac_table.h"
#include "switch/red.h"
#include "switch/shaper.h"

namespace uroce::sw {

inline constexpr unsigned kQueues = 8;

struct QueueConfig {
  std::uint64_t limit_bytes = 1u << 20;  ///< a lossy queue drops past this
  EcnConfig ecn;
  std::uint32_t weight = 1;  ///< DWRR share
};

enum class Scheduling : std::uint8_t { kStrict, kDwrr };

struct SwitchPfcConfig {
  bool enabled = false;
  std::uint8_t lossless = 1u << 3;       ///< bit n: priority n is lossless
  std::uint64_t xoff_bytes = 96 * 1024;  ///< per ingress port and priority
  std::uint64_t xon_bytes = 48 * 1024;
  std::uint64_t headroom_bytes = 512 * 1024;  ///< admitted past xoff, then dropped
  std::uint16_t quanta = 0xFFFF;
  pfc::WatchdogConfig watchdog;
};

struct PortConfig {
  std::uint64_t rate_bps = 0;  ///< 0: as fast as the port takes frames
  ImpairmentConfig rx, tx;
};

struct SwitchConfig {
  std::vector<PortConfig> ports;
  std::uint64_t buffer_bytes = 4u << 20;      ///< shared by every port
  std::uint64_t port_limit_bytes = 2u << 20;  ///< lossy bytes one egress port may hold
  std::array<QueueConfig, kQueues> queues;
  /// DWRR by default, as ETS: under strict priority a saturated RoCE
  /// queue starves priority 0, where ARP lives.
  Scheduling scheduling = Scheduling::kDwrr;
  PriorityMap priority_map;
  SwitchPfcConfig pfc;
  Nanos aging_ns = 300'000'000'000;
  std::uint64_t seed = 1;
};

enum class Drop : std::uint8_t {
  kBufferFull,  ///< the shared buffer is full (lossy)
  kPortLimit,   ///< the egress port's share is used up (lossy)
  kQueueLimit,  ///< the queue is at its limit (lossy; not-ECT past the limit)
  kHeadroom,    ///< a lossless priority overran its PFC headroom
  kPortDown,    ///< the ingress or egress link is down
  kFiltered,    ///< the destination lives on the ingress port
  kNoMbuf,      ///< the egress port had no buffer
  kMalformed,   ///< runt frames and malformed MAC control frames
  kCount,
};
/// The counter name of a drop reason (uroce-stat's switch scope).
constexpr std::string_view name(Drop c) {
  switch (c) {
    case Drop::kBufferFull:
      return "drop_buffer_full";
    case Drop::kPortLimit:
      return "drop_port_limit";
    case Drop::kQueueLimit:
      return "drop_queue_limit";
    case Drop::kHeadroom:
      return "drop_headroom";
    case Drop::kPortDown:
      return "drop_port_down";
    case Drop::kFiltered:
      return "drop_filtered";
    case Drop::kNoMbuf:
      return "drop_no_mbuf";
    case Drop::kMalformed:
      return "drop_malformed";
    case Drop::kCount:
      break;
  }
  return {};
}

struct QueueCounters {
  counters::Counter rx_bytes;  ///< bytes of this priority that came in on the port
  counters::Counter tx_packets, tx_bytes;
  counters::Counter depth, max_depth;  ///< bytes queued for the port now, and at most
  counters::Counter ecn_marked;
  counters::Counter dropped;
};

struct PortCounters {
  counters::Counter rx_packets, rx_bytes, tx_packets, tx_bytes;
  counters::CounterSet<Drop> drops;
  std::array<QueueCounters, kQueues> queues;
  counters::Counter ecn_marked;
  pfc::Counters pfc;  /// rx_prioN_pause, tx_prioN_pause, rx_prioN_pause_duration, ...
  port::ImpairmentCounters rx_impairment, tx_impairment;
  counters::Counter link_up;
};

class Switch {
 public:
  /// `ports` outlive the switch; cfg.ports is indexed like them (missing
  /// entries are unimpaired, unlimited ports).
  Switch(std::vector<port::Port*> ports, SwitchConfig cfg);
  ~Switch();
  Switch(const Switch&) = delete;
  Switch& operator=(const Switch&) = delete;

  /// One iteration over every port; returns the frames received and sent.
  std::uint32_t poll(Nanos now);

  /// Takes a port's link down (everything queued for it is dropped, its
  /// learned addresses forgotten, nothing passes) or up again.
  void set_link(std::uint16_t port, bool up);
  bool link(std::uint16_t port) const;

  std::size_t port_count() const { return ports_.size(); }
  const PortCounters& counters(std::uint16_t port) const;
  /// Bytes held in the shared buffer.
  std::uint64_t buffer_used() const { return used_; }
  /// Whether anything waits: in the buffer, a delay line, or for a port.
  bool busy() const;
  /// "<scope> <counter> <value>" lines: scope portN, or portN.qQ.
  void write_stats(std::string& out) const;

 private:
  struct PortState;

  void receive(std::uint16_t in, Nanos now);
  void on_mac_control(PortState& st, wire::ConstBytes frame, Nanos now);
  void forward(PacketPtr p, Nanos now);
  void enqueue(std::uint16_t e, PacketPtr p, const FrameInfo& info, Nanos now);
  std::uint32_t transmit(std::uint16_t e, Nanos now);
  int pick(PortState& st, std::uint8_t paused);
  void unaccount(PortState& st, const Packet& p);
  void send_frames(PortState& st, std::vector<PacketPtr>& ready);
  /// Hands frames to the port and counts those it took.
  std::uint16_t tx_burst(PortState& st, port::TxFrame* frames, std::uint16_t n);
  void send_pfc(PortState& st);
  bool flush_pending(PortState& st);
  void drop(PortState& st, Drop why, std::uint8_t prio);

  const SwitchConfig cfg_;
  std::vector<std::unique_ptr<PortState>> ports_;
  MacTable mac_;
  PacketPool pool_;
  std::mt19937_64 rng_;
  std::uint64_t used_ = 0;
  Nanos next_aging_ = 0;
  std::vector<PacketPtr> ready_;  ///< scratch
};

}  // namespace uroce::sw
