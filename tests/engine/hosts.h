/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Two engines on two ports joined in memory, each with a QP that the
// other's connects to: the fixture of the engine tests. A host with faults
// polls its pipe through a FaultPort, as a device with [fault] set does.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "port/fault_port.h"
#include "support/pipe_port.h"
#include "support/sim_memory.h"

namespace uroce::engine {

using transport::Qp;
using transport::QpAttr;
using transport::QpState;

inline const wire::MacAddr kMacA = {{0x02, 0xAA, 0, 0, 0, 1}};
inline const wire::MacAddr kMacB = {{0x02, 0xBB, 0, 0, 0, 2}};
inline const wire::IpAddr kIpA = *wire::IpAddr::parse("10.9.0.1");
inline const wire::IpAddr kIpB = *wire::IpAddr::parse("10.9.0.2");
inline constexpr unsigned kAll = transport::access::kLocalWrite | transport::access::kRemoteWrite |
                                 transport::access::kRemoteRead | transport::access::kRemoteAtomic;

// What a host's QPs are made with: the engine tests' sizes and its CQs
// and memory.
inline transport::QpInit qp_init(std::uint32_t qpn, transport::Cq& scq, transport::Cq& rcq,
                                 test::SimMemory& memory) {
  transport::QpInit init;
  init.qpn = qpn;
  init.max_send_wr = 256;
  init.max_recv_wr = 256;
  init.max_send_sge = 2;
  init.max_recv_sge = 2;
  init.send_cq = &scq;
  init.recv_cq = &rcq;
  init.memory = &memory;
  return init;
}

struct Host {
  test::PipePort& port;                     ///< the wire's side: inject, sent
  std::unique_ptr<port::Port> engine_port;  ///< what the engine polls
  Engine engine;
  test::SimMemory memory;
  transport::Cq scq{4096};
  transport::Cq rcq{4096};
  std::vector<std::unique_ptr<Qp>> qps;
  Qp* qp = nullptr;  ///< the QP made last

  Host(wire::MacAddr mac, wire::IpAddr ip, const port::FaultConfig& fault = {})
      : Host(
            mac,
            [&] {
              EngineConfig c;
              c.addresses = {ip};
              return c;
            }(),
            10000, fault) {}
  Host(wire::MacAddr mac, EngineConfig cfg, std::uint32_t speed_mbps = 10000,
       const port::FaultConfig& fault = {})
      : Host(std::make_unique<test::PipePort>(mac, speed_mbps), std::move(cfg), fault) {}

  /// The FaultPort between the pipe and the engine; null without faults.
  const port::FaultPort* faults() const {
    return dynamic_cast<const port::FaultPort*>(engine_port.get());
  }

  Qp& make_qp(std::uint32_t qpn) {
    qps.push_back(std::make_unique<Qp>(qp_init(qpn, scq, rcq, memory)));
    qp = qps.back().get();
    engine.attach(*qp);
    return *qp;
  }
  void poll(Nanos now) { engine.poll(now); }

 private:
  Host(std::unique_ptr<test::PipePort> pipe, EngineConfig cfg, const port::FaultConfig& fault)
      : port(*pipe),
        engine_port(port::with_faults(std::move(pipe), fault)),
        engine(*engine_port, std::move(cfg)) {}
};

// A host whose engine runs on two lcores (engine/handoff.h): a pipe of two
// queues, an engine on each, each QP on the lcore its QPN falls to. Its
// queues join the peer's of the same number, as net_memif's do.
struct TwoLcoreHost {
  test::PipePort port;
  Handoff handoff{2};
  std::unique_ptr<port::Port> queue1;
  Engine engine0, engine1;
  test::SimMemory memory;
  transport::Cq scq{4096};
  transport::Cq rcq{4096};
  std::vector<std::unique_ptr<Qp>> qps;
  Qp* qp = nullptr;  ///< the QP made last

