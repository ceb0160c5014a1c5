/* SPDX-License-Identifier: BSD-3-Clause */
// Packet-level tests: one QP, one packet in, and the exact packets and
// completions it produces. The peer is played by the test, with frames
// built and parsed by lib/wire.

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <set>
#include <vector>

#include "support/sim_memory.h"
#include "transport/qp.h"
#include "transport/random.h"
#include "wire/roce_parser.h"

namespace uroce::transport {
namespace {

using wire::AethSyndrome;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

constexpr std::uint32_t kQpn = 0x000111;
constexpr std::uint32_t kPeerQpn = 0x000222;
constexpr std::uint32_t kPeerPsn = 0x000100;  // the PSN our responder expects first
constexpr std::uint32_t kOurPsn = 0xFFFFF0;   // our requester's first PSN, near the wrap
constexpr unsigned kAll =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

// A sent packet, with its payload copied.
struct Sent {
  wire::Bth bth;
  wire::ExtHeaders ext;
  std::vector<std::uint8_t> payload;
  Opcode opcode() const { return static_cast<Opcode>(bth.opcode); }
};

class CaptureSink : public TxSink {
 public:
  bool transmit(const TxPacket& p) override {
    Sent s{p.bth, p.ext, {}};
    for (std::uint32_t i = 0; i < p.payload_segs; ++i)
      s.payload.insert(s.payload.end(), p.payload[i].begin(), p.payload[i].end());
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

  void make_qp(QpType type, std::uint8_t max_dest_rd_atomic = 4) {
    QpInit init;
    init.type = type;
    init.qpn = kQpn;
    init.max_send_wr = 16;
    init.max_recv_wr = 16;
    init.max_send_sge = 2;
    init.max_recv_sge = 2;
    init.send_cq = &scq_;
    init.recv_cq = &rcq_;
    init.memory = &mem_;
    qp_ = std::make_unique<Qp>(init);
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
    a.max_dest_rd_atomic = max_dest_rd_atomic;
    a.min_rnr_timer = 14;  // 1.28 ms
    const bool rc = qp_->type() == QpType::kRc;
    ASSERT_EQ(qp_->modify(a,
                          kState | kAv | kPathMtu | kDestQpn | kRqPsn |
                              (rc ? kMaxDestRdAtomic | kMinRnrTimer : 0),
                          0),
              0);
    a.qp_state = QpState::kRts;
    a.sq_psn = kOurPsn;
    a.timeout = 1;  // 8.192 us
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
};

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed = 1) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i);
  return v;
}

wire::ExtHeaders reth(const void* va, std::uint32_t rkey, std::uint32_t len) {
  wire::ExtHeaders e;
  e.reth = {reinterpret_cast<std::uint64_t>(va), rkey, len};
  return e;
}

// ---- Responder ----

TEST_F(QpTest, ResponderAcksASendAndCompletesTheReceive) {
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 9);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(20), /*ack_req=*/true);
  // Expect: one ACK for the SEND's PSN with MSN 1 and unlimited credits.
  ASSERT_EQ(drain().size(), 1u);
  const Sent ack = pop();
  EXPECT_EQ(ack.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(ack.bth.psn, Psn(kPeerPsn));
  EXPECT_EQ(ack.bth.dest_qp, kPeerQpn);
  EXPECT_EQ(ack.ext.aeth.syndrome, AethSyndrome::ack());
  EXPECT_EQ(ack.ext.aeth.msn, 1u);
  const auto wc = poll(rcq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(wc[0].byte_len, 20u);
  EXPECT_EQ(0, std::memcmp(buf.data(), bytes(20).data(), 20));
}

TEST_F(QpTest, ResponderReAcksADuplicateSendWithTheNewestPsn) {
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 1);
  post_recv(buf, 2);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  deliver(Opcode::kRcSendOnly, kPeerPsn + 1, {}, bytes(8), true);
  drain().clear();
  // Expect: the duplicate of the first SEND is ACKed with the newest
  // executed PSN (C9-105), and not executed again.
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  const Sent ack = pop();
  EXPECT_EQ(ack.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(ack.bth.psn, Psn(kPeerPsn + 1));
  EXPECT_EQ(poll(rcq_).size(), 2u);
  EXPECT_EQ(qp_->counters().get(Counter::kDuplicateRequest), 1u);
}

TEST_F(QpTest, ResponderNaksAGapOnceAndStaysSilentUntilTheExpectedPsn) {
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 1);
  // Expect: the first out-of-sequence packet draws one NAK carrying the
  // expected PSN; the next ones draw nothing.
  deliver(Opcode::kRcSendOnly, kPeerPsn + 2, {}, bytes(8), true);
  deliver(Opcode::kRcSendOnly, kPeerPsn + 3, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  const Sent nak = pop();
  EXPECT_EQ(nak.bth.psn, Psn(kPeerPsn));
  EXPECT_EQ(nak.ext.aeth.syndrome, AethSyndrome::nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(qp_->counters().get(Counter::kOutOfSeqRequest), 2u);
  // Expect: once the gap is filled, execution and ACKs resume.
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::ack());
}

TEST_F(QpTest, ResponderRnrNaksASendWithNoReceiveWithItsMinRnrTimer) {
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  // Expect: RNR NAK, timer code 14 (our min_rnr_timer), PSN of the SEND.
  ASSERT_EQ(drain().size(), 1u);
  const Sent nak = pop();
  EXPECT_EQ(nak.ext.aeth.syndrome, AethSyndrome::rnr_nak(14));
  EXPECT_EQ(nak.bth.psn, Psn(kPeerPsn));
  EXPECT_EQ(qp_->counters().get(Counter::kSendRnrErr), 1u);
  // Expect: the retried SEND is accepted once a receive is posted.
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 1);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::ack());
}

