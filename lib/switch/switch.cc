/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/switch.h"

#include <algorithm>
#include <cstring>

#include "log/log.h"
#include "port/params.h"
#include "wire/ethernet.h"
#include "wire/mac_control.h"

namespace uroce::sw {

namespace {
constexpr std::uint16_t kBurst = 32;  ///< frames received from a port per poll
/// Frames handed to a port at once: a delay line may let many go together.
constexpr std::uint16_t kSendBurst = 64;
static_assert(kBurst <= port::kRxBurst && kSendBurst <= port::kMaxTxBurst);
constexpr std::int64_t kDwrrQuantum = 1536;  ///< bytes per unit of weight per round
}  // namespace

struct Switch::PortState {
  port::Port* port = nullptr;
  PortConfig cfg;
  bool up = true;
  std::array<std::deque<PacketPtr>, kQueues> queues;
  std::array<std::uint64_t, kQueues> queue_bytes{};
  std::uint64_t bytes = 0;  ///< bytes queued for this egress port
  /// Buffer held by frames that came in on this port, per priority: what
  /// PFC watches.
  std::array<std::uint64_t, kQueues> ingress_bytes{};
  std::array<std::int64_t, kQueues> deficit{};
  unsigned rr = 0;
  Shaper shaper;
  std::unique_ptr<Impairment> rx_impairment, tx_impairment;
  std::optional<pfc::PauseState> pause;     ///< what the link partner paused
  std::optional<pfc::PauseGenerator> xoff;  ///< our pauses of the partner
  std::uint8_t storms_logged = 0;
  std::vector<port::TxFrame> pending;          ///< frames the port refused, sent first
  std::optional<pfc::PfcRequest> pfc_pending;  ///< PFC to send, ahead of anything
  PortCounters counters;
};

Switch::Switch(std::vector<port::Port*> ports, SwitchConfig cfg)
    : cfg_(std::move(cfg)), mac_(cfg_.aging_ns), rng_(cfg_.seed) {
  for (std::size_t i = 0; i < ports.size(); ++i) {
    auto st = std::make_unique<PortState>();
    st->port = ports[i];
    if (i < cfg_.ports.size()) st->cfg = cfg_.ports[i];
    // The bucket holds 2 ms of line rate (32 KiB to 512 KiB): a switch
    // thread the host deschedules for a moment catches up afterwards, as
    // a hardware port never falls behind in the first place.
    const std::uint64_t burst =
        std::clamp<std::uint64_t>(st->cfg.rate_bps / 8 / 500, 32 * 1024, 512 * 1024);
    st->shaper = Shaper(st->cfg.rate_bps, burst);
    // Each port and direction has a generator of its own, so that one
    // port's impairments do not depend on the others' traffic.
    st->rx_impairment = std::make_unique<Impairment>(st->cfg.rx, cfg_.seed * 1000 + 2 * i,
                                                     st->counters.rx_impairment);
    st->tx_impairment = std::make_unique<Impairment>(st->cfg.tx, cfg_.seed * 1000 + 2 * i + 1,
                                                     st->counters.tx_impairment);
    if (cfg_.pfc.enabled) {
      const std::uint32_t speed = ports[i]->speed_mbps();
      st->pause.emplace(cfg_.pfc.lossless, speed, cfg_.pfc.watchdog, st->counters.pfc);
      pfc::XoffConfig x;
      x.lossless = cfg_.pfc.lossless;
      x.xoff_bytes = cfg_.pfc.xoff_bytes;
      x.xon_bytes = cfg_.pfc.xon_bytes;
      x.quanta = cfg_.pfc.quanta;
      x.speed_mbps = speed != 0 ? speed : pfc::kDefaultSpeedMbps;
      st->xoff.emplace(x, st->counters.pfc);
    }
    st->counters.link_up.set(1);
    ports_.push_back(std::move(st));
  }
}

Switch::~Switch() {
  for (auto& st : ports_) {
    for (auto& f : st->pending) st->port->tx_free(f);
  }
}

bool Switch::link(std::uint16_t port) const { return ports_[port]->up; }

const PortCounters& Switch::counters(std::uint16_t port) const { return ports_[port]->counters; }

bool Switch::busy() const {
  if (used_ != 0) return true;
  for (const auto& st : ports_) {
    if (!st->pending.empty() || st->pfc_pending || st->rx_impairment->holding() ||
        st->tx_impairment->holding())
      return true;
  }
  return false;
}

void Switch::set_link(std::uint16_t port, bool up) {
  PortState& st = *ports_[port];
  if (st.up == up) return;
  st.up = up;
  st.counters.link_up.set(up ? 1 : 0);
  if (up) return;
  for (unsigned q = 0; q < kQueues; ++q) {
    while (!st.queues[q].empty()) {
      PacketPtr p = std::move(st.queues[q].front());
      st.queues[q].pop_front();
      unaccount(st, *p);
      drop(st, Drop::kPortDown, static_cast<std::uint8_t>(q));
      pool_.put(std::move(p));
    }
  }
  st.rx_impairment->clear(pool_);
  st.tx_impairment->clear(pool_);
  for (auto& f : st.pending) st.port->tx_free(f);
  st.pending.clear();
  st.pfc_pending.reset();
  mac_.flush_port(port);
}

std::uint32_t Switch::poll(Nanos now) {
  std::uint32_t work = 0;
  for (std::uint16_t i = 0; i < ports_.size(); ++i) {
    const std::uint64_t before = ports_[i]->counters.rx_packets.get();
    receive(i, now);
    work += static_cast<std::uint32_t>(ports_[i]->counters.rx_packets.get() - before);
  }
  for (std::uint16_t i = 0; i < ports_.size(); ++i) {
    PortState& st = *ports_[i];
    if (st.xoff && st.up) {
      if (const auto req = st.xoff->update(st.ingress_bytes, now)) {
        if (st.pfc_pending) {
          pfc::merge(*st.pfc_pending, *req);
        } else {
          st.pfc_pending = *req;
        }
      }
      if (st.pfc_pending) send_pfc(st);
    }
    work += transmit(i, now);
  }
  if (now >= next_aging_) {
    mac_.age(now);
    next_aging_ = now + 1'000'000'000;
  }
  return work;
}

void Switch::drop(PortState& st, Drop why, std::uint8_t prio) {
  st.counters.drops.inc(why);
  st.counters.queues[prio & 7].dropped.add();
}

void Switch::receive(std::uint16_t in, Nanos now) {
  PortState& st = *ports_[in];
  port::RxFrame frames[kBurst];
  const std::uint16_t n = st.port->rx_burst(frames, kBurst);
  for (std::uint16_t k = 0; k < n; ++k) {
    const wire::ConstBytes f = frames[k].data;
    st.counters.rx_packets.add();
    st.counters.rx_bytes.add(f.size());
    if (!st.up) {
      drop(st, Drop::kPortDown, 0);
      continue;
    }
    if (f.size() < wire::EthHdr::kSize) {
      drop(st, Drop::kMalformed, 0);
      continue;
    }
    if (wire::load_be16(f.data() + 12) == wire::ether_type::kMacControl) {
      on_mac_control(st, f, now);  // consumed by the MAC, never forwarded
      continue;
    }
    PacketPtr p = pool_.get(f);
    p->ingress = in;
    if (st.rx_impairment->active()) {
      st.rx_impairment->push(std::move(p), now, pool_, ready_);
    } else {
      ready_.push_back(std::move(p));
    }
  }
  if (n > 0) st.port->rx_release(frames, n);
  if (st.rx_impairment->active()) st.rx_impairment->release(now, ready_);
  // forward() may fill ready_ no further: take the batch first.
  std::vector<PacketPtr> batch;
  batch.swap(ready_);
  for (auto& p : batch) forward(std::move(p), now);
  batch.clear();
  ready_.swap(batch);
}

void Switch::on_mac_control(PortState& st, wire::ConstBytes frame, Nanos now) {
  wire::MacControlFrame f;
  if (wire::parse_mac_control_frame(frame, f) != wire::MacControlError::kNone) {
    drop(st, Drop::kMalformed, 0);
    return;
  }
  if (st.pause) st.pause->on_frame(f, now);
}

void Switch::forward(PacketPtr p, Nanos now) {
  const FrameInfo info = inspect(p->bytes, cfg_.priority_map);
  p->priority = info.priority;
  const std::uint16_t in = p->ingress;
  PortState& ist = *ports_[in];
  ist.counters.queues[info.priority].rx_bytes.add(p->bytes.size());
  wire::MacAddr dst, src;
  std::memcpy(dst.bytes.data(), p->bytes.data(), 6);
  std::memcpy(src.bytes.data(), p->bytes.data() + 6, 6);
  mac_.learn(info.vid, src, in, now);
  const auto out = dst.is_multicast() ? std::nullopt : mac_.lookup(info.vid, dst, now);
  if (out) {
    if (*out == in) {
      drop(ist, Drop::kFiltered, info.priority);
      pool_.put(std::move(p));
      return;
    }
    enqueue(*out, std::move(p), info, now);
    return;
  }
  // Broadcast, multicast, or not learned yet: every other port gets a copy.
  std::uint16_t last = UINT16_MAX;
  for (std::uint16_t e = 0; e < ports_.size(); ++e) {
    if (e == in || !ports_[e]->up) continue;
    if (last != UINT16_MAX) {
      PacketPtr copy = pool_.get(p->bytes);
      copy->ingress = in;
      copy->priority = p->priority;
      enqueue(last, std::move(copy), info, now);
    }
    last = e;
  }
  if (last != UINT16_MAX) {
    enqueue(last, std::move(p), info, now);
  } else {
    pool_.put(std::move(p));
  }
}

void Switch::enqueue(std::uint16_t e, PacketPtr p, const FrameInfo& info, Nanos now) {
  (void)now;
  PortState& st = *ports_[e];
  PortState& ist = *ports_[p->ingress];
  const std::uint8_t q = p->priority;
  const std::uint64_t len = p->bytes.size();
  if (!st.up) {
    drop(st, Drop::kPortDown, q);
    pool_.put(std::move(p));
    return;
  }
  const bool lossless = cfg_.pfc.enabled && (cfg_.pfc.lossless & (1u << q));
  Drop why = Drop::kCount;
  if (lossless) {
    // Past xoff the sender has been told to stop; what it sent before
    // that lands in the headroom. Only an overrun headroom drops.
    if (ist.ingress_bytes[q] + len > cfg_.pfc.xoff_bytes + cfg_.pfc.headroom_bytes)
      why = Drop::kHeadroom;
  } else if (used_ + len > cfg_.buffer_bytes) {
    why = Drop::kBufferFull;
  } else if (st.bytes + len > cfg_.port_limit_bytes) {
    why = Drop::kPortLimit;
  } else if (st.queue_bytes[q] + len > cfg_.queues[q].limit_bytes) {
    why = Drop::kQueueLimit;
  }
  if (why != Drop::kCount) {
    drop(st, why, q);
    pool_.put(std::move(p));
    return;
  }
  const EcnConfig& ecn = cfg_.queues[q].ecn;
  if (ecn.enabled) {
    const double prob = mark_probability(st.queue_bytes[q], ecn);
    if (prob > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < prob &&
        mark_ce(p->bytes, info)) {
      st.counters.ecn_marked.add();
      st.counters.queues[q].ecn_marked.add();
    }
  }
  used_ += len;
  st.bytes += len;
  st.queue_bytes[q] += len;
  ist.ingress_bytes[q] += len;
  QueueCounters& qc = st.counters.queues[q];
  qc.depth.set(st.queue_bytes[q]);
  if (st.queue_bytes[q] > qc.max_depth.get()) qc.max_depth.set(st.queue_bytes[q]);
  st.queues[q].push_back(std::move(p));
}

void Switch::unaccount(PortState& st, const Packet& p) {
  const std::uint64_t len = p.bytes.size();
  used_ -= len;
  st.bytes -= len;
  st.queue_bytes[p.priority] -= len;
  ports_[p.ingress]->ingress_bytes[p.priority] -= len;
  st.counters.queues[p.priority].depth.set(st.queue_bytes[p.priority]);
}

int Switch::pick(PortState& st, std::uint8_t paused) {
  if (cfg_.scheduling == Scheduling::kStrict) {
    for (int q = kQueues - 1; q >= 0; --q) {
      if (!st.queues[q].empty() && !(paused & (1u << q))) return q;
    }
    return -1;
  }
  // Deficit weighted round robin (Shreedhar and Varghese): a queue's turn
  // adds weight x quantum to its deficit, and it sends while the head fits.
  for (unsigned k = 0; k < 8 * kQueues; ++k) {
    const unsigned q = st.rr;
    if (st.queues[q].empty() || (paused & (1u << q))) {
      if (st.queues[q].empty()) st.deficit[q] = 0;
      st.rr = (q + 1) % kQueues;
      continue;
    }
    const auto len = static_cast<std::int64_t>(st.queues[q].front()->bytes.size());
    if (st.deficit[q] >= len) {
      st.deficit[q] -= len;
      return static_cast<int>(q);
    }
    st.deficit[q] += kDwrrQuantum * cfg_.queues[q].weight;
    st.rr = (q + 1) % kQueues;
  }
  return -1;
}

std::uint32_t Switch::transmit(std::uint16_t e, Nanos now) {
  PortState& st = *ports_[e];
  if (!st.up) return 0;
  std::uint8_t paused = 0;
  if (st.pause) {
    paused = st.pause->paused(now);
    if (const std::uint8_t storms = st.pause->take_new_storms(); storms & ~st.storms_logged) {
      st.storms_logged |= storms;
      log::get().warn("port {}: PFC storm (priorities 0x{:02x} paused for {} ms without a break)",
                      e, storms, cfg_.pfc.watchdog.detection_ns / 1'000'000);
    }
  }
  if (!flush_pending(st)) return 0;
  std::vector<PacketPtr>& ready = ready_;
  if (st.tx_impairment->active()) st.tx_impairment->release(now, ready);
  std::uint32_t n = 0;
  while (n < kBurst && st.shaper.ready(now)) {
    const int q = pick(st, paused);
    if (q < 0) break;
    PacketPtr p = std::move(st.queues[q].front());
    st.queues[q].pop_front();
    unaccount(st, *p);
    st.shaper.charge(static_cast<std::uint32_t>(p->bytes.size()));
    st.counters.queues[q].tx_packets.add();
    st.counters.queues[q].tx_bytes.add(p->bytes.size());
    if (st.tx_impairment->active()) {
      st.tx_impairment->push(std::move(p), now, pool_, ready);
    } else {
      ready.push_back(std::move(p));
    }
    ++n;
  }
  send_frames(st, ready);
  return n;
}

std::uint16_t Switch::tx_burst(PortState& st, port::TxFrame* frames, std::uint16_t n) {
  const std::uint16_t sent = st.port->tx_burst(frames, n);
  for (std::uint16_t i = 0; i < sent; ++i) {
    st.counters.tx_packets.add();
    st.counters.tx_bytes.add(frames[i].length);
  }
  return sent;
}

void Switch::send_frames(PortState& st, std::vector<PacketPtr>& ready) {
  port::TxFrame frames[kSendBurst];
  std::size_t next = 0;
  while (next < ready.size()) {
    std::uint16_t n = 0;
    for (; next < ready.size() && n < std::size(frames); ++next) {
      PacketPtr& p = ready[next];
      port::TxFrame& f = frames[n];
      const auto len = static_cast<std::uint32_t>(p->bytes.size());
      if (st.port->tx_alloc(len, f)) {
        std::memcpy(f.room.data(), p->bytes.data(), len);
        f.length = len;
        ++n;
      } else {
        drop(st, Drop::kNoMbuf, p->priority);
      }
      pool_.put(std::move(p));
    }
    const std::uint16_t sent = st.pending.empty() ? tx_burst(st, frames, n) : 0;
    // What the port did not take waits, in order, for the next turn.
    st.pending.insert(st.pending.end(), frames + sent, frames + n);
  }
  ready.clear();
}

bool Switch::flush_pending(PortState& st) {
  if (st.pending.empty()) return true;
  const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(st.pending.size(), kSendBurst));
  const std::uint16_t sent = tx_burst(st, st.pending.data(), n);
  st.pending.erase(st.pending.begin(), st.pending.begin() + sent);
  return st.pending.empty();
}

