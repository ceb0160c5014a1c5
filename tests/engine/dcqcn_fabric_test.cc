/* SPDX-License-Identifier: BSD-3-Clause */
// DCQCN end to end on simulated time: three uroce engines write into a
// fourth through lib/switch, whose port toward the receiver is a
// 100 Mb/s bottleneck marking ECN like a RED queue. With DCQCN the rates
// converge to fair shares and the queue stays bounded.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "cc/qp_congestion.h"
#include "engine/engine.h"
#include "support/pipe_port.h"
#include "support/sim_memory.h"
#include "switch/switch.h"

namespace uroce::engine {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1'000'000;
constexpr unsigned kSenders = 3;
constexpr unsigned kAll = transport::access::kLocalWrite | transport::access::kRemoteWrite |
                          transport::access::kRemoteRead | transport::access::kRemoteAtomic;

wire::MacAddr mac(unsigned i) { return {{0x02, 0, 0, 0, 1, static_cast<std::uint8_t>(i)}}; }
wire::IpAddr ip(unsigned i) { return wire::IpAddr::from_v4(0x0A0B0001 + i); }

// DCQCN scaled to a 100 Mb/s bottleneck (the scenario's values).
cc::DcqcnParams params() {
  cc::DcqcnParams p;
  p.rpg_time_reset_us = 50'000;
  p.rpg_byte_reset = 10'000'000;
  p.rpg_ai_rate_mbps = 1;
  p.rpg_hai_rate_mbps = 5;
  p.rate_reduce_monitor_period_us = 1000;
  p.min_time_between_cnps_us = 500;
  p.dce_tcp_rtt_us = 1000;
  return p;
}

struct Node {
  test::PipePort port;
  Engine engine;
  test::SimMemory memory;
  transport::Cq scq{4096};
  transport::Cq rcq{4096};
  cc::NotificationPoint np{params()};
  cc::Counters counters;
  std::vector<std::unique_ptr<cc::QpCongestion>> ccs;
  std::vector<std::unique_ptr<transport::Qp>> qps;

  Node(unsigned i, std::uint32_t speed_mbps)
      : port(mac(i), speed_mbps), engine(port, [&] {
          EngineConfig c;
          c.addresses = {ip(i)};
          return c;
        }()) {}

  transport::Qp& make_qp(std::uint32_t qpn, bool dcqcn) {
    transport::QpInit init;
    init.qpn = qpn;
    init.max_send_wr = 64;
    init.max_recv_wr = 64;
    init.max_send_sge = 1;
    init.max_recv_sge = 1;
    init.send_cq = &scq;
    init.recv_cq = &rcq;
    init.memory = &memory;
    transport::Qp** self = new transport::Qp*(nullptr);  // owned below
    owned_slots.emplace_back(self);
    if (dcqcn) {
      ccs.push_back(
          std::make_unique<cc::QpCongestion>(params(), std::uint64_t{port.speed_mbps()} * 1'000'000,
                                             true, true, np, counters, [this, self] {
                                               wire::RoceRoute r = (*self)->attr().route;
                                               r.dscp = 48;
                                               r.ecn = wire::Ecn::kNotEct;
                                               engine.send_cnp(r, (*self)->attr().dest_qp_num);
                                             }));
      init.gate = ccs.back().get();
      init.congestion = ccs.back().get();
    }
    qps.push_back(std::make_unique<transport::Qp>(init));
    *self = qps.back().get();
    engine.attach(*qps.back());
    return *qps.back();
  }
  std::vector<std::unique_ptr<transport::Qp*>> owned_slots;
};

void connect(Node& a, unsigned ia, std::uint32_t qa, Node& b, unsigned ib, std::uint32_t qb,
             bool dcqcn) {
  using namespace transport::attr_mask;
  transport::Qp& x = a.make_qp(qa, dcqcn);
  transport::Qp& y = b.make_qp(qb, dcqcn);
  for (auto [q, self, peer, is, ip_peer, peer_qpn] :
       {std::tuple{&x, &a, &b, ia, ib, qb}, std::tuple{&y, &b, &a, ib, ia, qa}}) {
    transport::QpAttr at;
    at.qp_state = transport::QpState::kInit;
    at.qp_access_flags = kAll;
    ASSERT_EQ(q->modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
    at.qp_state = transport::QpState::kRtr;
    at.route.src_mac = self->port.mac();
    at.route.dst_mac = peer->port.mac();
    at.route.src_ip = ip(is);
    at.route.dst_ip = ip(ip_peer);
    at.route.udp_sport = wire::roce_udp_sport(qa, qb);
    at.route.dscp = 26;
    at.route.ecn = dcqcn ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
    at.path_mtu = wire::Mtu::k1024;
    at.dest_qp_num = peer_qpn;
    at.rq_psn = 1;
    at.max_dest_rd_atomic = 8;
    at.min_rnr_timer = 1;
    ASSERT_EQ(
        q->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0),
        0);
    at.qp_state = transport::QpState::kRts;
    at.sq_psn = 1;
    at.timeout = 18;  // 1 s: queues hold milliseconds here
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 8;
    ASSERT_EQ(q->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0),
              0);
  }
}

struct Result {
  std::vector<double> mbps;  ///< per sender, over the measured window
  std::uint64_t max_depth = 0;
  std::uint64_t drops = 0;
  std::uint64_t cnps = 0;
};