TEST_F(QpTest, ResponderAnswersAReadAndReExecutesADuplicateFromItsPsn) {
  std::vector<std::uint8_t> src = bytes(600, 7);
  const auto rkey = mem_.reg(src.data(), src.size(), kAll);
  deliver(Opcode::kRcRdmaReadRequest, kPeerPsn, reth(src.data(), rkey, 600), {}, true);
  // Expect: FIRST, MIDDLE, LAST of 256, 256, 88 bytes on PSNs n..n+2.
  ASSERT_EQ(drain().size(), 3u);
  const Opcode ops[] = {Opcode::kRcRdmaReadResponseFirst, Opcode::kRcRdmaReadResponseMiddle,
                        Opcode::kRcRdmaReadResponseLast};
  for (int i = 0; i < 3; ++i) {
    const Sent s = pop();
    EXPECT_EQ(s.opcode(), ops[i]);
    EXPECT_EQ(s.bth.psn, Psn(kPeerPsn + i));
    EXPECT_EQ(0, std::memcmp(s.payload.data(), src.data() + 256 * i, s.payload.size()));
  }
  // Expect: a duplicate asking from the second response PSN gets the rest
  // again, starting with a FIRST, from the saved resource.
  deliver(Opcode::kRcRdmaReadRequest, kPeerPsn + 1, reth(src.data() + 256, rkey, 344), {}, true);
  ASSERT_EQ(drain().size(), 2u);
  Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadResponseFirst);
  EXPECT_EQ(s.bth.psn, Psn(kPeerPsn + 1));
  EXPECT_EQ(0, std::memcmp(s.payload.data(), src.data() + 256, 256));
  s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadResponseLast);
  EXPECT_EQ(s.payload.size(), 88u);
}

TEST_F(QpTest, ResponderStopsAReadStreamWhoseRegionIsDeregistered) {
  std::vector<std::uint8_t> src = bytes(1000, 7);
  const auto rkey = mem_.reg(src.data(), src.size(), kAll);
  deliver(Opcode::kRcRdmaReadRequest, kPeerPsn, reth(src.data(), rkey, 1000), {}, true);
  // Expect: the first response goes out; after the region is gone the
  // rest is not read from it.
  ASSERT_EQ(qp_->transmit(sink_, 1, 0), 1u);
  mem_.dereg(rkey);
  EXPECT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().opcode(), Opcode::kRcRdmaReadResponseFirst);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(QpTest, ResponderNeverExecutesADuplicateAtomicTwice) {
  alignas(8) std::uint64_t word = 10;
  const auto rkey = mem_.reg(&word, 8, kAll);
  wire::ExtHeaders e;
  e.atomic_eth = {reinterpret_cast<std::uint64_t>(&word), rkey, 5, 0};
  deliver(Opcode::kRcFetchAdd, kPeerPsn, e, {}, true);
  ASSERT_EQ(drain().size(), 1u);
  deliver(Opcode::kRcFetchAdd, kPeerPsn, e, {}, true);  // duplicate
  // Expect: two ATOMIC ACKs with the original value 10; the word added once.
  ASSERT_EQ(drain().size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const Sent s = pop();
    EXPECT_EQ(s.opcode(), Opcode::kRcAtomicAcknowledge);
    EXPECT_EQ(s.ext.atomic_ack_eth.orig_remote_data, 10u);
    EXPECT_EQ(s.bth.psn, Psn(kPeerPsn));
  }
  EXPECT_EQ(word, 15u);
}

TEST_F(QpTest, ResponderNaksABadRkeyWithRemoteAccessErrorAndEntersError) {
  std::vector<std::uint8_t> dst(64);
  const auto rkey = mem_.reg(dst.data(), dst.size(), access::kRemoteRead);  // no write
  deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn, reth(dst.data(), rkey, 8), bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(dst[0], 0) << "nothing written";
}