void Switch::send_pfc(PortState& st) {
  // The MAC's own frame goes ahead of anything waiting; one the port
  // cannot take now stays pending (merged with later ones) and is tried
  // again next time.
  port::TxFrame f;
  if (!st.port->tx_alloc(wire::kMinFrameSize, f)) return;
  const pfc::PfcRequest& req = *st.pfc_pending;
  f.length = static_cast<std::uint32_t>(
      wire::build_pfc_frame(f.room, st.port->mac(), req.class_enable, req.class_time));
  if (st.port->tx_burst(&f, 1) == 1) {
    st.pfc_pending.reset();
  } else {
    st.port->tx_free(f);
  }
}

void Switch::write_stats(std::string& out) const {
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    const PortCounters& c = ports_[i]->counters;
    const std::string scope = "port" + std::to_string(i);
    auto line = [&](const std::string& s, std::string_view name, std::uint64_t v) {
      out += s;
      out += ' ';
      out += name;
      out += ' ';
      out += std::to_string(v);
      out += '\n';
    };
    line(scope, "link_up", c.link_up.get());
    line(scope, "rx_packets", c.rx_packets.get());
    line(scope, "rx_bytes", c.rx_bytes.get());
    line(scope, "tx_packets", c.tx_packets.get());
    line(scope, "tx_bytes", c.tx_bytes.get());
    line(scope, "ecn_marked", c.ecn_marked.get());
    c.drops.for_each([&](std::string_view name, std::uint64_t v) { line(scope, name, v); });
    c.pfc.for_each([&](const std::string& name, std::uint64_t v) { line(scope, name, v); });
    for (const auto* dir : {"rx", "tx"}) {
      const port::ImpairmentCounters& im = dir[0] == 'r' ? c.rx_impairment : c.tx_impairment;
      im.for_each([&](std::string_view name, std::uint64_t v) {
        // The switch has always called its drops losses (scripts/scenario.sh
        // and the fabric tests read rx_impair_lost).
        if (name == port::name(port::ImpairmentCounter::kDropped)) name = "lost";
        line(scope, std::string(dir) + "_impair_" + std::string(name), v);
      });
    }
    for (unsigned q = 0; q < kQueues; ++q) {
      const QueueCounters& qc = c.queues[q];
      const std::string qs = scope + ".q" + std::to_string(q);
      line(qs, "rx_bytes", qc.rx_bytes.get());
      line(qs, "tx_packets", qc.tx_packets.get());
      line(qs, "tx_bytes", qc.tx_bytes.get());
      line(qs, "depth", qc.depth.get());
      line(qs, "max_depth", qc.max_depth.get());
      line(qs, "ecn_marked", qc.ecn_marked.get());
      line(qs, "dropped", qc.dropped.get());
    }
  }
}

}  // namespace uroce::sw
