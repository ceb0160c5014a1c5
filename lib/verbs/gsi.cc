/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/gsi.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/debug.h"
#include "log/log.h"
#include "verbs/device.h"
#include "verbs/limits.h"

namespace uroce::verbs {

namespace {

// How long the resolver asks for a MAD's peer before the MAD is dropped;
// the CM resends it seconds later, which asks again.
constexpr std::chrono::milliseconds kMadResolveTimeout{1000};
// How long a Gsi going away lets its last MADs leave.
constexpr std::chrono::milliseconds kDrainTimeout{200};

// iboe_get_rate: the IB static rate of a RoCE port, from the link speed.
std::uint8_t iboe_rate(std::uint32_t mbps) {
  if (mbps >= 40000) return 7;  // IB_RATE_40_GBPS
  if (mbps >= 30000) return 4;  // IB_RATE_30_GBPS
  if (mbps >= 20000) return 6;  // IB_RATE_20_GBPS
  if (mbps >= 10000) return 3;  // IB_RATE_10_GBPS
  return 2;                     // IB_RATE_2_5_GBPS
}

// Whether `a` is in the prefix `p` of `len` bits (IPv4 prefixes count
// from the start of the IPv4 address inside the mapped form).
bool in_prefix(const wire::IpAddr& a, const wire::IpAddr& p, unsigned len) {
  if (a.is_v4() != p.is_v4()) return false;
  unsigned bits = a.is_v4() ? 96 + std::min(len, 32u) : std::min(len, 128u);
  for (unsigned i = 0; i < 16 && bits > 0; ++i) {
    const unsigned n = std::min(bits, 8u);
    const auto mask = static_cast<std::uint8_t>(0xFF00 >> n);
    if ((a.bytes[i] & mask) != (p.bytes[i] & mask)) return false;
    bits -= n;
  }
  return true;
}

bool is_link_local(const wire::IpAddr& a) {
  return !a.is_v4() && a.bytes[0] == 0xFE && (a.bytes[1] & 0xC0) == 0x80;
}

}  // namespace

transport::MemRef Gsi::Buffers::local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                                      unsigned /*access*/) {
  const auto base = reinterpret_cast<std::uint64_t>(data_.data());
  if (lkey != kLkey) return {nullptr, transport::MemError::kBadKey};
  if (addr < base || length > data_.size() || addr - base > data_.size() - length)
    return {nullptr, transport::MemError::kBounds};
  return {data_.data() + (addr - base), transport::MemError::kNone};
}

cm::CmaDevice Gsi::cma_device(Device& dev) {
  cm::CmaDevice d;
  d.node_guid = dev.attr().node_guid;
  d.gids = dev.gids();
  d.link_mtu = dev.engine().port().mtu();
  d.ca_ack_delay = kLocalCaAckDelay;
  d.rate = iboe_rate(dev.port_attr().speed_mbps);
  // The MAD agent's high TID word: any value a restart is unlikely to repeat.
  cm::SystemRandom r;
  d.hi_tid = r.u32();
  return d;
}

Gsi::Gsi(Device& dev) : dev_(dev), engine_(dev.engine()), cma_(cma_device(dev), *this, random_) {
  transport::QpInit init;
  init.type = transport::QpType::kUd;
  init.qpn = kQpn;
  init.max_send_wr = kSendDepth;
  init.max_send_sge = 1;
  init.max_inline_data = cm::kMadSize;
  init.send_cq = &send_cq_;
  init.recv_cq = &recv_cq_;
  init.max_recv_wr = kRecvBuffers;
  init.max_recv_sge = 1;
  init.memory = &buffers_;
  init.port_mtu = dev.port_attr().active_mtu;
  qp_ = std::make_unique<transport::Qp>(init);
  recv_cq_.set_notifier(this);
  engine_.locked([&] {
    namespace am = transport::attr_mask;
    transport::QpAttr a;
    a.qp_state = transport::QpState::kInit;
    a.qkey = wire::kGsiQkey;
    a.pkey = wire::kDefaultPkey;
    qp_->modify(a, am::kState | am::kPkeyIndex | am::kPort | am::kQkey, engine::now_ns());
    a.qp_state = transport::QpState::kRtr;
    qp_->modify(a, am::kState, engine::now_ns());
    a.qp_state = transport::QpState::kRts;
    a.sq_psn = 0;
    qp_->modify(a, am::kState | am::kSqPsn, engine::now_ns());
  });
  for (std::uint32_t i = 0; i < kRecvBuffers; ++i) post_recv(i);
  recv_cq_.arm(false);
  // On a shared device the ports are the host's, as the kernel's are.
  if (engine_.port().shared()) cma_.set_host_ports(this);
  engine_.attach(*qp_);
  resolver_ = std::thread([this] { resolver(); });
  log::get().info("{}: QP 1 serves the connection manager", dev.name());
}