TEST_F(QpTest, ResponderNaksWhatTheQpsAccessFlagsDoNotEnable) {
  std::vector<std::uint8_t> dst(64);
  std::uint64_t word = 7;
  const auto rkey = mem_.reg(dst.data(), dst.size(), kAll);
  const auto wkey = mem_.reg(&word, 8, kAll);
  using namespace attr_mask;
  struct Case {
    unsigned qp_access;  ///< everything but what the operation needs
    Opcode op;
    wire::ExtHeaders ext;
    std::vector<std::uint8_t> payload;
  };
  wire::ExtHeaders atomic;
  atomic.atomic_eth = {reinterpret_cast<std::uint64_t>(&word), wkey, 5, 0};
  for (const Case& c : {
           Case{access::kRemoteRead | access::kRemoteAtomic, Opcode::kRcRdmaWriteOnly,
                reth(dst.data(), rkey, 8), bytes(8)},
           Case{access::kRemoteWrite | access::kRemoteAtomic,
                Opcode::kRcRdmaReadRequest,
                reth(dst.data(), rkey, 8),
                {}},
           Case{access::kRemoteWrite | access::kRemoteRead, Opcode::kRcFetchAdd, atomic, {}},
       }) {
    make_qp(QpType::kRc);
    QpAttr a;
    a.qp_access_flags = c.qp_access;
    ASSERT_EQ(qp_->modify(a, kAccessFlags, 0), 0);
    deliver(c.op, kPeerPsn, c.ext, c.payload, true);
    ASSERT_EQ(drain().size(), 1u) << static_cast<int>(c.op);
    EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kRemoteAccessError))
        << static_cast<int>(c.op);
    sink_.sent.clear();
  }
  EXPECT_EQ(dst[0], 0) << "nothing written";
  EXPECT_EQ(word, 7u) << "no atomic executed";
}

TEST_F(QpTest, ResponderNaksAWriteOutsideTheRegion) {
  std::vector<std::uint8_t> dst(64);
  const auto rkey = mem_.reg(dst.data(), dst.size(), kAll);
  deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn, reth(dst.data() + 60, rkey, 8), bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kRemoteAccessError));
}

TEST_F(QpTest, ResponderNaksAMisalignedAtomicAsInvalidRequest) {
  alignas(8) std::uint64_t word[2] = {};
  const auto rkey = mem_.reg(word, 16, kAll);
  wire::ExtHeaders e;
  e.atomic_eth = {reinterpret_cast<std::uint64_t>(word) + 4, rkey, 1, 0};
  deliver(Opcode::kRcFetchAdd, kPeerPsn, e, {}, true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kInvalidRequest));
}

TEST_F(QpTest, ResponderWithoutReadResourcesNaksAReadAsInvalidRequest) {
  make_qp(QpType::kRc, /*max_dest_rd_atomic=*/0);
  std::vector<std::uint8_t> src(64);
  deliver(Opcode::kRcRdmaReadRequest, kPeerPsn,
          reth(src.data(), mem_.reg(src.data(), 64, kAll), 64), {}, true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kInvalidRequest));
}

TEST_F(QpTest, ResponderRejectsAMessageLongerThanTheReceiveBuffer) {
  std::vector<std::uint8_t> buf(16);
  post_recv(buf, 4);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(32), true);
  // Expect: NAK invalid request to the requester, LOC_LEN_ERR locally.
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kInvalidRequest));
  const auto wc = poll(rcq_);
  ASSERT_GE(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 4u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocLenErr);
}

TEST_F(QpTest, ResponderTreatsAReceiveWithABadLkeyAsAMalformedWqe) {
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 6, /*key=*/0xBAD);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  // Expect: NAK remote operational error; the receive fails LOC_QP_OP_ERR.
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kRemoteOperationalError));
  const auto wc = poll(rcq_);
  ASSERT_GE(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocQpOpErr);
}

TEST_F(QpTest, ResponderRejectsAMiddlePacketWithoutAFirst) {
  deliver(Opcode::kRcSendMiddle, kPeerPsn, {}, bytes(256), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kInvalidRequest));
}

