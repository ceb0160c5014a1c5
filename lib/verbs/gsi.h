/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The device's General Services Interface for connection management:
// QP 1 on the wire, and the connection manager (lib/cm's Cma) behind it.
// Made on first CM use (Device::gsi()). CM MADs are 256-byte UD SENDs to
// QP 1 with Q_Key 0x80010000 and P_Key 0xFFFF (IBA 13.5.3; rxe's GSI QP):
// QP 1 is an ordinary UD QP of the transport in the engine's QP table,
// receiving into a ring of buffers, and sending from source QP 1 to each
// peer's QP 1 through a route the device resolves (ARP, ND).
//
// Threads. The Cma is driven from three places, under one lock (the CM
// lock): the engine thread, as QP 1's receive completions land (the
// receive CQ's notifier, while the engine is held); the poll thread's
// housekeeping, for the CM's timers; and program threads, through run()
// and wait(). Lock order: the engine, then the CM lock, then the send
// lock. Nothing holding the CM lock or the send lock takes the engine:
// MADs the Cma sends are queued under the CM lock and posted to QP 1 once
// it is released, and a MAD to a peer whose MAC is not known yet waits
// for the resolver thread, which asks ARP or ND holding nothing. On a
// device the daemon shares, a port the Cma binds is asked of the daemon
// holding the CM lock: one round trip on the control socket, which the
// daemon answers from its own thread, needing nothing of this process.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "cm/cma.h"
#include "cm/random.h"
#include "counters/counter_set.h"
#include "engine/engine.h"
#include "transport/cq.h"
#include "transport/memory.h"
#include "transport/qp.h"
#include "wire/ib_headers.h"

namespace uroce::verbs {

class Device;

/// What QP 1 itself counts, and the rdma_cm channel over it
/// (drivers/rdmacm, through Gsi::count): scope "cm", beside the CM's own
/// counters.
enum class GsiCounter : std::uint8_t {
  kRxMads,                  ///< MADs received and handed to the CM
  kRxBadLength,             ///< receives that were not one 256-byte MAD
  kTxMads,                  ///< MADs posted to QP 1
  kTxNoRoute,               ///< MADs from an address that is not the device's
  kTxUnresolved,            ///< MADs to a peer that did not answer ARP or ND (the CM resends)
  kTxQueueFull,             ///< MADs QP 1's send queue had no room for
  kUcmaCloseReaderWaits,    ///< channel closes that waited for an event thread
  kUcmaCloseReaderExpired,  ///< ... whose thread was not back in GET_EVENT in time
  kCount,
};

constexpr std::string_view name(GsiCounter c) {
  switch (c) {
    case GsiCounter::kRxMads:
      return "gsi_rx_mads";
    case GsiCounter::kRxBadLength:
      return "gsi_rx_bad_length";
    case GsiCounter::kTxMads:
      return "gsi_tx_mads";
    case GsiCounter::kTxNoRoute:
      return "gsi_tx_no_route";
    case GsiCounter::kTxUnresolved:
      return "gsi_tx_unresolved";
    case GsiCounter::kTxQueueFull:
      return "gsi_tx_queue_full";
    case GsiCounter::kUcmaCloseReaderWaits:
      return "ucma_close_reader_waits";
    case GsiCounter::kUcmaCloseReaderExpired:
      return "ucma_close_reader_expired";
    case GsiCounter::kCount:
      break;
  }
  return {};
}

class Gsi final : private cm::MadSender, private cm::HostPorts, private transport::CqNotifier {
 public:
  /// Hears of every turn of the CM, holding the CM lock: events may have
  /// been queued or taken (the ucma emulation makes its descriptors
  /// readable from here). It must not call back into the Gsi.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void cm_changed(cm::Cma& cma) = 0;
  };

  /// QP 1, its buffers and the CM of `dev`, attached to its engine.
  explicit Gsi(Device& dev);
  /// Wakes the threads waiting in wait() (which then return false) and
  /// waits for every caller to leave; then QP 1 leaves the engine.
  ~Gsi();
  Gsi(const Gsi&) = delete;
  Gsi& operator=(const Gsi&) = delete;

  /// Runs fn(cma, now) holding the CM lock; then the observer hears of
  /// it, waiters wake, and the MADs it sent leave.
  template <typename F>
  decltype(auto) run(F&& fn) {
    const Turn turn(*this);
    return fn(cma_, engine::now_ns());
  }

  /// Runs fn(cma, now) holding the CM lock until it returns true,
  /// sleeping between tries until the CM changes (a MAD, a timer, a
  /// command). False, without another try, once the device is going away.
  template <typename F>
  bool wait(F&& fn) {
    Turn turn(*this);
    bool done = false;
    while (!stopping_ && !(done = fn(cma_, engine::now_ns()))) cv_.wait(turn.lock);
    return done;
  }

  /// wait() for at most `timeout`: false as well when it passes.
  template <typename F>
  bool wait_for(F&& fn, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    Turn turn(*this);
    bool done = false;
    while (!stopping_ && !(done = fn(cma_, engine::now_ns())))
      if (cv_.wait_until(turn.lock, until) == std::cv_status::timeout) break;
    return done;
  }

  /// Sets (or, with null, clears) the observer.
  void set_observer(Observer* o);

  /// Counts one event of the layers over QP 1 (the rdma_cm channel's).
  void count(GsiCounter c) { counters_.inc(c); }