// Runs the incast for `total` of simulated time; measures the last `window`.
Result incast(bool dcqcn, Nanos total, Nanos window) {
  constexpr unsigned kReceiver = kSenders;
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<test::PipePort>> sw_ports;
  std::vector<port::Port*> raw;
  for (unsigned i = 0; i <= kSenders; ++i) {
    // Hosts on 1 Gb/s links; the switch port toward the receiver is the
    // 100 Mb/s bottleneck.
    nodes.push_back(std::make_unique<Node>(i, 1000));
    sw_ports.push_back(std::make_unique<test::PipePort>(mac(100 + i), 1000));
    test::PipePort::join(nodes[i]->port, *sw_ports[i]);
    raw.push_back(sw_ports[i].get());
  }
  sw::SwitchConfig sc;
  sc.ports.resize(kSenders + 1);
  sc.ports[kReceiver].rate_bps = 100'000'000;
  sc.queues[3].ecn = {true, 10 * 1024, 100 * 1024, 0.2};
  sc.queues[3].limit_bytes = 512 * 1024;
  sw::Switch swt(raw, sc);
  for (unsigned i = 0; i < kSenders; ++i)
    connect(*nodes[i], i, 0x100 + i, *nodes[kReceiver], kReceiver, 0x200 + i, dcqcn);

  // Each sender keeps 4 WRITEs of 64 KiB in flight, forever.
  static std::vector<std::uint8_t> src(64 * 1024, 0x5A), dst(64 * 1024);
  std::vector<std::uint32_t> lkey(kSenders);
  const std::uint32_t rkey = nodes[kReceiver]->memory.reg(dst.data(), dst.size(), kAll);
  for (unsigned i = 0; i < kSenders; ++i)
    lkey[i] = nodes[i]->memory.reg(src.data(), src.size(), kAll);
  auto post = [&](unsigned i) {
    transport::SendWr w;
    w.opcode = transport::WrOpcode::kRdmaWrite;
    w.send_flags = transport::send_flags::kSignaled;
    w.num_sge = 1;
    w.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()),
                    static_cast<std::uint32_t>(src.size()), lkey[i]};
    w.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
    w.rkey = rkey;
    EXPECT_EQ(nodes[i]->qps[0]->post_send(w), 0);
  };
  for (unsigned i = 0; i < kSenders; ++i)
    for (int k = 0; k < 4; ++k) post(i);

  Result r;
  r.mbps.assign(kSenders, 0);
  std::vector<std::uint64_t> done(kSenders, 0);
  const Nanos t0 = 1'000'000'000, measure_from = t0 + total - window;
  for (Nanos now = t0; now < t0 + total; now += 2 * kUs) {
    for (auto& n : nodes) n->engine.poll(now);
    swt.poll(now);
    for (unsigned i = 0; i < kSenders; ++i) {
      transport::Wc wc[8];
      const std::size_t n = nodes[i]->scq.poll(wc, 8);
      for (std::size_t k = 0; k < n; ++k) {
        EXPECT_EQ(wc[k].status, transport::WcStatus::kSuccess);
        if (now >= measure_from) done[i] += src.size();
        post(i);
      }
    }
    if (now >= measure_from)
      r.max_depth = std::max(r.max_depth, swt.counters(kReceiver).queues[3].depth.get());
  }
  for (unsigned i = 0; i < kSenders; ++i)
    r.mbps[i] = static_cast<double>(done[i]) * 8 / (static_cast<double>(window) / 1e9) / 1e6;
  swt.counters(kReceiver).drops.for_each([&](std::string_view, std::uint64_t v) { r.drops += v; });
  r.cnps = nodes[kReceiver]->counters.get(cc::Counter::kNpCnpSent);
  return r;
}

double jain(const std::vector<double>& x) {
  const double s = std::accumulate(x.begin(), x.end(), 0.0);
  double q = 0;
  for (double v : x) q += v * v;
  return q > 0 ? s * s / (static_cast<double>(x.size()) * q) : 0;
}

TEST(DcqcnFabric, RatesConvergeToFairSharesAndTheQueueStaysBounded) {
  const Result r = incast(true, 3000 * kMs, 1000 * kMs);
  const double total = std::accumulate(r.mbps.begin(), r.mbps.end(), 0.0);
  std::printf(
      "DCQCN: %.1f %.1f %.1f Mb/s (total %.1f), Jain %.3f, queue max %llu B, drops %llu, "
      "CNPs %llu\n",
      r.mbps[0], r.mbps[1], r.mbps[2], total, jain(r.mbps),
      static_cast<unsigned long long>(r.max_depth), static_cast<unsigned long long>(r.drops),
      static_cast<unsigned long long>(r.cnps));
  EXPECT_GT(r.cnps, 0u);
  EXPECT_GE(jain(r.mbps), 0.9);
  EXPECT_GT(total, 50.0) << "the bottleneck is used";
  EXPECT_LT(r.max_depth, 256u * 1024) << "bounded, well below the 512 KiB limit";

  // The same incast without DCQCN: the queue runs into its limit, drops,
  // and the senders go back N.
  const Result plain = incast(false, 3000 * kMs, 1000 * kMs);
  const double plain_total = std::accumulate(plain.mbps.begin(), plain.mbps.end(), 0.0);
  std::printf(
      "no DCQCN: %.1f %.1f %.1f Mb/s (total %.1f), Jain %.3f, queue max %llu B, drops "
      "%llu\n",
      plain.mbps[0], plain.mbps[1], plain.mbps[2], plain_total, jain(plain.mbps),
      static_cast<unsigned long long>(plain.max_depth),
      static_cast<unsigned long long>(plain.drops));
  EXPECT_LT(r.drops, plain.drops);
  EXPECT_GT(plain.max_depth, r.max_depth);
}

}  // namespace
}  // namespace uroce::engine