TEST_F(QpTest, ResponderDeliversImmediateDataAndInvalidate) {
  std::vector<std::uint8_t> buf(64), dst(64);
  post_recv(buf, 1);
  post_recv(buf, 2);
  wire::ExtHeaders e = reth(dst.data(), mem_.reg(dst.data(), 64, kAll), 4);
  e.imm_data = 0xA1B2C3D4;
  deliver(Opcode::kRcRdmaWriteOnlyWithImmediate, kPeerPsn, e, bytes(4), true);
  const auto victim = mem_.reg(dst.data(), 8, kAll);
  wire::ExtHeaders inv;
  inv.ieth_rkey = victim;
  deliver(Opcode::kRcSendOnlyWithInvalidate, kPeerPsn + 1, inv, bytes(4), true);
  const auto wc = poll(rcq_);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wc[0].imm_data, 0xA1B2C3D4u);
  EXPECT_TRUE(wc[0].wc_flags & wc_flags::kWithImm);
  EXPECT_EQ(wc[1].opcode, WcOpcode::kRecv);
  EXPECT_TRUE(wc[1].wc_flags & wc_flags::kWithInv);
  EXPECT_EQ(wc[1].imm_data, victim);
  EXPECT_FALSE(
      mem_.remote(victim, reinterpret_cast<std::uint64_t>(dst.data()), 1, access::kRemoteRead))
      << "the R_Key is gone";
}

// ---- Requester and completer ----

TEST_F(QpTest, RequesterSegmentsToThePathMtuAndAsksForAnAckOnTheLast) {
  auto data = bytes(600);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 1)), 0);
  ASSERT_EQ(drain().size(), 3u);
  const Opcode ops[] = {Opcode::kRcSendFirst, Opcode::kRcSendMiddle, Opcode::kRcSendLast};
  for (int i = 0; i < 3; ++i) {
    const Sent s = pop();
    EXPECT_EQ(s.opcode(), ops[i]);
    EXPECT_EQ(s.bth.psn, Psn(kOurPsn) + i);
    EXPECT_EQ(s.bth.ack_req, i == 2);
    EXPECT_EQ(s.payload.size(), i < 2 ? 256u : 88u);
  }
}

// IBA 10.6.7: a bind runs in WR order, after every earlier WR completed,
// and puts nothing on the wire.
TEST_F(QpTest, ABindWaitsForEarlierWrsAndCompletesAsBindMw) {
  auto data = bytes(64);
  std::vector<std::uint8_t> region(256);
  const std::uint32_t lkey = mem_.reg(region.data(), region.size(), kAll | access::kMwBind);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kRdmaWrite, data, 1)), 0);
  SendWr bind;
  bind.wr_id = 2;
  bind.opcode = WrOpcode::kBindMw;
  bind.send_flags = send_flags::kSignaled;
  bind.bind = {1,
               1,
               0x1234,
               lkey,
               reinterpret_cast<std::uint64_t>(region.data()) + 64,
               64,
               access::kRemoteRead};
  ASSERT_EQ(qp_->post_send(bind), 0);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kRdmaWrite, data, 3)), 0);
  // Expect: the first WRITE only; the bind waits for its ACK.
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().opcode(), Opcode::kRcRdmaWriteOnly);
  EXPECT_FALSE(mem_.remote(0x1234, bind.bind.addr, 8, access::kRemoteRead));
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, kOurPsn, ack);
  // Expect: the bind done, then the second WRITE on the next PSN.
  ASSERT_EQ(drain().size(), 1u);
  const Sent w = pop();
  EXPECT_EQ(w.opcode(), Opcode::kRcRdmaWriteOnly);
  EXPECT_EQ(w.bth.psn, Psn(kOurPsn) + 1);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(mem_.remote(0x1234, bind.bind.addr, 8, access::kRemoteRead).ptr, region.data() + 64);
}

TEST_F(QpTest, ARefusedBindFailsWithMwBindErrAndFlushesTheRest) {
  auto data = bytes(64);
  std::vector<std::uint8_t> region(256);
  const std::uint32_t lkey = mem_.reg(region.data(), region.size(), kAll);  // no kMwBind
  SendWr bind;
  bind.wr_id = 1;
  bind.opcode = WrOpcode::kBindMw;
  bind.bind = {
      1, 1, 0x1234, lkey, reinterpret_cast<std::uint64_t>(region.data()), 64, access::kRemoteRead};
  ASSERT_EQ(qp_->post_send(bind), 0);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kRdmaWrite, data, 2)), 0);
  // Expect: nothing on the wire; the bind fails even unsignaled.
  EXPECT_TRUE(drain().empty());
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kMwBindErr);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(qp_->state(), QpState::kErr);
}

TEST_F(QpTest, ALocalInvalidateOfAnUnknownKeyFailsWithLocQpOpErr) {
  SendWr inv;
  inv.wr_id = 5;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = send_flags::kSignaled;
  inv.invalidate_rkey = 0xDEAD;
  ASSERT_EQ(qp_->post_send(inv), 0);
  EXPECT_TRUE(drain().empty());
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kLocalInv);
}