  TwoLcoreHost(wire::MacAddr mac, wire::IpAddr ip)
      : port(mac, 10000, 2),
        queue1(port.open_queue(1)),
        engine0(port, config(ip, 0)),
        engine1(*queue1, config(ip, 1)) {}
  EngineConfig config(const wire::IpAddr& ip, std::uint16_t lcore) {
    EngineConfig c;
    c.addresses = {ip};
    c.handoff = &handoff;
    c.lcore = lcore;
    return c;
  }
  Engine& engine_of(std::uint32_t qpn) { return handoff.owner(qpn) == 0 ? engine0 : engine1; }
  Qp& make_qp(std::uint32_t qpn) {
    qps.push_back(std::make_unique<Qp>(qp_init(qpn, scq, rcq, memory)));
    qp = qps.back().get();
    engine_of(qpn).attach(*qp);
    return *qp;
  }
  void poll(Nanos now) {
    engine0.poll(now);
    engine1.poll(now);
  }
};

// Polls both engines from one thread until `done` or a wall-clock limit.
inline bool run(Host& a, Host& b, const std::function<bool()>& done, int seconds = 60) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    a.engine.poll(now_ns());
    b.engine.poll(now_ns());
  }
  return true;
}

// Virtual time for the engine tests whose outcome depends on time: a slow
// receiver's drain rate, pause quanta, the PFC watchdog. The engine reads
// no clock of its own (time is a parameter of poll), so each iteration of
// the two engines can advance time by a fixed step, and what such a test
// asserts holds on a loaded machine as on an idle one. (On the real
// clock, a thread kept off the CPU for a few milliseconds lets a pause
// lapse, a buffer overflow or a watchdog miss a storm.)
class SimClock {
 public:
  /// `step`: virtual time per iteration of both engines.
  explicit SimClock(Nanos step = 10'000) : step_(step) {}
  Nanos now() const { return now_; }
  /// Polls one engine at the current time.
  void poll(Host& h) { h.engine.poll(now_); }
  /// Polls both engines at the current time, then advances it one step.
  void tick(Host& a, Host& b) {
    a.engine.poll(now_);
    b.engine.poll(now_);
    now_ += step_;
  }
  /// Ticks until `done`, or false once `limit` of virtual time has passed.
  bool run(Host& a, Host& b, const std::function<bool()>& done, Nanos limit = 60'000'000'000ull) {
    const Nanos end = now_ + limit;
    while (!done()) {
      if (now_ >= end) return false;
      tick(a, b);
    }
    return true;
  }

 private:
  Nanos now_ = 1'000'000'000;  // the QPs were brought up at time 0
  Nanos step_;
};

// Connects a QP of `a` to one of `b`, RC, path MTU 1024. `dscp` sets their
// priority (DSCP 26: priority 3); `timeout` is the IBA local ACK timeout.
template <typename H>
void connect(H& a, H& b, std::uint32_t qa, std::uint32_t qb, std::uint8_t dscp = 0,
             std::uint8_t timeout = 10) {
  using namespace transport::attr_mask;
  Qp& x = a.make_qp(qa);
  Qp& y = b.make_qp(qb);
  for (auto [q, self, peer, peer_qpn] : {std::tuple{&x, &a, &b, qb}, std::tuple{&y, &b, &a, qa}}) {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = kAll;
    ASSERT_EQ(q->modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
    at.qp_state = QpState::kRtr;
    at.route.src_mac = self->port.mac();
    at.route.dst_mac = peer->port.mac();
    at.route.src_ip = self == &a ? kIpA : kIpB;
    at.route.dst_ip = self == &a ? kIpB : kIpA;
    at.route.udp_sport = wire::roce_udp_sport(qa, qb);
    at.route.dscp = dscp;
    at.path_mtu = wire::Mtu::k1024;
    at.dest_qp_num = peer_qpn;
    at.rq_psn = 0x123;
    at.max_dest_rd_atomic = 8;
    at.min_rnr_timer = 1;
    ASSERT_EQ(
        q->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0),
        0);
    at.qp_state = QpState::kRts;
    at.sq_psn = 0x123;
    at.timeout = timeout;  // 10: 4 ms
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 8;
    ASSERT_EQ(q->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0),
              0);
  }
}

}  // namespace uroce::engine
