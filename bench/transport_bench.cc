/* SPDX-License-Identifier: BSD-3-Clause */
// lib/transport benchmark: requester -> responder -> completer on one core,
// no I/O. Packets pass from one QP to the other in memory (the payload is
// copied once, as into a NIC's buffer), so the numbers are the transport's
// own cost per packet and per byte; memcpy of the same bytes is printed
// beside them as the ceiling. Also: bytes of state per QP.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "cc/qp_congestion.h"
#include "transport/qp.h"

using namespace uroce;
using namespace uroce::transport;
using Clock = std::chrono::steady_clock;

namespace {

constexpr unsigned kAll =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

// One registered buffer per side is enough: keys index a tiny table.
class FlatMemory : public MemoryAccess {
 public:
  std::uint32_t reg(std::uint8_t* p, std::size_t n) {
    mrs_.push_back({p, n});
    return static_cast<std::uint32_t>(mrs_.size());
  }
  MemRef local(std::uint32_t k, std::uint64_t a, std::uint64_t n, unsigned) override {
    return check(k, a, n);
  }
  MemRef remote(std::uint32_t k, std::uint64_t a, std::uint64_t n, unsigned) override {
    return check(k, a, n);
  }
  bool invalidate(std::uint32_t, bool) override { return false; }
  bool bind_mw(const transport::MwBind&) override { return false; }

 private:
  MemRef check(std::uint32_t k, std::uint64_t a, std::uint64_t n) {
    if (k == 0 || k > mrs_.size()) return {nullptr, MemError::kBadKey};
    const auto& [p, len] = mrs_[k - 1];
    const auto base = reinterpret_cast<std::uint64_t>(p);
    if (a < base || a + n > base + len) return {nullptr, MemError::kBounds};
    return {reinterpret_cast<std::uint8_t*>(a), MemError::kNone};
  }
  std::vector<std::pair<std::uint8_t*, std::size_t>> mrs_;
};

// Hands packets to the peer QP: headers as parsed fields, payload copied
// into a ring of packet buffers.
class Wire : public TxSink {
 public:
  explicit Wire(const wire::RoceRoute& from) : from_(from), bufs_(256) {
    for (auto& b : bufs_) b.resize(4096);
  }
  bool transmit(const TxPacket& p) override {
    if (q_.size() == bufs_.size()) return false;
    auto& buf = bufs_[(head_ + q_.size()) % bufs_.size()];
    std::size_t off = 0;
    for (std::uint32_t i = 0; i < p.payload_segs; ++i) {
      std::memcpy(buf.data() + off, p.payload[i].data(), p.payload[i].size());
      off += p.payload[i].size();
    }
    wire::RocePacket pkt;
    pkt.bth = p.bth;
    pkt.info = &wire::opcode_info(p.bth.opcode);
    pkt.ext = p.ext;
    pkt.src_ip = from_.src_ip;
    pkt.dst_ip = from_.dst_ip;
    pkt.payload = wire::ConstBytes(buf.data(), off);
    q_.push_back(pkt);
    ++packets;
    return true;
  }
  void deliver(Qp& to, Nanos now) {
    while (!q_.empty()) {
      to.receive(q_.front(), now);
      q_.pop_front();
      head_ = (head_ + 1) % bufs_.size();
    }
  }
  std::uint64_t packets = 0;

 private:
  const wire::RoceRoute& from_;
  std::vector<std::vector<std::uint8_t>> bufs_;
  std::deque<wire::RocePacket> q_;
  std::size_t head_ = 0;
};

struct Result {
  double gbps;
  double mpps;
};

// With `gate`, the sender's requests pass the gate (DCQCN's pacer) first.
Result run(WrOpcode op, std::uint32_t size, TxGate* gate = nullptr) {
  FlatMemory mem_a, mem_b;
  std::vector<std::uint8_t> src(std::max<std::uint32_t>(size, 8), 0x5A), dst(src.size());
  const auto lk = mem_a.reg(src.data(), src.size());
  const auto rk = mem_b.reg(dst.data(), dst.size());
  Cq scq(4096), rcq(4096), bscq(16), brcq(4096);
  auto make = [&](std::uint32_t qpn, MemoryAccess& m, Cq& s, Cq& r, TxGate* g) {
    QpInit init;
    init.gate = g;
    init.qpn = qpn;
    init.max_send_wr = 256;
    init.max_recv_wr = 256;
    init.send_cq = &s;
    init.recv_cq = &r;
    init.memory = &m;
    return std::make_unique<Qp>(init);
  };
  auto a = make(0x11, mem_a, scq, rcq, gate);
  auto b = make(0x22, mem_b, bscq, brcq, nullptr);
  wire::RoceRoute ra, rb;
  ra.src_ip = rb.dst_ip = wire::IpAddr::from_v4(0x0A000001);
  ra.dst_ip = rb.src_ip = wire::IpAddr::from_v4(0x0A000002);
  using namespace attr_mask;
  for (auto [q, route, peer] : {std::tuple{a.get(), &ra, 0x22u}, std::tuple{b.get(), &rb, 0x11u}}) {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = kAll;
    q->modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0);
    at.qp_state = QpState::kRtr;
    at.route = *route;
    at.path_mtu = wire::Mtu::k4096;
    at.dest_qp_num = peer;
    at.max_dest_rd_atomic = 16;
    q->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer, 0);
    at.qp_state = QpState::kRts;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 16;
    q->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0);
  }
  Wire ab(ra), ba(rb);

  SendWr wr;
  wr.opcode = op;
  wr.num_sge = 1;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()), size, lk};
  wr.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  wr.rkey = rk;
  RecvWr rwr;
  rwr.num_sge = 1;
  rwr.sg_list[0] = {reinterpret_cast<std::uint64_t>(dst.data()), size, rk};

  std::uint64_t done = 0, bytes = 0, posted = 0;
  Wc wcs[64];
  const auto start = Clock::now();
  auto now = start;
  const bool send = op == WrOpcode::kSend;
  do {
    for (int k = 0; k < 64; ++k) {
      wr.send_flags = (posted % 16 == 15) ? send_flags::kSignaled : 0;
      if (send && b->post_recv(rwr) != 0) break;
      if (a->post_send(wr) != 0) break;
      ++posted;
    }
    for (int k = 0; k < 8; ++k) {
      a->transmit(ab, 32, 0);
      ab.deliver(*b, 0);
      b->transmit(ba, 32, 0);
      ba.deliver(*a, 0);
    }
    for (std::uint32_t n; (n = scq.poll(wcs, 64)) > 0;) done += 16 * n;
    brcq.poll(wcs, 64);
    while (brcq.poll(wcs, 64) > 0) {
    }
    now = Clock::now();
  } while (now - start < std::chrono::milliseconds(400));
  bytes = done * size;
  const double secs = std::chrono::duration<double>(now - start).count();
  return {bytes / secs / 1e9, ab.packets / secs / 1e6};
}

