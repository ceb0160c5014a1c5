/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A deterministic network simulator for the transport: hosts with QPs, a
// link between every pair with a bit rate and lib/port's seeded
// impairment model, and virtual time. Frames are real RoCEv2 over IPv4 or
// IPv6, tagged or not: built by lib/wire from what the QPs transmit,
// possibly damaged on the way, then parsed and validated by lib/wire
// before a QP sees them. Nothing here stands in for the transport: QPs
// run exactly as in the engine.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <vector>

#include "port/impairment.h"
#include "support/sim_memory.h"
#include "transport/qp.h"
#include "wire/roce_frame.h"

namespace uroce::test {

using transport::Nanos;

/// What the link does to each frame: lib/port's model (drop, duplicate,
/// reorder, corrupt, delay_ns as the one-way propagation delay plus
/// jitter_ns), and what only the simulator does.
struct FaultModel : port::ImpairmentConfig {
  FaultModel() { delay_ns = 2000; }
  /// A reordered frame arrives up to this much later, a duplicate up to
  /// this much after the original.
  Nanos reorder_window = 20000;
  Nanos cut_at = 0;  ///< from this time on every frame is lost (0: never)
};

/// How the hosts are addressed: IPv4 or IPv6, untagged or on an 802.1Q
/// VLAN, so that seeds run every kind of route the builder and the parser
/// know.
struct SimRoutes {
  bool ipv6 = false;  ///< hosts at fd00::N instead of 10.0.0.N, with a flow label
  bool vlan = false;  ///< every frame tagged: VLAN 100, PCP 3
};

/// Counts of what the simulated links did.
struct SimStats {
  std::uint64_t frames = 0;
  std::uint64_t dropped = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t rejected = 0;  ///< frames lib/wire's parser refused on arrival
  std::uint64_t bytes = 0;
  std::uint64_t ipv6 = 0;    ///< frames sent over IPv6
  std::uint64_t tagged = 0;  ///< frames sent with an 802.1Q tag
};

class SimNet;

/// Connection attributes for RC (and XRC) QPs in the simulator: 1024-byte
/// path MTU, 4 READs/atomics each way, the shortest RNR timer, a 4.2 ms
/// local ACK timeout, 7 retries of each kind.
inline transport::QpAttr rc_params() {
  transport::QpAttr p;
  p.path_mtu = wire::Mtu::k1024;
  p.max_rd_atomic = 4;
  p.max_dest_rd_atomic = 4;
  p.min_rnr_timer = 1;
  p.timeout = 10;  // 4.2 ms
  p.retry_cnt = 7;
  p.rnr_retry = 7;
  return p;
}

/// A signalled XRC work request of one SGE over [buf, buf + len), for the
/// SRQ `srqn` of the target's domain.
inline transport::SendWr xrc_wr(transport::WrOpcode op, std::uint64_t id, std::uint32_t srqn,
                                const void* buf, std::uint32_t len, std::uint32_t lkey) {
  transport::SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.send_flags = transport::send_flags::kSignaled;
  wr.num_sge = 1;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf), len, lkey};
  wr.xrc_remote_srqn = srqn;
  return wr;
}

/// One host: its address, memory, CQs and QPs.
class SimHost : public transport::TxSink {
 public:
  /// `cq_depth`: the depth of each of its two CQs.
  SimHost(SimNet& net, std::uint8_t id, std::uint32_t cq_depth);

  SimMemory& memory() { return memory_; }
  const wire::RoceRoute& route_to(const SimHost& peer) const;

  /// Creates a QP; its CQs are the host's (one send CQ, one receive CQ).
  /// An XRC target takes its SRQs, CQs and memory from `xrc`.
  transport::Qp& create_qp(transport::QpType type, std::uint32_t depth = 256,
                           transport::XrcDomain* xrc = nullptr);
  /// An XRC target QP whose responder is `shared`, as each process that
  /// serves a domain shared between processes has one: with `qpn` 0 a new
  /// QP, otherwise another process's Qp of the target QP `qpn`.
  transport::Qp& create_shared_target(transport::XrcDomain* xrc, transport::SharedResponder* shared,
                                      transport::SharedResponderLock* lock, std::uint32_t qpn = 0);
  /// Requests whose XRCETH names `srqn` go to `qp` (a Qp of the target QP
  /// they are for), as the device daemon hands each to the process that
  /// owns the SRQ; the others go to the target QP's first Qp.
  void route_xrc_srq(std::uint32_t srqn, transport::Qp& qp) { xrc_srqs_[srqn] = &qp; }
  /// QPs created from now on offer selective repeat (QpInit's).
  void set_selective_repeat(bool on) { selective_repeat_ = on; }
  transport::Cq& send_cq() { return send_cq_; }
  transport::Cq& recv_cq() { return recv_cq_; }
  const wire::IpAddr& ip() const { return ip_; }
  const wire::MacAddr& mac() const { return mac_; }