Gsi::~Gsi() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    observer_ = nullptr;
    cv_.notify_all();
  }
  {
    std::lock_guard lock(jobs_mu_);
    jobs_stop_ = true;
    jobs_cv_.notify_all();
  }
  resolver_.join();
  while (users_.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  drain();
  // Once detached no packet reaches QP 1 and its notifier stays quiet.
  engine_.detach(kQpn);
}

void Gsi::drain() {
  // What the CM said last (the DREQs and REJs of a process that ends)
  // leaves before QP 1 does, for a moment at most.
  const auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
  while (engine_.locked([&] { return qp_->has_work(engine::now_ns()); }) &&
         std::chrono::steady_clock::now() < deadline)
    engine_.poll(engine::now_ns());
}

void Gsi::set_observer(Observer* o) {
  std::lock_guard lock(mu_);
  observer_ = o;
}

void Gsi::end_turn(std::unique_lock<std::mutex>& lock) {
  if (observer_) observer_->cm_changed(cma_);
  next_deadline_.store(cma_.next_deadline(), std::memory_order_relaxed);
  listeners_.store(cma_.listening(), std::memory_order_relaxed);
  // On a shared device the daemon routes connection requests by the
  // ServiceIDs we listen on: tell it when they change (a listen or the
  // end of one, which happen in program threads, never the engine's).
  std::vector<std::uint64_t> services;
  const bool tell =
      engine_.port().shared() && (services = cma_.listening_services()) != told_services_;
  if (tell) told_services_ = services;
  cv_.notify_all();
  lock.unlock();
  if (tell) engine_.port().set_cm_services(services);
  bool posted;
  {
    std::lock_guard send(send_mu_);
    posted = flush_mads();
  }
  kick(posted);
  users_.fetch_sub(1, std::memory_order_release);
}

int Gsi::bind(std::uint32_t id, const Binding& b) {
  using port::Port;
  const unsigned flags =
      (b.any ? Port::kCmBindAny : 0u) | (b.reuseaddr ? Port::kCmBindReuseAddr : 0u) |
      (b.afonly ? Port::kCmBindAfOnly : 0u) | (b.ephemeral ? Port::kCmBindEphemeral : 0u);
  return engine_.port().bind_cm_port(id, b.service_id, b.ip, flags);
}

void Gsi::unbind(std::uint32_t id) { engine_.port().unbind_cm_port(id); }

void Gsi::kick(bool posted) {
  // Out now if the engine is free; the engine thread sends what it posted
  // itself later in the same iteration.
  if (posted && !engine_.in_engine_thread()) engine_.try_poll(engine::now_ns());
}

void Gsi::housekeep() {
  const cm::Nanos d = next_deadline_.load(std::memory_order_relaxed);
  if (d == 0 || d > engine::now_ns()) return;
  run([](cm::Cma& cma, cm::Nanos now) { cma.on_timer(now); });
}

// --- receive -------------------------------------------------------------------------

void Gsi::post_recv(std::uint32_t buffer) {
  transport::RecvWr wr;
  wr.wr_id = buffer;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(buffers_.at(buffer)), kBufferSize,
                   Buffers::kLkey};
  wr.num_sge = 1;
  qp_->post_recv(wr);
}

