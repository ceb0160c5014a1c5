/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/host_switch.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "cm/mad.h"
#include "log/log.h"
#include "transport/random.h"
#include "verbs/limits.h"
#include "wire/arp.h"
#include "wire/classify.h"
#include "wire/ib_headers.h"
#include "wire/opcode.h"
#include "wire/roce_parser.h"
#include "wire/udp.h"

namespace uroce::daemon {

namespace {

// Frames one program may send per iteration: its share of a port burst,
// so that one busy program cannot crowd out the others.
constexpr std::uint32_t kTxBudget = 32;
static_assert(kTxBudget <= port::kMaxTxBurst);

using wire::kGsiQpn;

// Comm IDs remembered per program, at most (each connection has one).
constexpr std::size_t kMaxCommIds = 65536;

// A frame to a peer's QP 1 (a management datagram).
bool is_to_gsi(wire::ConstBytes f) {
  const wire::FrameClass c = wire::classify(f);
  const std::size_t bth = c.l4_offset() + wire::UdpHdr::kSize;
  return c.ip() && c.l4_proto == wire::ip_proto::kUdp && f.size() >= bth + wire::kBthSize &&
         wire::load_be24(f.data() + bth + 5) == kGsiQpn;
}

// A RoCEv2 frame (UDP to port 4791), as a group's datagrams are; the
// host stack's solicitations go to multicast MACs too.
bool is_roce_datagram(wire::ConstBytes f) {
  const wire::FrameClass c = wire::classify(f);
  return c.ip() && c.l4_proto == wire::ip_proto::kUdp &&
         f.size() >= c.l4_offset() + wire::UdpHdr::kSize &&
         wire::load_be16(f.data() + c.l4_offset() + 2) == wire::kRoceV2Port;
}

}  // namespace

Program::Program(int sock, pid_t pid, std::unique_ptr<port::ShmRegion> rings)
    : sock_(sock),
      pid_(pid),
      rings_(std::move(rings)),
      from_(rings_->ring(port::ShmRegion::Ring::kToDaemon)),
      to_(rings_->ring(port::ShmRegion::Ring::kToProgram)) {}

Program::~Program() = default;

HostSwitch::HostSwitch(const DeviceConfig& dc, port::Port& port, engine::EngineConfig ec)
    : cfg_(dc), port_(port), addresses_(ec.addresses), mac_(port.mac()) {
  ec.forwarder = this;
  engine_ = std::make_unique<engine::Engine>(port_, std::move(ec));
}

HostSwitch::~HostSwitch() = default;

Program* HostSwitch::attach(int sock, pid_t pid, std::string* error) {
  auto rings = port::ShmRegion::create(port::kShmSlots, port::kShmSlotSize, error);
  if (!rings) return nullptr;
  auto p = std::make_unique<Program>(sock, pid, std::move(rings));
  Program* raw = p.get();
  std::lock_guard lock(mu_);
  engine_->locked([&] { programs_.push_back(std::move(p)); });
  return raw;
}

void HostSwitch::detach(Program* p) {
  std::lock_guard lock(mu_);
  engine_->locked([&] {
    for (std::uint32_t q : p->qpns_) qpns_.erase(q);
    const auto it = std::find_if(programs_.begin(), programs_.end(),
                                 [p](const auto& owned) { return owned.get() == p; });
    if (it == programs_.end()) return;
    // What it sent before it went leaves, as a NIC sends what was posted:
    // its last ACKs and its DREQs. A ring's worth at most.
    for (std::uint32_t k = 0; k < p->from_.slots() / kTxBudget && pull_from(*p) > 0; ++k) {
    }
    forget_cm(*p);
    xrc_.forget(*p);
    std::size_t i = 0;
    p->counters_.for_each([&](std::string_view, std::uint64_t v) { retired_[i++] += v; });
    programs_.erase(it);
  });
}

std::uint32_t HostSwitch::alloc_qpn(Program& p) {
  // mu_ too: for_each_counter reads the program's QP count from the
  // stats thread.
  std::lock_guard lock(mu_);
  if (p.qpns_.size() >= verbs::kMaxQp) return 0;
  return engine_->locked([&] {
    for (;;) {
      const std::uint32_t q = transport::secure_random_qpn();
      if (qpns_.emplace(q, &p).second) {
        p.qpns_.push_back(q);
        return q;
      }
    }
  });
}

bool HostSwitch::free_qpn(Program& p, std::uint32_t qpn) {
  std::lock_guard lock(mu_);
  return engine_->locked([&] {
    const auto it = qpns_.find(qpn);
    if (it == qpns_.end() || it->second != &p) return false;
    qpns_.erase(it);
    std::erase(p.qpns_, qpn);
    xrc_.forget_qpn(p, qpn);  // an SRQ or a target QP of that number, if any
    return true;
  });
}

std::int64_t HostSwitch::open_xrc_domain(Program& p, int fd, int oflags) {
  // Asked before the engine is held: a file on a stuck mount stalls this
  // call only.
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return -EBADF;
  return engine_->locked([&] { return xrc_.open_domain(p, {st.st_dev, st.st_ino}, fd, oflags); });
}

bool HostSwitch::close_xrc_domain(Program& p, std::uint32_t domain) {
  return engine_->locked([&] { return xrc_.close_domain(p, domain); });
}

bool HostSwitch::add_xrc_srq(Program& p, std::uint32_t domain, std::uint32_t srqn) {
  return engine_->locked([&] { return owns(p, srqn) && xrc_.add_srq(p, domain, srqn); });
}

bool HostSwitch::remove_xrc_srq(Program& p, std::uint32_t srqn) {
  return engine_->locked([&] { return xrc_.remove_srq(p, srqn); });
}

int HostSwitch::open_xrc_target(Program& p, std::uint32_t* domain, std::uint32_t qpn, bool create) {
  return engine_->locked([&] {
    if (create && !owns(p, qpn)) return -EINVAL;
    return xrc_.open_target(p, domain, qpn, create);
  });
}

bool HostSwitch::close_xrc_target(Program& p, std::uint32_t qpn) {
  return engine_->locked([&] { return xrc_.close_target(p, qpn); });
}

bool HostSwitch::owns(const Program& p, std::uint32_t qpn) const {
  const auto it = qpns_.find(qpn);
  return it != qpns_.end() && it->second == &p;
}

void HostSwitch::set_addresses(std::vector<wire::IpAddr> addresses) {
  addresses_ = addresses;
  engine_->set_addresses(std::move(addresses));
}

bool HostSwitch::is_local(const wire::IpAddr& ip) const {
  return std::find(addresses_.begin(), addresses_.end(), ip) != addresses_.end();
}

void HostSwitch::deliver(Program& p, wire::ConstBytes frame) {
  if (p.to_.push(frame)) {
    p.counters_.inc(ProgramCounter::kRxFrames);
  } else {
    p.counters_.inc(ProgramCounter::kRxRingFull);
  }
}

void HostSwitch::set_cm_services(Program& p, const std::vector<std::uint64_t>& service_ids) {
  engine_->locked([&] {
    for (std::uint64_t sid : p.cm_services_) {
      const auto it = cm_services_.find(sid);
      if (it != cm_services_.end() && it->second == &p) cm_services_.erase(it);
    }
    p.cm_services_ = service_ids;
    p.cm_ = true;
    for (std::uint64_t sid : service_ids) cm_services_.emplace(sid, &p);
  });
}

bool HostSwitch::hung_up(const Program& p) {
  // A process that exited has closed its end already (exit closes its
  // descriptors before its parent can reap it), though the server may
  // not have dropped it yet: its ports are free, as the kernel frees a
  // process's rdma_cm ids when it closes the rdma_cm descriptor.
  pollfd pfd{p.sock(), POLLRDHUP, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

int HostSwitch::bind_cm_port(Program& p, std::uint32_t key, std::uint64_t service_id,
                             const wire::IpAddr& ip, unsigned flags) {
  using port::Port;
  return engine_->locked([&] {
    std::vector<CmBinding>& list = cm_ports_[service_id];
    // cma_check_port against the other programs (the program's own Cma
    // has judged its own ids); a port the program picked must be free.
    for (const CmBinding& cur : list) {
      if (cur.program == &p || hung_up(*cur.program)) continue;
      if (flags & Port::kCmBindEphemeral) return EADDRINUSE;
      if ((flags & Port::kCmBindReuseAddr) && (cur.flags & Port::kCmBindReuseAddr)) continue;
      if ((flags & Port::kCmBindAfOnly) && (cur.flags & Port::kCmBindAfOnly) &&
          ip.is_v4() != cur.ip.is_v4())
        continue;
      if ((flags & Port::kCmBindAny) || (cur.flags & Port::kCmBindAny)) return EADDRNOTAVAIL;
      if (ip == cur.ip) return EADDRINUSE;
    }
    const auto held = p.cm_ports_.find(key);
    if (held != p.cm_ports_.end() && held->second != service_id) unbind_cm_port_locked(p, key);
    const auto mine = std::find_if(list.begin(), list.end(), [&](const CmBinding& b) {
      return b.program == &p && b.key == key;
    });
    if (mine != list.end()) {
      mine->ip = ip;
      mine->flags = flags;
    } else {
      list.push_back({&p, key, ip, flags});
    }
    p.cm_ports_[key] = service_id;
    return 0;
  });
}

void HostSwitch::unbind_cm_port(Program& p, std::uint32_t key) {
  engine_->locked([&] { unbind_cm_port_locked(p, key); });
}

void HostSwitch::unbind_cm_port_locked(Program& p, std::uint32_t key) {
  const auto held = p.cm_ports_.find(key);
  if (held == p.cm_ports_.end()) return;
  const auto list = cm_ports_.find(held->second);
  if (list != cm_ports_.end()) {
    std::erase_if(list->second,
                  [&](const CmBinding& b) { return b.program == &p && b.key == key; });
    if (list->second.empty()) cm_ports_.erase(list);
  }
  p.cm_ports_.erase(held);
}

void HostSwitch::forget_cm(Program& p) {
  while (!p.cm_ports_.empty()) unbind_cm_port_locked(p, p.cm_ports_.begin()->first);
  for (std::uint64_t sid : p.cm_services_) {
    const auto it = cm_services_.find(sid);
    if (it != cm_services_.end() && it->second == &p) cm_services_.erase(it);
  }
  for (std::uint32_t id : p.comm_ids_) {
    const auto it = comm_ids_.find(id);
    if (it != comm_ids_.end() && it->second == &p) comm_ids_.erase(it);
  }
  p.comm_ids_.clear();
}

namespace {

// The MAD a frame to QP 1 carries, decoded; false for anything else.
bool mad_of(wire::ConstBytes frame, cm::Mad& mad) {
  wire::RocePacket pkt;
  if (wire::parse_roce_frame(frame, pkt) != wire::DropReason::kNone) return false;
  cm::MadError err;
  return cm::decode(pkt.payload, mad, err);
}

}  // namespace

void HostSwitch::learn_mad(Program& p, wire::ConstBytes frame) {
  cm::Mad mad;
  if (!mad_of(frame, mad)) return;
  p.cm_ = true;
  const std::uint32_t id = std::visit(
      [](const auto& m) -> std::uint32_t {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, cm::SidrReqMsg>) {
          return m.request_id;
        } else if constexpr (std::is_same_v<M, cm::SidrRepMsg>) {
          return 0;  // the requester's ID, not ours
        } else {
          return m.local_comm_id;
        }
      },
      mad.msg);
  if (id == 0) return;
  // Comm IDs are random and 32 bits wide: one taken by another program of
  // the host is as likely as a collision on one host's kernel CM.
  if (comm_ids_.emplace(id, &p).second) {
    // A program's table is bounded: past it, the oldest entries go (their
    // connections have long ended, or their MADs reach every program).
    if (p.comm_ids_.size() >= kMaxCommIds) {
      const std::uint32_t old = p.comm_ids_.front();
      p.comm_ids_.erase(p.comm_ids_.begin());
      if (const auto it = comm_ids_.find(old); it != comm_ids_.end() && it->second == &p)
        comm_ids_.erase(it);
    }
    p.comm_ids_.push_back(id);
  }
}

void HostSwitch::forward_mad(wire::ConstBytes frame) {
  cm::Mad mad;
  Program* to = nullptr;
  bool request = false;
  if (mad_of(frame, mad)) {
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          std::optional<std::uint32_t> owner;
          if constexpr (std::is_same_v<M, cm::ReqMsg> || std::is_same_v<M, cm::SidrReqMsg>) {
            request = true;
            if (const auto it = cm_services_.find(m.service_id); it != cm_services_.end())
              to = it->second;
          } else if constexpr (std::is_same_v<M, cm::SidrRepMsg>) {
            owner = m.request_id;
          } else {
            owner = m.remote_comm_id;
          }
          if (owner) {
            if (const auto it = comm_ids_.find(*owner); it != comm_ids_.end()) to = it->second;
          }
        },
        mad.msg);
  }
  if (to) {
    deliver(*to, frame);
    return;
  }
  if (request) {
    // Nobody listens: one connection manager of the host answers, with
    // the REJ (or SIDR_REP) for an unknown ServiceID the kernel's gives.
    for (const auto& p : programs_) {
      if (p->cm_) {
        deliver(*p, frame);
        return;
      }
    }
    return;
  }
  // A MAD whose connection no program claims (or that does not decode):
  // every CM hears it and keeps what is its own, or counts it.
  for (const auto& p : programs_)
    if (p->cm_) deliver(*p, frame);
}