  bool transmit(const transport::TxPacket& pkt) override;

 private:
  friend class SimNet;
  transport::Qp& create(transport::QpType type, std::uint32_t depth, transport::XrcDomain* xrc,
                        transport::SharedResponder* shared, transport::SharedResponderLock* lock,
                        std::uint32_t qpn);
  SimNet& net_;
  std::uint8_t id_;
  wire::MacAddr mac_;
  wire::IpAddr ip_;
  SimMemory memory_;
  transport::Cq send_cq_;
  transport::Cq recv_cq_;
  std::vector<std::unique_ptr<transport::Qp>> qps_;
  std::map<std::uint32_t, transport::Qp*> by_qpn_;
  std::map<std::uint32_t, transport::Qp*> xrc_srqs_;
  std::map<std::uint8_t, wire::RoceRoute> routes_;
  std::size_t rr_ = 0;  ///< round-robin position over QPs
  Nanos link_free_ = 0;
  std::uint16_t ip_id_ = 0;
  bool selective_repeat_ = false;
  std::vector<std::uint8_t> frame_buf_;
};

class SimNet {
 public:
  explicit SimNet(std::uint64_t seed, std::uint64_t link_bps = 10'000'000'000,
                  SimRoutes routes = {});

  /// A host whose CQs hold `cq_depth` completions each. The default
  /// holds whatever a test leaves unpolled; a test that makes thousands of
  /// short-lived networks passes less, as zeroing 2 x 64K completions per
  /// host is most of such a network's cost.
  SimHost& add_host(std::uint32_t cq_depth = 1 << 16);
  /// The fault model of frames going from `from` to `to`.
  void set_faults(const SimHost& from, const SimHost& to, const FaultModel& f);
  void set_faults_all(const FaultModel& f);

  /// Connects two RC or UC QPs, or an XRC initiator and target, to each
  /// other and brings both to RTS.
  void connect(transport::Qp& a, SimHost& ha, transport::Qp& b, SimHost& hb,
               const transport::QpAttr& params);
  /// Brings a UD QP to RTS.
  void activate_ud(transport::Qp& qp, std::uint32_t qkey);

  Nanos now() const { return now_; }
  const SimStats& stats() const { return stats_; }
  const SimRoutes& routes() const { return routes_; }
  std::mt19937_64& rng() { return rng_; }

  /// Runs until `done` returns true or virtual time passes `limit`; returns
  /// whether `done` became true. Ends early if nothing can ever happen.
  bool run_until(const std::function<bool()>& done, Nanos limit);
  /// Runs for `span` of virtual time.
  void run_for(Nanos span);

 private:
  friend class SimHost;
  struct Arrival {
    Nanos at;
    std::uint64_t seq;
    std::uint8_t host;
    std::vector<std::uint8_t> frame;
    bool operator>(const Arrival& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void send_frame(SimHost& from, std::vector<std::uint8_t> frame);
  void deliver(const Arrival& a);
  bool step(Nanos limit);

  /// One direction between two hosts: its faults, decided by a generator
  /// of its own, so that one link's faults do not depend on the others'
  /// traffic.
  struct Link {
    FaultModel faults;
    port::Impairment impairment;
  };
  Link& link(std::uint8_t from, std::uint8_t to);
  std::uint64_t link_seed(std::uint8_t from, std::uint8_t to) const {
    return seed_ * 1000 + from * 16u + to;
  }

  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::uint64_t link_bps_;
  SimRoutes routes_;
  Nanos now_ = 0;
  std::uint64_t seq_ = 0;
  std::vector<std::unique_ptr<SimHost>> hosts_;
  std::map<std::pair<std::uint8_t, std::uint8_t>, Link> links_;
  FaultModel default_faults_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  SimStats stats_;
  std::uint32_t next_qpn_ = 0x11;
};

}  // namespace uroce::test