void Gsi::notify(transport::Cq& /*cq*/) {
  UROCE_DEBUG_ASSERT(engine_.in_engine_thread());
  Turn turn(*this);
  transport::Wc wc[16];
  for (std::uint32_t n; (n = recv_cq_.poll(wc, 16)) != 0;) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto buffer = static_cast<std::uint32_t>(wc[i].wr_id);
      if (wc[i].status == transport::WcStatus::kSuccess && wc[i].byte_len == kBufferSize) {
        // The GRH: RoCEv2's IPv6 header, or its IPv4 header in the last
        // 20 bytes (IBA A17.4.5.1).
        const std::uint8_t* g = buffers_.at(buffer);
        cm::GsiAddress from;
        if (g[0] >> 4 == 6) {
          from.traffic_class = static_cast<std::uint8_t>((g[0] << 4) | (g[1] >> 4));
          from.flow_label = (std::uint32_t{g[1]} & 0xF) << 16 | std::uint32_t{g[2]} << 8 | g[3];
          from.hop_limit = g[7];
          from.remote_ip = wire::IpAddr::from_v6_bytes(g + 8);
          from.local_ip = wire::IpAddr::from_v6_bytes(g + 24);
        } else {
          from.traffic_class = g[21];
          from.hop_limit = g[28];
          from.remote_ip = wire::IpAddr::from_v4_bytes(g + 32);
          from.local_ip = wire::IpAddr::from_v4_bytes(g + 36);
        }
        from.remote_qpn = wc[i].src_qp;
        counters_.inc(GsiCounter::kRxMads);
        cma_.receive(wire::ConstBytes(g + transport::kGrhSize, cm::kMadSize), from,
                     engine::now_ns());
      } else if (wc[i].status == transport::WcStatus::kSuccess) {
        counters_.inc(GsiCounter::kRxBadLength);
      }
      if (wc[i].status != transport::WcStatus::kWrFlushErr) post_recv(buffer);
    }
  }
  recv_cq_.arm(false);
}

// --- send ----------------------------------------------------------------------------

void Gsi::send_mad(const cm::OutMad& mad) {
  std::lock_guard lock(send_mu_);
  outbox_.push_back(mad);
}

bool Gsi::flush_mads() {
  bool posted = false;
  while (!outbox_.empty()) {
    cm::OutMad m = std::move(outbox_.front());
    outbox_.pop_front();
    const bool waiting =
        std::find(resolving_.begin(), resolving_.end(), m.to.remote_ip) != resolving_.end();
    if (waiting || !engine_.neighbor(m.to.remote_ip)) {
      park(std::move(m));
      continue;
    }
    posted |= post_mad(m);
  }
  // Sends are unsignaled; only errors complete, and nobody needs them.
  transport::Wc wc[16];
  while (send_cq_.poll(wc, 16) != 0) {
  }
  return posted;
}

bool Gsi::post_mad(const cm::OutMad& m) {
  const auto gids = dev_.gids();
  const auto gid = std::find(gids.begin(), gids.end(), m.to.local_ip);
  if (m.to.local_ip == wire::IpAddr{} || gid == gids.end()) {
    counters_.inc(GsiCounter::kTxNoRoute);
    return false;
  }
  AddressVector av;
  av.sgid_index = static_cast<std::uint8_t>(gid - gids.begin());
  av.dgid = m.to.remote_ip.bytes;
  av.hop_limit = m.to.hop_limit;
  av.traffic_class = m.to.traffic_class;
  av.flow_label = m.to.flow_label;
  wire::RoceRoute route;
  // The peer's MAC was known when flush_mads asked. Not waiting: this
  // may hold the engine, and the send lock the engine thread takes (an
  // address of ours removed meanwhile is no longer delivered inside).
  if (dev_.resolve(av, kQpn, m.to.remote_qpn, &route, std::chrono::milliseconds(0)) != 0) {
    counters_.inc(GsiCounter::kTxNoRoute);
    return false;
  }
  transport::SendWr wr;
  wr.opcode = transport::WrOpcode::kSend;
  wr.send_flags = transport::send_flags::kInline;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(m.mad.data()), cm::kMadSize, 0};
  wr.num_sge = 1;
  const wire::RouteTemplate headers(route);
  wr.ud = {&headers, m.to.remote_qpn, wire::kGsiQkey};
  if (qp_->post_send(wr) != 0) {
    counters_.inc(GsiCounter::kTxQueueFull);
    return false;
  }
  counters_.inc(GsiCounter::kTxMads);
  return true;
}

