/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The poll-mode loop of one device: receive a burst and classify each
// frame once (ARP, neighbour discovery, ICMP echo, MAC control, RoCEv2 to
// the QP its BTH names, the rest counted and dropped), run the QPs'
// timers, then let the QPs with work transmit, round robin, skipping the
// priorities PFC has paused.
//
// The engine has two halves, apart so that a device daemon can later own
// the first for every process and each program the second:
//   - the host side, one per port: the port, the host stack (host_stack.h:
//     ARP, ND, ICMP, the neighbour table), the receive buffer with software
//     PFC and its held CNPs (rx_buffer.h), self-delivery to the device's
//     own addresses (self_delivery.h), and the backlog toward the port;
//   - the queue-pair side: the QP table and dispatch by destination QPN,
//     the timer wheel, the transmit round robin and the Sink that builds
//     the QPs' frames with lib/wire's frame builder.
//
// One thread at a time runs the loop and holds the engine: the device's
// poll thread, a program thread that finds the engine free (try_poll), or
// a control call inside locked(). What belongs to that thread says so and
// asserts in_engine_thread() (UROCE_DEBUG_ASSERT, engine/debug.h). attach,
// detach and resolve may be called from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/counters.h"
#include "engine/forwarder.h"
#include "engine/frame_path.h"
#include "engine/handoff.h"
#include "engine/host_stack.h"
#include "engine/mcast_groups.h"
#include "engine/params.h"
#include "engine/rx_buffer.h"
#include "engine/self_delivery.h"
#include "engine/timer_wheel.h"
#include "port/port.h"
#include "transport/qp.h"
#include "transport/tx.h"

namespace uroce::engine {

struct EngineConfig {
  std::vector<wire::IpAddr> addresses;  ///< this device's IP addresses
  PfcConfig pfc;
  RxBufferConfig rx_buffer;
  /// The priority of UD QPs, whose datagrams carry each its own route.
  std::uint8_t ud_priority = 3;
  /// The device's VLAN, 0 for none: ARP, neighbour discovery and ping
  /// replies go out tagged (PCP 0), frames of other VLANs are not ours.
  std::uint16_t vlan_id = 0;
  /// Netdev mode: the kernel owns the interface's addresses and answers
  /// ARP, neighbour solicitations and pings for them; the engine only
  /// learns its peers' MACs and asks for them.
  bool kernel_stack = false;
  /// Netdev mode: the kernel's neighbour table, where peers' MACs are
  /// found (the engine then neither asks for them nor learns them).
  std::shared_ptr<NeighborSource> kernel_neighbors;
  std::uint16_t rx_burst = kDefaultRxBurst;
  std::uint32_t tx_budget_per_qp = 16;  ///< packets one QP may send per turn
  /// The device daemon's engine: what its QPs do not take goes to the
  /// programs through this (engine/forwarder.h). Null in a program.
  Forwarder* forwarder = nullptr;
  /// A program's engine on a shared device: called, holding the engine,
  /// for a request to a QPN none of its QPs has, which the daemon handed
  /// it; may make a QP for it (the program's Qp of another program's XRC
  /// target QP, verbs/xrcd.h), which the engine then attaches and hands
  /// the request. Empty: none.
  std::function<transport::Qp*(const wire::RocePacket&)> adopt_qp;
  /// A device on several lcores (handoff.h): the frames between its
  /// engines, and which of them this one is. Null: one lcore.
  Handoff* handoff = nullptr;
  std::uint16_t lcore = 0;
  /// Shown each frame the device sends to itself (self_delivery.h), which
  /// never crosses the port: the device daemon's capture. Empty: none.
  std::function<void(wire::ConstBytes)> loopback_tap;
};

/// The engine's monotonic clock in nanoseconds.
inline Nanos now_ns() {
  return static_cast<Nanos>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count());
}