TEST_F(QpTest, CompleterGoesBackToTheNaksPsnNotTheMessageStart) {
  auto data = bytes(256 * 5);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 1)), 0);
  ASSERT_EQ(drain().size(), 5u);
  sink_.sent.clear();
  wire::ExtHeaders nak;
  nak.aeth = {AethSyndrome::nak(NakCode::kPsnSequenceError), 0};
  deliver(Opcode::kRcAcknowledge, (Psn(kOurPsn) + 3).value(), nak);
  // Expect: resend from PSN+3 (MIDDLE, then LAST), the rest is kept.
  ASSERT_EQ(drain().size(), 2u);
  Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcSendMiddle);
  EXPECT_EQ(s.bth.psn, Psn(kOurPsn) + 3);
  EXPECT_EQ(0, std::memcmp(s.payload.data(), data.data() + 768, 256));
  EXPECT_EQ(pop().opcode(), Opcode::kRcSendLast);
  EXPECT_EQ(qp_->counters().get(Counter::kRcvdSeqErr), 1u);
}

TEST_F(QpTest, CompleterResumesAPartlyAnsweredReadAtTheFirstMissingResponse) {
  std::vector<std::uint8_t> local(700);
  SendWr r = send_wr(WrOpcode::kRdmaRead, local, 3);
  r.remote_addr = 0x10000;
  r.rkey = 0x77;
  ASSERT_EQ(qp_->post_send(r), 0);
  ASSERT_EQ(drain().size(), 1u);
  pop();
  auto remote = bytes(700, 3);
  wire::ExtHeaders aeth;
  aeth.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcRdmaReadResponseFirst, kOurPsn, aeth,
          std::vector<std::uint8_t>(remote.begin(), remote.begin() + 256));
  // The MIDDLE is lost; the LAST arrives.
  deliver(Opcode::kRcRdmaReadResponseLast, (Psn(kOurPsn) + 2).value(), aeth,
          std::vector<std::uint8_t>(remote.begin() + 512, remote.end()));
  // Expect: a new READ for what is missing: VA + 256, 444 bytes, PSN + 1.
  ASSERT_EQ(drain().size(), 1u);
  const Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadRequest);
  EXPECT_EQ(s.bth.psn, Psn(kOurPsn) + 1);
  EXPECT_EQ(s.ext.reth.va, 0x10000u + 256);
  EXPECT_EQ(s.ext.reth.dma_length, 444u);
  EXPECT_EQ(qp_->counters().get(Counter::kImpliedNakSeqErr), 1u);
  // Expect: the resumed responses complete it with every byte in place.
  deliver(Opcode::kRcRdmaReadResponseFirst, (Psn(kOurPsn) + 1).value(), aeth,
          std::vector<std::uint8_t>(remote.begin() + 256, remote.begin() + 512));
  deliver(Opcode::kRcRdmaReadResponseLast, (Psn(kOurPsn) + 2).value(), aeth,
          std::vector<std::uint8_t>(remote.begin() + 512, remote.end()));
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(local, remote);
}

TEST_F(QpTest, LocalAckTimeoutHasMicrosecondPrecisionAndExhaustsIntoRetryExcErr) {
  auto data = bytes(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 5)), 0);
  ASSERT_EQ(drain(1000).size(), 1u);
  sink_.sent.clear();
  // timeout = 1: 4.096 us * 2 = 8192 ns after the send.
  EXPECT_EQ(qp_->next_deadline(), 1000u + 8192);
  qp_->on_timer(1000 + 8191);
  EXPECT_TRUE(drain(1000 + 8191).empty());
  Nanos t = 1000 + 8192;
  // Expect: retry_cnt (2) resends, then RETRY_EXC_ERR.
  for (int i = 0; i < 2; ++i) {
    qp_->on_timer(t);
    ASSERT_EQ(drain(t).size(), 1u) << "retry " << i;
    EXPECT_EQ(pop().bth.psn, Psn(kOurPsn));
    t += 8192;
    EXPECT_EQ(qp_->next_deadline(), t);
  }
  qp_->on_timer(t);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(qp_->counters().get(Counter::kLocalAckTimeoutErr), 3u);
}