void Gsi::park(cm::OutMad mad) {
  const wire::IpAddr ip = mad.to.remote_ip;
  parked_.push_back(std::move(mad));
  if (std::find(resolving_.begin(), resolving_.end(), ip) != resolving_.end()) return;
  resolving_.push_back(ip);
  submit([this, ip] {
    const bool ok = engine_.resolve(ip, kMadResolveTimeout).has_value();
    bool posted;
    {
      std::lock_guard lock(send_mu_);
      posted = resolved(ip, ok);
    }
    kick(posted);
  });
}

bool Gsi::resolved(const wire::IpAddr& ip, bool ok) {
  std::erase(resolving_, ip);
  // The peer's MADs go in the order they were sent, ahead of any queued
  // after them.
  std::deque<cm::OutMad> mine;
  std::erase_if(parked_, [&](cm::OutMad& m) {
    if (m.to.remote_ip != ip) return false;
    mine.push_back(std::move(m));
    return true;
  });
  if (!ok) {
    counters_.inc(GsiCounter::kTxUnresolved, mine.size());
    return false;
  }
  outbox_.insert(outbox_.begin(), std::make_move_iterator(mine.begin()),
                 std::make_move_iterator(mine.end()));
  return flush_mads();
}

// --- address resolution --------------------------------------------------------------

std::optional<wire::IpAddr> Gsi::source_for(const wire::IpAddr& dst) const {
  // The kernel takes the source from the route to the destination; a
  // device's routes are its prefixes: an address whose prefix holds the
  // destination, else the first of its family (IPv6: link-local only
  // toward link-local).
  std::optional<wire::IpAddr> first;
  for (const IpPrefix& p : dev_.addresses()) {
    const auto a = wire::IpAddr::parse(p.address);
    if (!a || a->is_v4() != dst.is_v4()) continue;
    if (in_prefix(dst, *a, p.prefix)) return a;
    if (!first) first = a;
  }
  if (is_link_local(dst)) return dev_.gids().front();
  return first;
}

void Gsi::resolve_addr(std::uint32_t id, std::optional<wire::IpAddr> src, wire::IpAddr dst,
                       std::chrono::milliseconds timeout) {
  submit([this, id, src, dst, timeout] {
    const std::optional<wire::IpAddr> from = src ? src : source_for(dst);
    std::optional<wire::RoceRoute> route;
    if (from) route = engine_.route_to(*from, dst, timeout);
    run([&](cm::Cma& cma, cm::Nanos) {
      if (!route) {
        // addr.c: no route is -ENETUNREACH, a neighbour that stays silent
        // -ETIMEDOUT.
        cma.addr_error(id, from ? -ETIMEDOUT : -ENETUNREACH);
        return;
      }
      cm::ResolvedAddr r;
      r.src_ip = from;
      r.dst_mac = route->dst_mac;
      r.hop_limit = 64;
      cma.addr_resolved(id, r);
    });
  });
}

void Gsi::submit(std::function<void()> job) {
  std::lock_guard lock(jobs_mu_);
  jobs_.push_back(std::move(job));
  jobs_cv_.notify_one();
}

void Gsi::resolver() {
  std::unique_lock lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [this] { return jobs_stop_ || !jobs_.empty(); });
    if (jobs_stop_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace uroce::verbs
