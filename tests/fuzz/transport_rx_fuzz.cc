/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for the transport's receive path: Qp::receive, the
// responder (its R_Key, VA and length checks, WRITEs, READs, atomics,
// SENDs into posted receives) and the completer (ACKs, NAKs, READ
// responses, atomic ACKs against posted WRs), for an RC, UC or UD QP, an
// XRC target QP or an XRC initiator QP over lib/verbs' real MrTable. The
// target's domain has two SRQs of this memory's PD, a number of another
// domain's and numbers of none; its requests name one in their XRCETH.
// The initiator's WRs name one of the same numbers, or any. The peer's
// memory is three pages between two
// PROT_NONE guard pages, with regions that end at the guards, a
// zero-based one, one of another PD and a deregistered key; the QP's own
// SGEs lie in a page between guards too.
//
// Built with ASan and UBSan. Crashes: a touch of a guard page; a write to
// bytes no region let the peer write (or no SGE covered); a READ response
// or any sent payload read from bytes no region let the peer read; a
// packet the QP sends that lib/wire cannot build or would itself refuse.
//
// The input: a byte of QP setup (type, path MTU, access flags), a byte
// each for its responder's and requester's READ/atomic depths, then
// actions until the input ends, each a byte and its fields (fuzz_input.h's
// packet encoding for packets):
//   0-2 a packet from the peer      3 post a receive (a target: to an SRQ;
//                                     an initiator has no receive queue)
//   4   post a send WR (not a target; an initiator's names its SRQ last)
//   5   let the QP transmit, poll the CQs
//   6   advance time, run timers    7 modify the QP (any state, any mask)

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz/fuzz_input.h"
#include "transport/cq.h"
#include "transport/qp.h"
#include "transport/recv_queue.h"
#include "verbs/mr_table.h"
#include "wire/roce_parser.h"

using namespace uroce;
using namespace uroce::fuzz;
using transport::Qp;
using transport::QpAttr;
using transport::QpState;
namespace acc = transport::access;