TEST_F(QpTest, RnrNakWaitsTheNaksTimerThenResendsAndExhaustsIntoRnrRetryExcErr) {
  auto data = bytes(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 5)), 0);
  drain(0).clear();
  wire::ExtHeaders rnr;
  rnr.aeth = {AethSyndrome::rnr_nak(3), 0};  // 30 us
  deliver(Opcode::kRcAcknowledge, kOurPsn, rnr, {}, false, 100);
  // Expect: nothing before 100 + 30 us; the SEND again after.
  EXPECT_TRUE(drain(100 + 29'999).empty());
  EXPECT_EQ(qp_->next_deadline(), 100u + 30'000);
  qp_->on_timer(100 + 30'000);
  ASSERT_EQ(drain(100 + 30'000).size(), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn));
  // rnr_retry is 1: the second RNR NAK fails the WR.
  deliver(Opcode::kRcAcknowledge, kOurPsn, rnr, {}, false, 50'000);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(qp_->counters().get(Counter::kRcvdRnrErr), 2u);
}

TEST_F(QpTest, FatalNaksCompleteWithTheirStatusAndFlushTheRest) {
  const struct {
    NakCode code;
    WcStatus status;
  } cases[] = {{NakCode::kInvalidRequest, WcStatus::kRemInvReqErr},
               {NakCode::kRemoteAccessError, WcStatus::kRemAccessErr},
               {NakCode::kRemoteOperationalError, WcStatus::kRemOpErr}};
  for (const auto& c : cases) {
    make_qp(QpType::kRc);
    auto data = bytes(8);
    SendWr w = send_wr(WrOpcode::kSend, data, 1);
    ASSERT_EQ(qp_->post_send(w), 0);
    w.wr_id = 2;
    w.send_flags = 0;  // unsignaled: its flush completion comes anyway
    ASSERT_EQ(qp_->post_send(w), 0);
    drain().clear();
    wire::ExtHeaders nak;
    nak.aeth = {AethSyndrome::nak(c.code), 0};
    deliver(Opcode::kRcAcknowledge, kOurPsn, nak);
    const auto wc = poll(scq_);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[0].status, c.status);
    EXPECT_EQ(wc[1].wr_id, 2u);
    EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(qp_->state(), QpState::kErr);
  }
}

TEST_F(QpTest, AResponseOfTheWrongKindIsABadResponse) {
  std::vector<std::uint8_t> local(8);
  SendWr r = send_wr(WrOpcode::kRdmaRead, local, 3);
  ASSERT_EQ(qp_->post_send(r), 0);
  drain().clear();
  wire::ExtHeaders e;
  e.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAtomicAcknowledge, kOurPsn, e);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kBadRespErr);
}

TEST_F(QpTest, AGatherListTheQpMayNotReadFailsWithLocProtErr) {
  auto data = bytes(64);
  SendWr w = send_wr(WrOpcode::kSend, data, 8);
  w.sg_list[0].lkey ^= 0x5A5A;  // not a key
  ASSERT_EQ(qp_->post_send(w), 0);
  EXPECT_TRUE(drain().empty());
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
}

TEST_F(QpTest, AReadIntoMemoryWithoutLocalWriteFailsWithLocProtErr) {
  std::vector<std::uint8_t> local(8);
  SendWr r = send_wr(WrOpcode::kRdmaRead, local, 3);
  r.sg_list[0].lkey = mem_.reg(local.data(), 8, access::kRemoteRead);  // read-only
  ASSERT_EQ(qp_->post_send(r), 0);
  drain().clear();
  wire::ExtHeaders e;
  e.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcRdmaReadResponseOnly, kOurPsn, e, bytes(8));
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
}

TEST_F(QpTest, FenceAndInitiatorDepthStallWithoutError) {
  std::vector<std::uint8_t> local(8);
  SendWr r = send_wr(WrOpcode::kRdmaRead, local, 1);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(qp_->post_send(r), 0);
  // Expect: max_rd_atomic (4) READs go out; the fifth waits.
  EXPECT_EQ(drain().size(), 4u);
  sink_.sent.clear();
  wire::ExtHeaders e;
  e.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcRdmaReadResponseOnly, kOurPsn, e, bytes(8));
  EXPECT_EQ(drain().size(), 1u) << "one completed, one more may go";
  sink_.sent.clear();
  auto data = bytes(8);
  SendWr f = send_wr(WrOpcode::kSend, data, 9);
  f.send_flags |= send_flags::kFence;
  ASSERT_EQ(qp_->post_send(f), 0);
  EXPECT_TRUE(drain().empty()) << "a fenced SEND waits for the READs";
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

// ---- Congestion control hooks ----

class Observer : public CongestionObserver {
 public:
  void on_ce_marked(std::uint32_t qpn, const wire::RocePacket& pkt, Nanos) override {
    ce.push_back({qpn, pkt.bth.psn.value()});
  }
  void on_cnp(std::uint32_t qpn, Nanos now) override { cnp.push_back({qpn, now}); }
  std::vector<std::pair<std::uint32_t, std::uint64_t>> ce, cnp;
};

class Gate : public TxGate {
 public:
  bool admit(std::uint32_t bytes, Nanos now, Nanos* retry_at) override {
    asked.push_back(bytes);
    if (now >= open_at) return true;
    *retry_at = open_at;
    return false;
  }
  Nanos open_at = 0;
  std::vector<std::uint32_t> asked;
};

TEST_F(QpTest, CeMarksAndCnpsAreReportedUpwardAndTheGateHoldsRequests) {
  Observer obs;
  Gate gate;
  gate.open_at = 5000;
  QpInit init;
  init.qpn = kQpn;
  init.send_cq = &scq_;
  init.recv_cq = &rcq_;
  init.memory = &mem_;
  init.gate = &gate;
  init.congestion = &obs;
  qp_ = std::make_unique<Qp>(init);
  using namespace attr_mask;
  QpAttr a;
  a.qp_state = QpState::kInit;
  ASSERT_EQ(qp_->modify(a, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
  a.qp_state = QpState::kRtr;
  a.route = us_;
  a.dest_qp_num = kPeerQpn;
  a.rq_psn = kPeerPsn;
  ASSERT_EQ(
      qp_->modify(a, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0),
      0);
  a.qp_state = QpState::kRts;
  ASSERT_EQ(qp_->modify(a, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0),
            0);

  // Expect: a CE-marked request reaches the notification point's hook and
  // the counter; a CNP reaches the reaction point's hook.
  std::vector<std::uint8_t> buf(64);
  post_recv(buf, 1);
  peer_.ecn = wire::Ecn::kCe;
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true, 100);
  peer_.ecn = wire::Ecn::kNotEct;
  ASSERT_EQ(obs.ce.size(), 1u);
  EXPECT_EQ(obs.ce[0].first, kQpn);
  EXPECT_EQ(qp_->counters().get(Counter::kEcnMarkedPkts), 1u);
  deliver(Opcode::kCnp, 0, {}, {}, false, 200);
  ASSERT_EQ(obs.cnp.size(), 1u);
  EXPECT_EQ(obs.cnp[0].second, 200u);
  drain(300).clear();

  // Expect: the gate holds the SEND until it opens, and the QP asks to be
  // woken then.
  auto data = bytes(100);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 3)), 0);
  EXPECT_TRUE(drain(1000).empty());
  EXPECT_EQ(gate.asked, std::vector<std::uint32_t>{100});
  EXPECT_EQ(qp_->next_deadline(), 5000u);
  qp_->on_timer(5000);
  EXPECT_EQ(drain(5000).size(), 1u);
}

