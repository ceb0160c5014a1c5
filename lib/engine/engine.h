/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The poll-mode loop of one device: receive a burst and classify it (ARP,
// ICMP echo, MAC control, RoCEv2 to its QP, the rest counted and dropped),
// run the QPs' timers, then let the QPs with work transmit, round robin.
//
// One thread at a time runs the loop: the device's poll thread, or a
// program thread that finds the engine free (try_poll). attach, detach
// and resolve may be called from any thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/counters.h"
#include "engine/neighbors.h"
#include "engine/params.h"
#include "engine/timer_wheel.h"
#include "pfc/pause_generator.h"
#include "pfc/pause_state.h"
#include "port/port.h"
#include "transport/qp.h"
#include "transport/tx.h"

namespace uroce::engine {

using transport::Nanos;

/// Priority-based Flow Control of the port (lib/pfc).
struct PfcConfig {
  bool enabled = false;
  pfc::XoffConfig xoff;  ///< lossless priorities, thresholds, quanta
  pfc::WatchdogConfig watchdog;
};

/// The receive buffer between the port and the transport. Frames wait in
/// it when the transport is slower than the link; PFC pauses the partner
/// as it fills. It is used when PFC runs in uroce or the receiver is made
/// slow on purpose (rx_rate_mbps, a test knob); otherwise frames go from
/// the port to the transport directly. A full buffer leaves frames in the
/// port's ring; the slow receiver's drops them.
struct RxBufferConfig {
  std::uint64_t bytes = 1u << 20;  ///< past this the buffer drops
  std::uint32_t rate_mbps = 0;     ///< frames leave at most this fast; 0: no limit
};

struct EngineConfig {
  std::vector<wire::IpAddr> addresses;  ///< this device's IP addresses
  PfcConfig pfc;
  RxBufferConfig rx_buffer;
  /// The priority of UD QPs, whose datagrams carry each its own route.
  std::uint8_t ud_priority = 3;
  /// The device's VLAN, 0 for none: ARP, neighbour discovery and ping
  /// replies go out tagged (PCP 0), frames of other VLANs are not ours.
  std::uint16_t vlan_id = 0;
  std::uint16_t rx_burst = kDefaultRxBurst;
  std::uint32_t tx_budget_per_qp = 16;  ///< packets one QP may send per turn
};

/// The engine's monotonic clock in nanoseconds.
inline Nanos now_ns() {
  return static_cast<Nanos>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count());
}

class Engine {
 public:
  Engine(port::Port& port, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Adds a QP to the dispatch table; packets for its QPN reach it from
  /// the next iteration on.
  void attach(transport::Qp& qp);
  /// Removes a QP; once this returns the engine no longer touches it.
  void detach(std::uint32_t qpn);

  /// Runs `fn` while holding the engine, so it may call what belongs to the
  /// engine thread (Qp::modify, timers, ...) from any thread.
  template <typename F>
  decltype(auto) locked(F&& fn) {
    std::lock_guard lock(mu_);
    return fn();
  }

  /// Runs one iteration (waiting for the engine if another thread has it).
  /// Returns the number of frames received and sent.
  std::uint32_t poll(Nanos now);
  /// Runs one iteration if no other thread is; false if one is.
  bool try_poll(Nanos now, std::uint32_t* work = nullptr);

  /// The MAC of `ip`, asking with ARP as needed; the engine must be polled
  /// meanwhile, by a poll thread or by this call when the engine is free.
  std::optional<wire::MacAddr> resolve(const wire::IpAddr& ip, std::chrono::milliseconds timeout);

  /// A route (Ethernet/IP/UDP template) from `src` to `dst` with the
  /// destination MAC resolved; nullopt when it cannot be.
  std::optional<wire::RoceRoute> route_to(const wire::IpAddr& src, const wire::IpAddr& dst,
                                          std::chrono::milliseconds timeout);

  /// Calls `fn` for every attached QP, holding the engine (for stats).
  template <typename F>
  void for_each_qp(F&& fn) {
    std::lock_guard lock(mu_);
    for (const transport::Qp* qp : order_) fn(*qp);
  }

  /// Sends a CNP along `route` to the peer's QP `dest_qp` (DCQCN's
  /// notification point). Engine thread only: called from a QP's receive.
  /// While the CNP's priority is paused by PFC it waits, the latest one
  /// per peer QP, and leaves when the pause ends.
  void send_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp);

  bool is_local(const wire::IpAddr& ip) const;
  const EngineCounters& counters() const { return counters_; }
  const pfc::Counters& pfc_counters() const { return pfc_counters_; }
  /// True when the NIC does PFC; false when uroce does, or nobody does.
  bool hardware_pfc() const { return hardware_pfc_; }
  wire::MacAddr mac() const { return mac_; }
  port::Port& port() { return port_; }

 private:
  // Builds frames for the QPs into port buffers, in batches.
  class Sink : public transport::TxSink {
   public:
    explicit Sink(Engine& e) : e_(e) {}
    bool transmit(const transport::TxPacket& pkt) override;
    bool full() const { return n_ == port::kTxBatch; }
    void flush();

   private:
    Engine& e_;
    port::TxFrame batch_[port::kTxBatch];
    std::uint16_t n_ = 0;
  };

  void run_once(Nanos now, std::uint32_t* work);
  void receive(wire::ConstBytes frame, Nanos now);
  void on_arp(wire::ConstBytes frame);
  void on_icmp(wire::ConstBytes frame);
  void on_ndp(wire::ConstBytes frame);
  void on_mac_control(wire::ConstBytes frame, Nanos now);
  // The receive buffer: fill it from a burst, let frames out of it.
  void buffer_rx(port::RxFrame* frames, std::uint16_t n, Nanos now);
  std::uint32_t drain_rx_buffer(Nanos now);
  /// The slow receiver (rx_rate_mbps) drops at its buffer's end; otherwise
  /// the engine stops taking frames from the port while the buffer is full.
  bool drop_when_full() const { return cfg_.rx_buffer.rate_mbps != 0; }
  // Software PFC: our XOFF/XON from the buffer's backlog, and the pauses
  // the partner asked for.
  void run_pfc(Nanos now);
  /// Sends the pending PFC frame ahead of anything waiting (the MAC's
  /// own); one the port cannot take stays pending, merged with later ones.
  void send_pfc();
  /// Receives the frames the device sent to itself.
  std::uint32_t run_loopback(Nanos now);
  /// Whether a frame is addressed to this engine itself.
  bool to_self(const port::TxFrame& f) const;
  void loop_back(port::TxFrame& f);
  void transmit_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp);
  /// Sends the held CNPs whose priority is no longer paused.
  void release_cnps();
  std::uint8_t priority_of(const transport::Qp& qp) const;
  void send_raw(wire::ConstBytes frame);
  /// ARP for an IPv4 target, a Neighbor Solicitation for an IPv6 one.
  void send_arp_request(const wire::IpAddr& target);
  void run_timers(Nanos now);
  void rearm(transport::Qp& qp);
  std::uint32_t run_tx(Nanos now);
  void send_to_port(port::TxFrame* frames, std::uint16_t n);
  bool flush_backlog();

  port::Port& port_;
  const EngineConfig cfg_;
  const wire::MacAddr mac_;
  std::mutex mu_;  ///< held by whoever runs the loop, and to change the QP table
  std::unordered_map<std::uint32_t, transport::Qp*> qps_;
  std::vector<transport::Qp*> order_;                            ///< round-robin order
  TimerWheel<std::uint32_t> timers_{kTimerTickNs, kTimerSlots};  ///< every QP's next deadline
  std::unordered_map<std::uint32_t, Nanos> armed_;               ///< QPN -> deadline in the wheel
  std::size_t rr_ = 0;
  Sink sink_{*this};
  Neighbors neighbors_;
  EngineCounters counters_;
  // Frames the port could not take yet (its ring was full): sent first
  // next time, and while any wait the QPs produce nothing new.
  std::vector<port::TxFrame> backlog_;
  std::uint16_t ip_id_ = 0;
  const bool ipv4_checksum_offload_;

  pfc::Counters pfc_counters_;
  bool hardware_pfc_ = false;
  std::optional<pfc::PauseState> pause_;        ///< software PFC: what the partner paused
  std::optional<pfc::PauseGenerator> xoff_;     ///< software PFC: our pauses
  std::uint8_t paused_ = 0;                     ///< priorities paused this iteration
  std::optional<pfc::PfcRequest> pfc_pending_;  ///< our PFC frame, not sent yet
  struct HeldCnp {
    wire::RoceRoute route;
    std::uint32_t dest_qp;
  };
  std::deque<std::vector<std::uint8_t>> loopback_;       ///< frames to ourselves, to receive
  std::vector<std::vector<std::uint8_t>> spare_frames_;  ///< their buffers, for reuse
  std::vector<HeldCnp> held_cnps_;                       ///< CNPs of paused priorities
  Nanos last_now_ = 0;  ///< the loop's clock never goes back (callers' clocks race)
  std::uint8_t storms_logged_ = 0;

  struct Buffered {
    port::RxFrame frame;
    std::uint32_t charge;  ///< bytes of buffer it holds (at least a share per frame)
    std::uint8_t priority;
  };
  bool buffered_rx_ = false;
  std::deque<Buffered> rx_buffer_;
  std::uint64_t rx_buffer_bytes_ = 0;
  std::array<std::uint64_t, wire::kNumPriorities> rx_backlog_{};  ///< bytes per priority
  double rx_tokens_ = 0;  ///< bytes the rate limit lets out now
  Nanos rx_tokens_at_ = 0;
};

}  // namespace uroce::engine
