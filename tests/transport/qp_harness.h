/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The harness of the QP tests (responder_, requester_, completer_ and
// qp_test): one RC, UC or UD QP over simulated memory, whose peer the test
// plays with frames built and parsed by lib/wire, and a sink that keeps
// the exact packets the QP sends.

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "support/sim_memory.h"
#include "transport/qp.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

namespace uroce::transport::test_qp {

using wire::AethSyndrome;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

inline constexpr std::uint32_t kQpn = 0x000111;
inline constexpr std::uint32_t kPeerQpn = 0x000222;
inline constexpr std::uint32_t kPeerPsn = 0x000100;  // the PSN our responder expects first
inline constexpr std::uint32_t kOurPsn = 0xFFFFF0;   // our requester's first PSN, near the wrap
inline constexpr unsigned kAll =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

// A sent packet, with its payload (and a SACK's SACKETH) copied.
struct Sent {
  wire::Bth bth;
  wire::ExtHeaders ext;
  std::vector<std::uint8_t> payload;
  std::vector<std::uint8_t> sack;  ///< ext.sack's bytes, which ext no longer points at
  Opcode opcode() const { return static_cast<Opcode>(bth.opcode); }
};

class CaptureSink : public TxSink {
 public:
  bool transmit(const TxPacket& p) override {
    Sent s{p.bth, p.ext, {}, {}};
    if (p.ext.sack.bytes) s.sack.assign(p.ext.sack.bytes, p.ext.sack.bytes + wire::SackEth::kSize);
    s.ext.sack.bytes = nullptr;
    for (std::uint32_t i = 0; i < p.payload_segs; ++i)
      s.payload.insert(s.payload.end(), p.payload[i].data(),
                       p.payload[i].data() + p.payload[i].size());
    sent.push_back(std::move(s));
    return true;
  }
  std::deque<Sent> sent;
};

class QpTest : public ::testing::Test {
 protected:
  QpTest() {
    us_.src_ip = wire::IpAddr::from_v4(0x0A000001);
    us_.dst_ip = wire::IpAddr::from_v4(0x0A000002);
    peer_.src_ip = us_.dst_ip;
    peer_.dst_ip = us_.src_ip;
  }

  void SetUp() override { make_qp(QpType::kRc); }

  void make_qp(QpType type, std::uint8_t max_dest_rd_atomic = 4, bool selective_repeat = false) {
    QpInit init;
    init.type = type;
    init.selective_repeat = selective_repeat;
    init.qpn = kQpn;
    init.max_send_wr = 16;
    init.max_recv_wr = 16;
    init.max_send_sge = 2;
    init.max_recv_sge = 2;
    init.send_cq = &scq_;
    init.recv_cq = &rcq_;
    init.memory = &mem_;
    qp_ = std::make_unique<Qp>(init);
    max_dest_rd_atomic_ = max_dest_rd_atomic;
    connect();
  }

  // Takes the QP from RESET to RTS, connected to the peer.
  void connect() {
    using namespace attr_mask;
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qp_access_flags = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    ASSERT_EQ(qp_->modify(a, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
    a.qp_state = QpState::kRtr;
    a.route = us_;
    a.path_mtu = wire::Mtu::k256;
    a.dest_qp_num = kPeerQpn;
    a.rq_psn = kPeerPsn;
    a.max_dest_rd_atomic = max_dest_rd_atomic_;
    a.min_rnr_timer = 14;  // 1.28 ms
    const bool rc = qp_->type() == QpType::kRc;
    ASSERT_EQ(qp_->modify(a,
                          kState | kAv | kPathMtu | kDestQpn | kRqPsn |
                              (rc ? kMaxDestRdAtomic | kMinRnrTimer : 0),
                          0),
              0);
    a.qp_state = QpState::kRts;
    a.sq_psn = kOurPsn;
    a.timeout = local_ack_timeout_;
    a.retry_cnt = 2;
    a.rnr_retry = 1;
    a.max_rd_atomic = 4;
    ASSERT_EQ(
        qp_->modify(
            a, kState | kSqPsn | (rc ? kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic : 0), 0),
        0);
  }

  // Delivers a packet from the peer, built and parsed by lib/wire.
  void deliver(Opcode op, std::uint32_t psn, const wire::ExtHeaders& ext = {},
               std::vector<std::uint8_t> payload = {}, bool ack_req = false, Nanos now = 0) {
    wire::Bth bth;
    bth.opcode = static_cast<std::uint8_t>(op);
    bth.dest_qp = kQpn;
    bth.psn = Psn(psn);
    bth.ack_req = ack_req;
    bth.selective_repeat = peer_offers_sr_;
    frames_.emplace_back(wire::roce_frame_length(peer_, wire::opcode_info(op), payload.size()));
    auto& f = frames_.back();
    ASSERT_EQ(wire::build_roce_frame(f, peer_, bth, ext, payload, 1), f.size());
    wire::RocePacket pkt;
    ASSERT_EQ(wire::parse_roce_frame(f, pkt), wire::DropReason::kNone);
    qp_->receive(pkt, now);
  }

  std::deque<Sent>& drain(Nanos now = 0) {
    while (qp_->transmit(sink_, 64, now) > 0) {
    }
    return sink_.sent;
  }
  Sent pop() {
    EXPECT_FALSE(sink_.sent.empty());
    if (sink_.sent.empty()) return {};
    Sent s = sink_.sent.front();
    sink_.sent.pop_front();
    return s;
  }
  std::vector<Wc> poll(Cq& cq) {
    std::vector<Wc> out(32);
    out.resize(cq.poll(out.data(), 32));
    return out;
  }
  void post_recv(std::vector<std::uint8_t>& buf, std::uint64_t id, std::uint32_t key = 0) {
    RecvWr r;
    r.wr_id = id;
    r.num_sge = 1;
    r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data()),
                    static_cast<std::uint32_t>(buf.size()),
                    key ? key : mem_.reg(buf.data(), buf.size(), kAll)};
    ASSERT_EQ(qp_->post_recv(r), 0);
  }
  SendWr send_wr(WrOpcode op, std::vector<std::uint8_t>& buf, std::uint64_t id) {
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.send_flags = send_flags::kSignaled;
    w.num_sge = 1;
    w.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data()),
                    static_cast<std::uint32_t>(buf.size()), mem_.reg(buf.data(), buf.size(), kAll)};
    return w;
  }

  test::SimMemory mem_;
  Cq scq_{64};
  Cq rcq_{64};
  std::unique_ptr<Qp> qp_;
  CaptureSink sink_;
  wire::RoceRoute us_;
  wire::RoceRoute peer_;
  std::deque<std::vector<std::uint8_t>> frames_;
  bool peer_offers_sr_ = false;         ///< the peer's requests offer selective repeat
  std::uint8_t local_ack_timeout_ = 1;  ///< the next make_qp's: 8.192 us
  std::uint8_t max_dest_rd_atomic_ = 4;
};

inline std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed = 1) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i);
  return v;
}

inline wire::ExtHeaders reth(const void* va, std::uint32_t rkey, std::uint32_t len) {
  wire::ExtHeaders e;
  e.reth = {reinterpret_cast<std::uint64_t>(va), rkey, len};
  return e;
}

}  // namespace uroce::transport::test_qp