class Engine final : private FramePath, private transport::Doorbell {
 public:
  Engine(port::Port& port, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Adds a QP to the dispatch table; packets for its QPN reach it from
  /// the next iteration on.
  void attach(transport::Qp& qp);
  /// Removes a QP (from its multicast groups too); once this returns the
  /// engine no longer touches it.
  void detach(std::uint32_t qpn);
  /// The same for `qp`, which another QP may have displaced under its QPN
  /// (that one stays).
  void detach(const transport::Qp& qp);
  /// attach, for a caller that holds the engine (inside locked()).
  void attach_held(transport::Qp& qp);
  /// Attaches an attached QP to a multicast group (a multicast GID,
  /// wire::is_multicast): datagrams to the group reach it from the next
  /// iteration on, and the device's own sends to the group come back to
  /// it, as rxe's do.
  void attach_mcast(const wire::IpAddr& group, transport::Qp& qp);
  /// False when the QP was not attached to the group.
  bool detach_mcast(const wire::IpAddr& group, std::uint32_t qpn);

  /// The device's addresses (EngineConfig::addresses) are now these: a
  /// netdev device follows its interface's. Any thread but the engine's.
  void set_addresses(std::vector<wire::IpAddr> addresses);

  /// Runs `fn` while holding the engine, so it may call what belongs to the
  /// engine thread (Qp::modify, timers, ...) from any thread.
  template <typename F>
  decltype(auto) locked(F&& fn) {
    const Holding hold(*this);
    return fn();
  }
  /// Whether the calling thread holds the engine: runs its loop, or is
  /// inside locked().
  bool in_engine_thread() const {
    return holder_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  /// Runs one iteration (waiting for the engine if another thread has it).
  /// Returns the number of frames received and sent.
  std::uint32_t poll(Nanos now);
  /// Runs one iteration if no other thread is; false if one is.
  bool try_poll(Nanos now, std::uint32_t* work = nullptr);
  /// try_poll for a program's thread that wants its completions (poll_cq):
  /// when the iteration received something, it returns before the
  /// transmit half, which the thread's next call (or post) runs. What came
  /// in reaches the program before the ACKs and responses it caused leave:
  /// each is a system call on a packet socket (a veth's whole receive path
  /// at the peer, run on this thread), and a ping-pong's reply waited for
  /// them. Never two turns in a row, so a stream of arrivals cannot starve
  /// the transmit half.
  bool try_poll_completions_first(Nanos now, std::uint32_t* work);
  /// Sends what a completions-first turn left, waiting for the engine, and
  /// leaves nothing from then on: the process is ending, and a thread that
  /// polls after this has no poll thread to send for it.
  void finish_turn() {
    const Holding hold(*this);
    finishing_ = true;
  }
  /// Runs the transmit half of an iteration if no other thread is running
  /// the engine (false if one is): what a doorbell needs. The QPs just
  /// rung send now; receiving, timers and the rest wait for the next whole
  /// iteration, the program's poll of its CQ or the poll thread's.
  bool try_send(Nanos now);

  /// The MAC of `ip`, asking with ARP as needed; the engine must be polled
  /// meanwhile, by a poll thread or by this call when the engine is free.
  std::optional<wire::MacAddr> resolve(const wire::IpAddr& ip, std::chrono::milliseconds timeout);

  /// The MAC of `ip` if already known, without asking: the device's own
  /// for its own addresses, else what ARP and ND learnt. Any thread.
  std::optional<wire::MacAddr> neighbor(const wire::IpAddr& ip) const {
    if (host_.is_local_any_thread(ip)) return host_.mac();
    return host_.lookup(ip);
  }

  /// A route (Ethernet/IP/UDP template) from `src` to `dst` with the
  /// destination MAC resolved; nullopt when it cannot be.
  std::optional<wire::RoceRoute> route_to(const wire::IpAddr& src, const wire::IpAddr& dst,
                                          std::chrono::milliseconds timeout);

  /// Moves every attached QP to the error state, flushing its work
  /// requests, as a NIC does after a fatal error.
  void fail_all(Nanos now);

  /// Calls `fn` for every attached QP, holding the engine (for stats).
  template <typename F>
  void for_each_qp(F&& fn) {
    // Reading sends nothing: the stats thread would otherwise transmit
    // what a completions-first turn left, and take a port's lcore for it.
    const Holding hold(*this, Holding::kSendNothing);
    for (const transport::Qp* qp : order_) fn(*qp);
  }

  /// Sends frames built in the port's buffers that are not the engine's
  /// QPs' (a Forwarder's, from the programs of the host): they take the
  /// transmit path of the engine's own, self-delivery included. Engine
  /// thread only.
  void send_frames(port::TxFrame* frames, std::uint16_t n);

  /// Sends a CNP along `route` to the peer's QP `dest_qp` (DCQCN's
  /// notification point). Engine thread only: called from a QP's receive.
  /// While the CNP's priority is paused by PFC it waits, the latest one
  /// per peer QP, and leaves when the pause ends.
  void send_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp);

  bool is_local(const wire::IpAddr& ip) const { return host_.is_local(ip); }
  const EngineCounters& counters() const { return counters_; }
  const pfc::Counters& pfc_counters() const { return rx_.pfc_counters(); }
  /// True when the NIC does PFC; false when uroce does, or nobody does.
  bool hardware_pfc() const { return rx_.hardware_pfc(); }
  wire::MacAddr mac() const { return host_.mac(); }
  port::Port& port() { return port_; }

 private:
  /// The engine taken (mu_) and the taker recorded, for in_engine_thread().
  class Holding {
   public:
    /// What a taker sends on taking the engine (see the constructor).
    enum Send { kSendDeferred, kSendNothing };
    /// Waits for the engine. A control call (locked(), detach, ...) then
    /// first sends what a completions-first turn left, so a program that
    /// destroys its QP or ends right after its last completion still
    /// acknowledges what it received.
    explicit Holding(Engine& e, Send send = kSendDeferred) : e_(e), lock_(e.mu_) {
      record();
      if (send == kSendDeferred) e_.send_deferred();
    }
    Holding(Engine& e, std::try_to_lock_t) : e_(e), lock_(e.mu_, std::try_to_lock) {
      if (lock_.owns_lock()) record();
    }
    ~Holding() {
      if (lock_.owns_lock()) e_.holder_.store(std::thread::id(), std::memory_order_relaxed);
    }
    bool owns() const { return lock_.owns_lock(); }

   private:
    void record() { e_.holder_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
    Engine& e_;
    std::unique_lock<std::mutex> lock_;
  };

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

  void run_once(Nanos now, std::uint32_t* work, bool completions_first = false);
  /// The transmit half a completions-first turn left, if it did.
  void send_deferred();
  /// A burst from the port straight to the transport (no receive buffer).
  std::uint32_t receive_burst(Nanos now);
  /// RX dispatch: one classification, then the host stack, PFC or a QP
  /// (or, on several lcores, the lcore that owns the frame's QP).
  void receive(wire::ConstBytes frame, Nanos now) override;
  void receive_classified(wire::ConstBytes frame, const wire::FrameClass& c, Nanos now);
  /// A burst on several lcores: each frame to its lcore, this one's
  /// received and released here.
  void receive_sharded(port::RxFrame* frames, std::uint16_t n, Nanos now);
  /// What the other lcores handed this one, and this one's port frames
  /// they are done with.
  [[gnu::noinline]] std::uint32_t receive_handed(Nanos now);
  /// Releases this queue's frames the other lcores gave back.
  void release_returned();
  /// A frame of IP, classified as `c`.
  using QpTable = std::unordered_map<std::uint32_t, transport::Qp*>;
  void detach_held(QpTable::iterator it);
  /// A RoCE packet for a QPN none of the QPs has: forwarded (the daemon's
  /// engine), or a QP adopted for it (EngineConfig::adopt_qp) and
  /// returned, or counted and dropped (null).
  [[gnu::noinline]] transport::Qp* receive_unknown(const wire::RocePacket& pkt,
                                                   wire::ConstBytes frame);
  void receive_roce(wire::ConstBytes frame, const wire::FrameClass& c, Nanos now);
  /// A datagram to the multicast QPN: a copy to each QP of its group.
  void receive_mcast(const wire::RocePacket& pkt, Nanos now);
  /// Whether a frame to one of the device's own addresses is looped back
  /// here: always on a port of our own; on a shared port only when it is
  /// for one of our QPs (the daemon delivers the others).
  bool loops_back(const port::TxFrame& f) const;
  /// Whether a frame we send goes to a multicast group; counts it.
  bool to_joined_group(const port::TxFrame& f);
  /// To the device itself, or to the port behind the backlog.
  void transmit(port::TxFrame* frames, std::uint16_t n) override;
  /// Sends what the port could not take before; true when nothing waits.
  bool flush_backlog();
  void transmit_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp);
  std::uint8_t priority_of(const transport::Qp& qp) const;
  void run_timers(Nanos now);
  void rearm(transport::Qp& qp);
  std::uint32_t run_tx(Nanos now);
  /// A QP rang (transport::Doorbell): its QPN waits for the engine's next
  /// turn. Any thread.
  void ring(transport::Qp& qp) override;
  /// Queues the QPs that rang since the last turn.
  void take_doorbells();
  /// Queues `qp` for a transmit turn unless it waits already: after
  /// anything that may have given it work (a packet, a timer, a ring).
  void wake(transport::Qp& qp);
  /// The net under the doorbells: every kTxRescanNs, a QP with work that
  /// no event queued (nor a doorbell about to), found so twice in a row,
  /// is queued and counted (tx_sched_rescued, 0 unless an event was
  /// missed).
  void rescan(Nanos now);

  // The host side.
  port::Port& port_;
  const EngineConfig cfg_;
  EngineCounters counters_;
  HostStack host_;
  RxBuffer rx_;
  SelfDelivery self_;
  // Frames the port could not take yet (its ring was full): sent first
  // next time, and while any wait the QPs produce nothing new.
  std::vector<port::TxFrame> backlog_;
  std::uint16_t ip_id_ = 0;  ///< IPv4 identification of the frames we send
  const bool ipv4_checksum_offload_;
  const bool shared_;       ///< the port is a device daemon's (port.shared())
  Handoff* const handoff_;  ///< the device's lcores, null on one
  const std::uint16_t lcore_;
  std::vector<HandedFrame> handed_;      ///< taken from the handoff, engine thread
  std::vector<port::RxFrame> returned_;  ///< this queue's frames, given back

  // The queue-pair side.
  QpTable qps_;
  std::vector<transport::Qp*> order_;  ///< every attached QP (stats, fail_all, rescan)
  // The transmit round robin: the QPs that may have work, by QPN (one
  // detached while queued is skipped), each once (Qp::tx_queued). O(1) in
  // the number of QPs per event and per turn, as rxe's task scheduling.
  std::deque<std::uint32_t> ready_;
  std::mutex doorbell_mu_;
  std::vector<std::uint32_t> doorbells_;  ///< QPNs rung, under doorbell_mu_
  /// doorbells_ is not empty: every turn looks, few find one rung.
  std::atomic<bool> doorbells_rung_{false};
  std::vector<std::uint32_t> rung_;  ///< doorbells_ taken, engine thread
  Nanos rescan_at_ = 0;
  McastGroups mcast_;
  TimerWheel<std::uint32_t> timers_{kTimerTickNs, kTimerSlots};  ///< every QP's next deadline
  Sink sink_{*this};

  std::mutex mu_;  ///< held by whoever runs the loop, and to change the QP table
  std::atomic<std::thread::id> holder_{};  ///< who holds mu_, for in_engine_thread()
  Nanos last_now_ = 0;        ///< the loop's clock never goes back (callers' clocks race)
  bool tx_deferred_ = false;  ///< the last turn left its transmit half (completions first)
  bool finishing_ = false;    ///< finish_turn() ran: every turn is whole
};

}  // namespace uroce::engine