bool HostSwitch::forward_roce(const wire::RocePacket& pkt, wire::ConstBytes frame) {
  if (pkt.bth.dest_qp == kGsiQpn) {
    forward_mad(frame);
    return true;
  }
  // A shared XRC target QP's request, to the program with its SRQ.
  if (Program* p = xrc_.route(pkt)) {
    deliver(*p, frame);
    return true;
  }
  const auto it = qpns_.find(pkt.bth.dest_qp);
  if (it == qpns_.end()) return false;
  deliver(*it->second, frame);
  return true;
}

void HostSwitch::forward_all(wire::ConstBytes frame) {
  for (const auto& p : programs_) deliver(*p, frame);
}

ProgramCounter HostSwitch::check(const Program& p, wire::ConstBytes f) const {
  const wire::FrameClass c = wire::classify(f);
  if (!c.valid() || f.size() > std::size_t{port_.mtu()} + c.l2_len)
    return ProgramCounter::kTxMalformed;
  if (std::memcmp(f.data() + 6, mac_.bytes.data(), mac_.bytes.size()) != 0)
    return ProgramCounter::kTxSpoofedSource;
  // PAUSE and PFC from a program's receive buffer (software PFC) are the
  // link's, whatever the VLAN.
  if (c.ether_type == wire::ether_type::kMacControl) return ProgramCounter::kCount;
  if (c.vid != cfg_.vlan_id) return ProgramCounter::kTxSpoofedSource;
  if (c.ether_type == wire::ether_type::kArp) {
    wire::ArpPacket arp;
    if (!wire::parse_arp_frame(f, arp)) return ProgramCounter::kTxMalformed;
    if (arp.op != wire::ArpOp::kRequest || !is_local(wire::IpAddr::from_v4(arp.sender_ip)) ||
        arp.sender_mac != mac_)
      return ProgramCounter::kTxSpoofedSource;
    return ProgramCounter::kCount;
  }
  if (!c.ip()) return ProgramCounter::kTxNotRoce;
  const std::uint8_t* l3 = f.data() + c.l3_offset();
  const wire::IpAddr src = c.ip_version == 4 ? wire::IpAddr::from_v4_bytes(l3 + 12)
                                             : wire::IpAddr::from_v6_bytes(l3 + 8);
  if (!is_local(src)) return ProgramCounter::kTxSpoofedSource;
  // Neighbour solicitations, to find the program's peers.
  if (c.ip_version == 6 && c.l4_proto == wire::ip_proto::kIcmpv6) return ProgramCounter::kCount;
  if (c.l4_proto != wire::ip_proto::kUdp) return ProgramCounter::kTxNotRoce;
  const std::size_t udp = c.l4_offset();
  const std::size_t bth = udp + wire::UdpHdr::kSize;
  if (f.size() < bth + wire::kBthSize || wire::load_be16(f.data() + udp + 2) != wire::kRoceV2Port)
    return ProgramCounter::kTxNotRoce;
  // A datagram says which QP sent it (DETH); it must be the program's.
  // RC and UC packets name no source QP: the peer's QPN and PSN are what
  // a forger would have to know.
  const wire::OpcodeInfo& op = wire::opcode_info(f[bth]);
  if (op.has(wire::ExtHeader::kDeth)) {
    const std::size_t deth = bth + op.offset_of(wire::ExtHeader::kDeth);
    if (f.size() < deth + 8) return ProgramCounter::kTxMalformed;
    const std::uint32_t src_qp = wire::load_be24(f.data() + deth + 5);
    if (src_qp != kGsiQpn && !owns(p, src_qp)) return ProgramCounter::kTxSpoofedQpn;
  }
  return ProgramCounter::kCount;
}

