/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/host_switch.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "log/log.h"
#include "transport/random.h"
#include "verbs/limits.h"
#include "wire/arp.h"
#include "wire/classify.h"
#include "wire/ib_headers.h"
#include "wire/opcode.h"
#include "wire/udp.h"

namespace uroce::daemon {

namespace {

// Frames one program may send per iteration: its share of a port burst,
// so that one busy program cannot crowd out the others.
constexpr std::uint32_t kTxBudget = 32;
static_assert(kTxBudget <= port::kMaxTxBurst);

constexpr std::uint32_t kGsiQpn = 1;

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
    if (it != programs_.end()) programs_.erase(it);
  });
}

std::uint32_t HostSwitch::alloc_qpn(Program& p) {
  if (p.qpns_.size() >= verbs::kMaxQp) return 0;
  // mu_ too: for_each_counter reads the program's QP count from the
  // stats thread.
  std::lock_guard lock(mu_);
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
    return true;
  });
}

bool HostSwitch::owns(const Program& p, std::uint32_t qpn) const {
  const auto it = qpns_.find(qpn);
  return it != qpns_.end() && it->second == &p;
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

bool HostSwitch::forward_roce(std::uint32_t dest_qp, wire::ConstBytes frame) {
  if (dest_qp == kGsiQpn) {
    // Management datagrams: every program's QP 1 hears them, and its
    // connection manager keeps what names its own connections.
    for (const auto& p : programs_) deliver(*p, frame);
    return !programs_.empty();
  }
  const auto it = qpns_.find(dest_qp);
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
  port::TxFrame batch[kTxBudget];
  for (std::size_t k = 0; k < n; ++k) {
    Program& p = *programs_[(rr_ + k) % n];
    const std::uint64_t corrupt = p.from_.corrupt();
    const std::uint32_t avail = std::min(p.from_.available(), kTxBudget);
    if (p.from_.corrupt() != corrupt) p.counters_.inc(ProgramCounter::kTxRingCorrupt);
    if (avail == 0) continue;
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
      ++m;
    }
    p.from_.pop(i);
    p.counters_.inc(ProgramCounter::kTxFrames, m);
    taken += m;
    if (m > 0) engine_->send_frames(batch, m);
  }
  rr_ = (rr_ + 1) % n;
  return taken;
}

void HostSwitch::for_each_counter(const CounterFn& fn) {
  const engine::EngineCounters& c = engine_->counters();
  c.for_each([&](std::string_view name, std::uint64_t v) { fn("engine", name, v); });
  c.for_each_drop([&](std::string_view name, std::uint64_t v) { fn("drop", name, v); });
  engine_->pfc_counters().for_each(
      [&](const std::string& name, std::uint64_t v) { fn("pfc", name, v); });
  std::lock_guard lock(mu_);
  for (const auto& p : programs_) {
    const std::string scope = "process:" + std::to_string(p->pid());
    fn(scope, "qps", p->qp_count());
    p->counters().for_each([&](std::string_view name, std::uint64_t v) { fn(scope, name, v); });
  }
}

}  // namespace uroce::daemon