// ---- Verbs-facing behaviour ----

TEST_F(QpTest, PostSendValidatesLikeLibibverbs) {
  auto data = bytes(8);
  SendWr w = send_wr(WrOpcode::kSend, data, 1);
  w.num_sge = 3;  // max_send_sge is 2
  EXPECT_EQ(qp_->post_send(w), EINVAL);
  w.num_sge = 1;
  w.opcode = WrOpcode::kBindMw;
  EXPECT_EQ(qp_->post_send(w), EINVAL);
  w.opcode = WrOpcode::kSend;
  w.send_flags = send_flags::kInline;  // max_inline_data is 0
  EXPECT_EQ(qp_->post_send(w), EINVAL);
  w.send_flags = 0;
  for (int i = 0; i < 16; ++i) ASSERT_EQ(qp_->post_send(w), 0);
  EXPECT_EQ(qp_->post_send(w), ENOMEM) << "send queue full";
  make_qp(QpType::kUc);
  w.opcode = WrOpcode::kRdmaRead;
  EXPECT_EQ(qp_->post_send(w), EINVAL) << "UC has no READ";
}

TEST_F(QpTest, ModifyFollowsTheIbaStateMachine) {
  QpInit init;
  init.type = QpType::kRc;
  init.qpn = 5;
  init.send_cq = &scq_;
  init.recv_cq = &rcq_;
  init.memory = &mem_;
  Qp qp(init);
  using namespace attr_mask;
  QpAttr a;
  a.qp_state = QpState::kRtr;
  EXPECT_EQ(qp.modify(a, kState, 0), EINVAL) << "RESET -> RTR is not a transition";
  a.qp_state = QpState::kInit;
  EXPECT_EQ(qp.modify(a, kState | kPkeyIndex | kPort, 0), EINVAL) << "RC needs access flags";
  EXPECT_EQ(qp.modify(a, kState | kPkeyIndex | kPort | kAccessFlags, 0), 0);
  a.qp_state = QpState::kRtr;
  EXPECT_EQ(qp.modify(a, kState | kAv | kPathMtu | kDestQpn | kRqPsn, 0), EINVAL)
      << "RC RTR needs max_dest_rd_atomic and min_rnr_timer";
  a.retry_cnt = 8;
  a.qp_state = QpState::kInit;
  EXPECT_EQ(qp.modify(a, kState | kRetryCnt, 0), EINVAL)
      << "INIT -> INIT does not take retry_cnt (and it is 3 bits)";
  a.retry_cnt = 7;
  EXPECT_EQ(qp.modify(a, kState | kRetryCnt, 0), EINVAL) << "INIT -> INIT does not take retry_cnt";
  EXPECT_EQ(qp.modify(a, kState | kQkey, 0), EINVAL) << "an RC QP has no Q_Key";
  EXPECT_EQ(qp.modify(a, kState | kAccessFlags, 0), 0) << "INIT -> INIT may change access";
  a.qp_state = QpState::kRtr;
  EXPECT_EQ(
      qp.modify(
          a, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer | kSqPsn,
          0),
      EINVAL)
      << "the SQ PSN belongs to RTR -> RTS";
  a.qp_state = QpState::kInit;
  EXPECT_EQ(qp.post_send(SendWr{}), EINVAL) << "no sends before RTS";
  a.qp_state = QpState::kErr;
  EXPECT_EQ(qp.modify(a, kState, 0), 0);
  EXPECT_EQ(qp.state(), QpState::kErr);
  a.qp_state = QpState::kReset;
  EXPECT_EQ(qp.modify(a, kState, 0), 0);
  EXPECT_EQ(qp.state(), QpState::kReset);
}