double memcpy_gbps(std::size_t size) {
  std::vector<std::uint8_t> a(size, 1), b(size);
  std::uint64_t n = 0;
  const auto start = Clock::now();
  auto now = start;
  do {
    for (int i = 0; i < 256; ++i) {
      std::memcpy(b.data(), a.data(), size);
      a[i % size] = b[(i * 7) % size];
    }
    n += 256;
    now = Clock::now();
  } while (now - start < std::chrono::milliseconds(200));
  return n * size / std::chrono::duration<double>(now - start).count() / 1e9;
}

}  // namespace

int main() {
  std::printf("In-memory RC, one core, path MTU 4096: requester -> responder -> completer\n");
  std::printf("%-10s %8s %12s %12s %14s\n", "operation", "size", "GB/s", "Mpkt/s", "memcpy GB/s");
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kSend}) {
    for (std::uint32_t size : {64u, 4096u, 65536u}) {
      const Result r = run(op, size);
      std::printf("%-10s %8u %12.2f %12.2f %14.2f\n", op == WrOpcode::kRdmaWrite ? "WRITE" : "SEND",
                  size, r.gbps, r.mpps, memcpy_gbps(size));
    }
  }
  // DCQCN's pacer on a QP that no CNP has limited: the cost of having
  // congestion control enabled when the fabric is not congested.
  std::printf("\nDCQCN enabled, the QP not limited (64 B WRITE, best of 5 runs):\n");
  cc::DcqcnParams params;
  cc::NotificationPoint np(params);
  cc::Counters counters;
  cc::QpCongestion gate(params, 100'000'000'000, true, true, np, counters, [] {});
  double without = 0, with = 0;
  for (int i = 0; i < 5; ++i) {
    without = std::max(without, run(WrOpcode::kRdmaWrite, 64).mpps);
    with = std::max(with, run(WrOpcode::kRdmaWrite, 64, &gate).mpps);
  }
  std::printf("%-28s %8.2f Mpkt/s\n%-28s %8.2f Mpkt/s (%.1f %%)\n", "without a pacer", without,
              "with DCQCN's pacer", with, (with / without - 1) * 100);

  FlatMemory m;
  Cq cq(16);
  // A WQE is as large as the QP's caps: one SGE and no inline data (the
  // verbs' minimum, perftest's bandwidth tests), and 4 SGEs with 256 bytes
  // inline.
  struct Caps {
    std::uint32_t depth, sge, inline_data;
  };
  for (const Caps c : {Caps{128, 1, 0}, Caps{1024, 1, 0}, Caps{128, 4, 256}}) {
    QpInit init;
    init.max_send_wr = init.max_recv_wr = c.depth;
    init.max_send_sge = init.max_recv_sge = c.sge;
    init.max_inline_data = c.inline_data;
    init.send_cq = init.recv_cq = &cq;
    init.memory = &m;
    Qp q(init);
    using namespace attr_mask;
    QpAttr at;
    at.qp_state = QpState::kInit;
    q.modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0);
    at.qp_state = QpState::kRtr;
    at.max_dest_rd_atomic = 16;
    q.modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer, 0);
    std::printf(
        "state per RC QP, %u send + %u receive WRs of %u SGE(s), %u B inline, 16 responder "
        "resources: %zu bytes\n",
        c.depth, c.depth, c.sge, c.inline_data, q.state_bytes());
  }
  return 0;
}