std::uint32_t HostSwitch::pull(engine::Nanos) {
  const std::size_t n = programs_.size();
  if (n == 0) return 0;
  std::uint32_t taken = 0;
  for (std::size_t k = 0; k < n; ++k) taken += pull_from(*programs_[(rr_ + k) % n]);
  rr_ = (rr_ + 1) % n;
  return taken;
}

std::uint32_t HostSwitch::pull_from(Program& p) {
  port::TxFrame batch[kTxBudget];
  {
    const std::uint64_t corrupt = p.from_.corrupt();
    const std::uint32_t avail = std::min(p.from_.available(), kTxBudget);
    if (p.from_.corrupt() != corrupt) p.counters_.inc(ProgramCounter::kTxRingCorrupt);
    if (avail == 0) return 0;
    std::uint16_t m = 0;
    std::uint32_t i = 0;
    for (; i < avail; ++i) {
      const wire::ConstBytes slot = p.from_.peek(i);
      if (slot.empty()) {
        p.counters_.inc(ProgramCounter::kTxMalformed);
        continue;
      }
      port::TxFrame& f = batch[m];
      if (!port_.tx_alloc(static_cast<std::uint32_t>(slot.size()), f)) {
        p.counters_.inc(ProgramCounter::kTxNoBuffer);
        break;  // the rest waits in the ring
      }
      // Copied first, checked after: the program may rewrite its slot
      // meanwhile, but not our copy.
      std::memcpy(f.room.data(), slot.data(), slot.size());
      f.length = static_cast<std::uint32_t>(slot.size());
      const wire::ConstBytes copy(f.room.data(), f.length);
      if (const ProgramCounter why = check(p, copy); why != ProgramCounter::kCount) {
        p.counters_.inc(why);
        port_.tx_free(f);
        continue;
      }
      // A datagram to a group: the other programs' members hear it too
      // (each program's engine loops it back to its own).
      if ((copy[0] & 1) != 0 && is_roce_datagram(copy)) {
        for (const auto& other : programs_)
          if (other.get() != &p) deliver(*other, copy);
      }
      f.l2_len = static_cast<std::uint8_t>(wire::classify(copy).l2_len);
      if (is_to_gsi(copy)) learn_mad(p, copy);
      ++m;
    }
    p.from_.pop(i);
    p.counters_.inc(ProgramCounter::kTxFrames, m);
    if (m > 0) engine_->send_frames(batch, m);
    return m;
  }
}

void HostSwitch::for_each_counter(const CounterFn& fn) {
  const engine::EngineCounters& c = engine_->counters();
  c.for_each([&](std::string_view name, std::uint64_t v) { fn("engine", name, v); });
  c.for_each_drop([&](std::string_view name, std::uint64_t v) { fn("drop", name, v); });
  port_.for_each_stat([&](std::string_view name, std::uint64_t v) { fn("nic", name, v); });
  engine_->pfc_counters().for_each(
      [&](const std::string& name, std::uint64_t v) { fn("pfc", name, v); });
  std::lock_guard lock(mu_);
  std::array<std::uint64_t, ProgramCounters::kSize> total = retired_;
  for (const auto& p : programs_) {
    const std::string scope = "process:" + std::to_string(p->pid());
    fn(scope, "qps", p->qp_count());
    std::size_t i = 0;
    p->counters().for_each([&](std::string_view name, std::uint64_t v) {
      fn(scope, name, v);
      total[i++] += v;
    });
  }
  fn("programs", "attached", programs_.size());
  for (std::size_t i = 0; i < total.size(); ++i)
    fn("programs", name(static_cast<ProgramCounter>(i)), total[i]);
}

}  // namespace uroce::daemon