TEST_F(QpTest, PostingInTheErrorStateFlushes) {
  std::vector<std::uint8_t> buf(8);
  post_recv(buf, 1);
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  auto data = bytes(8);
  SendWr w = send_wr(WrOpcode::kSend, data, 2);
  w.send_flags = 0;
  ASSERT_EQ(qp_->post_send(w), 0);
  EXPECT_TRUE(qp_->has_work(0));
  drain();
  const auto s = poll(scq_);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(s[0].status, WcStatus::kWrFlushErr);
  const auto r = poll(rcq_);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, WcStatus::kWrFlushErr);
}

TEST(SecureRandom, QpnsAndPsnsAreUnpredictableAndInRange) {
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t q = secure_random_qpn();
    EXPECT_GT(q, 1u);
    EXPECT_LT(q, 0xFFFFFFu);
    EXPECT_LE(secure_random_psn(), 0xFFFFFFu);
    seen.insert(q);
  }
  // 1000 draws from 2^24 collide with probability about 3 %; a generator
  // that counts or repeats would fail at once.
  EXPECT_GE(seen.size(), 998u);
}

}  // namespace
}  // namespace uroce::transport

namespace uroce::transport {
namespace {

TEST(Cq, RemovingAQpsCompletionsKeepsTheOthersInOrder) {
  Cq cq(8);
  auto push = [&](std::uint64_t id, std::uint32_t qpn) {
    Wc wc;
    wc.wr_id = id;
    wc.qp_num = qpn;
    ASSERT_TRUE(cq.push(wc));
  };
  // Across the ring's end: four taken, then seven waiting in slots 4..10.
  for (std::uint64_t i = 0; i < 4; ++i) push(i, 1);
  Wc out[8];
  ASSERT_EQ(cq.poll(out, 4), 4u);
  for (std::uint64_t i = 4; i < 11; ++i) push(i, i % 2 ? 2 : 1);
  EXPECT_EQ(cq.remove_qp(2), 3u);
  EXPECT_EQ(cq.remove_qp(7), 0u);
  ASSERT_EQ(cq.size(), 4u);
  ASSERT_EQ(cq.poll(out, 8), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].wr_id, 4 + 2 * i);
    EXPECT_EQ(out[i].qp_num, 1u);
  }
  push(99, 2);  // the ring goes on from where it was left
  ASSERT_EQ(cq.poll(out, 8), 1u);
  EXPECT_EQ(out[0].wr_id, 99u);
}

}  // namespace
}  // namespace uroce::transport

namespace uroce::transport {
namespace {

TEST(Cq, ResizeKeepsWhatWaitsAndRefusesToDropAny) {
  Cq cq(4);
  Wc wc, out[8];
  for (std::uint64_t i = 0; i < 3; ++i) {
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  ASSERT_EQ(cq.poll(out, 2), 2u);
  for (std::uint64_t i = 3; i < 6; ++i) {  // wraps around the 4 slots
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  EXPECT_FALSE(cq.resize(3)) << "four wait";
  EXPECT_EQ(cq.depth(), 4u);
  ASSERT_TRUE(cq.resize(6));
  EXPECT_EQ(cq.depth(), 6u);
  for (std::uint64_t i = 6; i < 8; ++i) {
    wc.wr_id = i;
    ASSERT_TRUE(cq.push(wc));
  }
  ASSERT_EQ(cq.poll(out, 8), 6u);
  for (std::uint64_t i = 0; i < 6; ++i) EXPECT_EQ(out[i].wr_id, 2 + i);
  ASSERT_TRUE(cq.resize(1));
  EXPECT_FALSE(cq.resize(0));
}

}  // namespace
}  // namespace uroce::transport