  /// rdma_resolve_addr after Cma::resolve_addr: finds `dst`'s MAC with
  /// ARP or ND within `timeout` on the resolver thread, then gives the
  /// CM addr_resolved() (the source: `src` if given, else the device's
  /// address of the destination's family and subnet) or addr_error().
  void resolve_addr(std::uint32_t id, std::optional<wire::IpAddr> src, wire::IpAddr dst,
                    std::chrono::milliseconds timeout);

  /// The device's GID table changed: the CM takes the new one.
  void set_gids(const std::vector<wire::IpAddr>& gids) {
    run([&](cm::Cma& cma, cm::Nanos) { cma.set_gids(gids); });
  }

  /// The CM's timers; the poll thread's housekeeping calls it.
  void housekeep();
  /// Sends what QP 1 still has to say (the DREQs and REJs of a process
  /// that ends), for a moment at most.
  void drain();

  /// Calls fn(name, value) for the CM's counters ("cm_tx_msgs/req", ...,
  /// as the kernel's sysfs names them), QP 1's own, and the ports the CM
  /// listens on ("listeners", a gauge: what ss -l is to TCP).
  template <typename F>
  void for_each_counter(F&& fn) const {
    cma_.ib().counters().for_each([&](std::string_view group, std::string_view n, std::uint64_t v) {
      char full[64];
      const int len = std::snprintf(full, sizeof(full), "%.*s/%.*s", static_cast<int>(group.size()),
                                    group.data(), static_cast<int>(n.size()), n.data());
      fn(std::string_view(full, static_cast<std::size_t>(len)), v);
    });
    counters_.for_each(fn);
    fn(std::string_view("listeners"), listeners_.load(std::memory_order_relaxed));
  }

  /// QP 1's QPN and Q_Key (IBA 13.4.6.4).
  static constexpr std::uint32_t kQpn = wire::kGsiQpn;
  /// Receive buffers: one GRH and one MAD each.
  static constexpr std::uint32_t kRecvBuffers = 128;
  static constexpr std::uint32_t kBufferSize = transport::kGrhSize + cm::kMadSize;
  static constexpr std::uint32_t kSendDepth = 256;

 private:
  // One turn of the CM: the lock while alive; then the observer, the
  // waiters and the MADs.
  struct Turn {
    explicit Turn(Gsi& g) : gsi(g), lock((g.users_.fetch_add(1), g.mu_)) {}
    ~Turn() { gsi.end_turn(lock); }
    Gsi& gsi;
    std::unique_lock<std::mutex> lock;
  };

  // QP 1's receive buffers, the only memory it reaches (lkey 1).
  class Buffers : public transport::MemoryAccess {
   public:
    std::uint8_t* at(std::uint32_t i) { return data_.data() + std::size_t{i} * kBufferSize; }
    transport::MemRef local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                            unsigned access) override;
    transport::MemRef remote(std::uint32_t, std::uint64_t, std::uint64_t, unsigned) override {
      return {nullptr, transport::MemError::kBadKey};
    }
    bool invalidate(std::uint32_t, bool) override { return false; }
    bool bind_mw(const transport::MwBind&) override { return false; }
    static constexpr std::uint32_t kLkey = 1;

   private:
    std::vector<std::uint8_t> data_ = std::vector<std::uint8_t>(kRecvBuffers * kBufferSize);
  };

  static cm::CmaDevice cma_device(Device& dev);
  void end_turn(std::unique_lock<std::mutex>& lock);
  // MadSender: under the CM lock.
  void send_mad(const cm::OutMad& mad) override;
  // HostPorts: the daemon's port spaces, under the CM lock.
  int bind(std::uint32_t id, const Binding& b) override;
  void unbind(std::uint32_t id) override;
  // CqNotifier: QP 1 received (engine thread, the engine held).
  void notify(transport::Cq& cq) override;
  void post_recv(std::uint32_t buffer);
  // Under the send lock; true when something was posted to QP 1.
  bool flush_mads();
  bool post_mad(const cm::OutMad& mad);
  void park(cm::OutMad mad);
  bool resolved(const wire::IpAddr& ip, bool ok);
  // Holding neither lock: lets what was posted out.
  void kick(bool posted);
  // The resolver thread.
  void submit(std::function<void()> job);
  void resolver();
  std::optional<wire::IpAddr> source_for(const wire::IpAddr& dst) const;

  Device& dev_;
  engine::Engine& engine_;
  cm::SystemRandom random_;
  Buffers buffers_;
  transport::Cq send_cq_{kSendDepth};
  transport::Cq recv_cq_{kRecvBuffers};
  std::unique_ptr<transport::Qp> qp_;
  counters::CounterSet<GsiCounter> counters_;

  std::mutex mu_;  ///< the CM lock
  std::condition_variable cv_;
  cm::Cma cma_;
  Observer* observer_ = nullptr;
  std::atomic<int> users_{0};  ///< turns under way, to their last MAD
  bool stopping_ = false;
  std::atomic<cm::Nanos> next_deadline_{0};
  std::atomic<std::uint64_t> listeners_{0};
  std::vector<std::uint64_t> told_services_;  ///< what the daemon knows we listen on

  std::mutex send_mu_;  ///< the send lock: the queue and QP 1's send side
  std::deque<cm::OutMad> outbox_;
  std::vector<cm::OutMad> parked_;       ///< waiting for their peer's MAC
  std::vector<wire::IpAddr> resolving_;  ///< peers the resolver is asked for

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<std::function<void()>> jobs_;
  bool jobs_stop_ = false;
  std::thread resolver_;
};

}  // namespace uroce::verbs