namespace {

constexpr std::uint32_t kQpn = 0x000111;
constexpr std::uint32_t kPeerQpn = 0x000222;
constexpr std::uint32_t kRqPsn = 0x000100;  // the PSN our responder expects first
constexpr std::uint32_t kSqPsn = 0xFFFFF0;  // our requester's first PSN, near the wrap
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::size_t kPage = 4096;
constexpr std::uint8_t kPattern = 0xA5;
constexpr std::uint32_t kSrqA = 0x0A0A01;
constexpr std::uint32_t kSrqB = 0x0B0B02;
constexpr std::uint32_t kForeignSrq = 0x0C0C03;  // an SRQ of another domain

// `pages` pages between two PROT_NONE guard pages.
std::uint8_t* guarded(std::size_t pages) {
  auto* m = static_cast<std::uint8_t*>(mmap(nullptr, (pages + 2) * kPage, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  FUZZ_CHECK(m != MAP_FAILED);
  FUZZ_CHECK(mprotect(m, kPage, PROT_NONE) == 0);
  FUZZ_CHECK(mprotect(m + (pages + 1) * kPage, kPage, PROT_NONE) == 0);
  return m + kPage;
}

// The peer's view of this host's memory, and the QP's own.
struct Memory {
  verbs::MrTable table{[] {}};
  // Remote: page 0 remote-readable, its first 64 bytes also writable
  // (a region against the leading guard); page 1 everything; page 2 only
  // its last 1000 bytes, zero-based (IOVA 0) and against the trailing
  // guard. Page 0 past 64 and page 2 before its tail: never written.
  std::uint8_t* remote = guarded(3);
  // Local: SGEs in page 0; page 1 is never touched.
  std::uint8_t* local = guarded(2);
  std::vector<std::uint32_t> rkeys;
  std::vector<std::uint64_t> vas;
  std::uint32_t lkey = 0;

  Memory() {
    auto reg = [&](verbs::PdId pd, std::uint8_t* at, std::size_t len, std::uint64_t iova,
                   unsigned flags) {
      verbs::MrInfo mr;
      FUZZ_CHECK(table.reg(pd, at, len, iova, flags, &mr) == 0);
      return mr.rkey;
    };
    const auto addr = [](const std::uint8_t* p) { return reinterpret_cast<std::uint64_t>(p); };
    std::uint8_t* p0 = remote;
    std::uint8_t* p1 = remote + kPage;
    std::uint8_t* p2 = remote + 2 * kPage;
    const unsigned all =
        acc::kLocalWrite | acc::kRemoteWrite | acc::kRemoteRead | acc::kRemoteAtomic;
    rkeys.push_back(reg(1, p1, kPage, addr(p1), all));
    rkeys.push_back(reg(1, p0, 64, addr(p0), acc::kLocalWrite | acc::kRemoteWrite));
    rkeys.push_back(reg(1, p0, kPage, addr(p0), acc::kRemoteRead));
    rkeys.push_back(reg(1, p2 + kPage - 1000, 1000, 0, all));
    rkeys.push_back(reg(2, p1, kPage, addr(p1), all));  // another PD's
    const std::uint32_t gone = reg(1, p1, kPage, addr(p1), all);
    FUZZ_CHECK(table.dereg(gone) == 0);
    rkeys.push_back(gone);
    // VA bases: each region's start and end, and around the guards.
    vas = {addr(p1), addr(p0), 0, 1000 - 8, addr(p1) + kPage - 8, addr(p0) - 8, addr(p2)};
    lkey = reg(1, local, kPage, addr(local), acc::kLocalWrite);
  }

  void reset() {
    std::memset(remote, kPattern, 3 * kPage);
    std::memset(local, kPattern, 2 * kPage);
  }
  // Bytes nobody may write still hold the pattern.
  void check_untouched() const {
    auto clean = [](const std::uint8_t* p, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) FUZZ_CHECK(p[i] == kPattern);
    };
    clean(remote + 64, kPage - 64);
    clean(remote + 2 * kPage, kPage - 1000);
    clean(local + kPage, kPage);
  }
  // May the peer be sent these bytes? Remote-readable memory, or the
  // QP's own SGEs (SEND, WRITE payloads), or not this memory at all
  // (inline data in the QP).
  bool readable(const std::uint8_t* p, std::size_t n) const {
    auto inside = [&](const std::uint8_t* lo, std::size_t len) {
      return p >= lo && p + n <= lo + len;
    };
    auto overlaps = [&](const std::uint8_t* lo, std::size_t len) {
      return p < lo + len && p + n > lo;
    };
    if (!overlaps(remote - kPage, 5 * kPage) && !overlaps(local - kPage, 4 * kPage)) return true;
    return inside(remote, 2 * kPage) || inside(remote + 3 * kPage - 1000, 1000) ||
           inside(local, kPage);
  }
};

Memory& memory() {
  static Memory m;
  return m;
}

// Takes what the QP sends and checks it as the engine would frame it.
class CheckingSink : public transport::TxSink {
 public:
  CheckingSink(const Memory& mem, std::uint32_t mtu) : mem_(mem), mtu_(mtu) {}
  bool transmit(const transport::TxPacket& p) override {
    FUZZ_CHECK(p.route != nullptr);
    FUZZ_CHECK(p.payload_len <= mtu_);
    std::size_t sum = 0;
    for (std::uint32_t i = 0; i < p.payload_segs; ++i) {
      FUZZ_CHECK(mem_.readable(p.payload[i].data(), p.payload[i].size()));
      sum += p.payload[i].size();
    }
    FUZZ_CHECK(sum == p.payload_len);
    const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
    FUZZ_CHECK(info.valid());
    frame_.resize(wire::roce_frame_length(*p.route, info, p.payload_len));
    FUZZ_CHECK(wire::build_roce_frame(frame_, *p.route, p.bth, p.ext,
                                      std::span(p.payload.data(), p.payload_segs),
                                      1) == frame_.size());
    wire::RocePacket parsed;
    FUZZ_CHECK(wire::parse_roce_frame(frame_, parsed) == wire::DropReason::kNone);
    return true;
  }

 private:
  const Memory& mem_;
  std::uint32_t mtu_;
  std::vector<std::uint8_t> frame_;
};

// The XRC target's domain: two SRQs, each with its CQ, in the PD the
// peer's keys belong to.
class Domain : public transport::XrcDomain {
 public:
  explicit Domain(transport::MemoryAccess* memory) : memory_(memory) {}
  Lookup find_srq(std::uint32_t srqn, transport::XrcSrq* out) override {
    if (srqn == kForeignSrq) return Lookup::kOtherDomain;
    Srq* s = srqn == kSrqA ? &a : srqn == kSrqB ? &b : nullptr;
    if (!s) return Lookup::kNoSuchSrq;
    *out = {&s->rq, &s->cq, memory_};
    return Lookup::kFound;
  }
  struct Srq {
    transport::RecvQueue rq{8, 2};
    transport::Cq cq{16};
  };
  Srq a, b;

 private:
  transport::MemoryAccess* memory_;
};

wire::RoceRoute route(bool to_peer) {
  wire::RoceRoute r;
  const std::uint8_t us = 1, peer = 2;
  r.src_mac = {{0x02, 0, 0, 0, 0, to_peer ? us : peer}};
  r.dst_mac = {{0x02, 0, 0, 0, 0, to_peer ? peer : us}};
  r.src_ip = wire::IpAddr::from_v4(to_peer ? 0x0A000001 : 0x0A000002);
  r.dst_ip = wire::IpAddr::from_v4(to_peer ? 0x0A000002 : 0x0A000001);
  r.udp_sport = wire::roce_udp_sport(kQpn, kPeerQpn);
  return r;
}

transport::Sge sge(Input& in, std::uint32_t lkey) {
  const std::uint32_t off = in.u16() % kPage;
  const std::uint32_t len = in.u16() % (kPage - off + 1);
  const std::uint8_t sel = in.u8();
  return {reinterpret_cast<std::uint64_t>(memory().local + off), len,
          sel >= kRaw ? in.u32() : lkey};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Memory& mem = memory();
  mem.reset();
  Input in(data, size);

  // The QP: type, path MTU, the access it grants, its atomic depths.
  // Bits 0-1: RC, UC, UD, XRC target; 2-4: path MTU 256 << (n % 5), and
  // with RC, n of 5 to 7 (256 to 1024) makes an XRC initiator instead;
  // 5-7: remote write, read, atomic access withheld.
  const std::uint8_t setup = in.u8();
  const unsigned mtu_bits = (setup >> 2) & 7;
  const transport::QpType type = (setup & 3) == 1   ? transport::QpType::kUc
                                 : (setup & 3) == 2 ? transport::QpType::kUd
                                 : (setup & 3) == 3 ? transport::QpType::kXrcTgt
                                 : mtu_bits >= 5    ? transport::QpType::kXrcIni
                                                    : transport::QpType::kRc;
  const bool tgt = type == transport::QpType::kXrcTgt;
  const bool ini = type == transport::QpType::kXrcIni;
  const auto mtu = static_cast<wire::Mtu>(1 + mtu_bits % 5);
  const unsigned access = (setup & 0x20 ? 0u : acc::kRemoteWrite) |
                          (setup & 0x40 ? 0u : acc::kRemoteRead) |
                          (setup & 0x80 ? 0u : acc::kRemoteAtomic);
  verbs::PdMemory pd(mem.table, 1);
  pd.set_qpn(kQpn);
  transport::Cq scq(16), rcq(16);
  Domain domain(&pd);
  transport::QpInit init;
  init.type = type;
  init.qpn = kQpn;
  init.max_send_wr = 8;
  init.max_recv_wr = 8;
  init.max_send_sge = 2;
  init.max_recv_sge = 2;
  init.max_inline_data = 64;
  init.send_cq = &scq;
  init.recv_cq = &rcq;
  init.memory = &pd;
  init.port_mtu = mtu;
  // An RC QP offers selective repeat for inputs of odd length: no byte of
  // the input decides it, so the corpus's inputs keep their meaning.
  init.selective_repeat = (size & 1) != 0;
  if (tgt) {
    // As lib/verbs makes one: no queues, CQs or memory of its own.
    init.max_send_wr = init.max_recv_wr = init.max_send_sge = init.max_recv_sge = 0;
    init.max_inline_data = 0;
    init.send_cq = init.recv_cq = nullptr;
    init.memory = nullptr;
    init.xrc = &domain;
  }
  if (ini) {
    // As lib/verbs makes one: a send queue, and no receive queue or CQ.
    init.max_recv_wr = init.max_recv_sge = 1;
    init.recv_cq = nullptr;
  }
  auto qp = std::make_unique<Qp>(init);
  const wire::RoceRoute to_peer = route(true), from_peer = route(false);
  const wire::RouteTemplate to_peer_headers(to_peer);
  {
    namespace m = transport::attr_mask;
    const bool rc = type == transport::QpType::kRc, ud = type == transport::QpType::kUd;
    const bool requester = rc || ini;  // acknowledged sends
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qp_access_flags = access;
    a.qkey = kQkey;
    FUZZ_CHECK(qp->modify(a,
                          m::kState | m::kPkeyIndex | m::kPort | (ud ? m::kQkey : m::kAccessFlags),
                          0) == 0);
    a.qp_state = QpState::kRtr;
    a.route = to_peer;
    a.path_mtu = mtu;
    a.dest_qp_num = kPeerQpn;
    a.rq_psn = kRqPsn;
    a.max_dest_rd_atomic = static_cast<std::uint8_t>(1 + in.u8() % 16);
    a.min_rnr_timer = 1;
    FUZZ_CHECK(qp->modify(a,
                          ud ? m::kState
                             : m::kState | m::kAv | m::kPathMtu | m::kDestQpn | m::kRqPsn |
                                   (rc || tgt ? m::kMaxDestRdAtomic | m::kMinRnrTimer : 0),
                          0) == 0);
    a.qp_state = QpState::kRts;
    a.sq_psn = kSqPsn;
    a.timeout = 1;  // 8 us: timeouts and retries within the input's time
    a.retry_cnt = 2;
    a.rnr_retry = 1;
    a.max_rd_atomic = static_cast<std::uint8_t>(1 + in.u8() % 16);
    FUZZ_CHECK(
        qp->modify(
            a,
            m::kState | m::kSqPsn |
                (requester ? m::kTimeout | m::kRetryCnt | m::kRnrRetry | m::kMaxQpRdAtomic : 0) |
                (tgt ? m::kTimeout : 0),
            0) == 0);
  }

  Targets t;
  t.qpns = {kQpn, kQpn, kQpn, 0x000999};
  t.psn_base = kRqPsn;
  t.response_psn_base = kSqPsn;
  t.keys = mem.rkeys;
  t.addresses = mem.vas;
  t.qkey = kQkey;
  t.max_payload = wire::mtu_bytes(mtu);
  t.srqns = {kSrqA, kSrqB, kForeignSrq, 0x000777};
  CheckingSink sink(mem, wire::mtu_bytes(mtu));
  transport::Nanos now = 1'000'000;
  std::uint64_t wr_id = 0;
  transport::Wc wc[16];

  while (!in.empty()) {
    namespace act = transport_action;
    switch (const std::uint8_t a = in.u8() % 8; a < act::kPostRecv ? act::kPacket : a) {
      case act::kPacket: {
        const Packet p = read_packet(in, t);
        const auto f = frame_of(p, from_peer);
        wire::RocePacket pkt;
        // What the parser refuses (a pad where none may be) never reaches
        // a QP; the engine drops it first.
        if (wire::parse_roce_frame(f, pkt) == wire::DropReason::kNone && pkt.bth.dest_qp == kQpn)
          qp->receive(pkt, now);
        break;
      }
      case act::kPostRecv: {
        transport::RecvWr r;
        r.wr_id = ++wr_id;
        r.num_sge = in.u8() % 3;
        for (std::uint32_t i = 0; i < r.num_sge; ++i) r.sg_list[i] = sge(in, mem.lkey);
        if (tgt)
          (in.u8() & 1 ? domain.b : domain.a).rq.post(r);
        else if (!ini)  // verbs gives an initiator no ibv_post_recv
          qp->post_recv(r);
        break;
      }
      case act::kPostSend: {
        transport::SendWr w;
        w.wr_id = ++wr_id;
        w.opcode = static_cast<transport::WrOpcode>(in.u8() % 10);
        w.send_flags = in.u8() & 0x0F;
        w.num_sge = in.u8() % 3;
        for (std::uint32_t i = 0; i < w.num_sge; ++i) w.sg_list[i] = sge(in, mem.lkey);
        w.imm_data = in.u32();
        w.invalidate_rkey = in.u32();
        w.remote_addr = in.u64();
        w.rkey = in.u32();
        w.compare_add = in.u64();
        w.swap = in.u64();
        w.ud = {&to_peer_headers, kPeerQpn, kQkey};
        if (ini) {
          const std::uint8_t sel = in.u8();
          w.xrc_remote_srqn = sel >= kRaw ? in.u24() : t.srqns[sel % t.srqns.size()];
        }
        if (!tgt) qp->post_send(w);  // a target has no send queue (verbs refuses)
        break;
      }
      case act::kTransmit:
        qp->transmit(sink, 1 + in.u8() % 64, now);
        while (scq.poll(wc, 16) > 0) {
        }
        while (rcq.poll(wc, 16) > 0) {
        }
        while (domain.a.cq.poll(wc, 16) > 0 || domain.b.cq.poll(wc, 16) > 0) {
        }
        break;
      case act::kTime: {
        now += std::uint64_t{in.u16()} * 1000;
        const transport::Nanos d = qp->next_deadline();
        if (d != 0 && d <= now) qp->on_timer(now);
        break;
      }
      default: {
        QpAttr a = qp->attr();
        a.qp_state = static_cast<QpState>(in.u8() % 7);
        qp->modify(a, in.u32() & 0x1FFFFF, now);
        break;
      }
    }
  }
  // Whatever is left to send goes out (and is checked); then the timers.
  for (int i = 0; i < 4; ++i) {
    qp->transmit(sink, 256, now);
    now += 100'000;
    const transport::Nanos d = qp->next_deadline();
    if (d != 0 && d <= now) qp->on_timer(now);
  }
  while (scq.poll(wc, 16) > 0) {
  }
  while (rcq.poll(wc, 16) > 0) {
  }
  while (domain.a.cq.poll(wc, 16) > 0 || domain.b.cq.poll(wc, 16) > 0) {
  }
  qp.reset();
  mem.check_untouched();
  return 0;
}
