/* SPDX-License-Identifier: BSD-3-Clause */
// The responder (responder.cc): one request in, the exact ACK, NAK or
// response out, and the receive completions it makes.

#include <gtest/gtest.h>

#include "transport/qp_harness.h"

namespace uroce::transport::test_qp {
namespace {

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

TEST_F(QpTest, AFatalNakThatTakesTheLastOfATurnStillEndsTheQp) {
  std::vector<std::uint8_t> dst(64);
  const auto rkey = mem_.reg(dst.data(), dst.size(), access::kRemoteRead);  // no write
  deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn, reth(dst.data(), rkey, 8), bytes(8), true);
  // A turn of one packet: the NAK. The QP must still want a turn, and
  // take it to the error state.
  ASSERT_EQ(qp_->transmit(sink_, 1, 0), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kRemoteAccessError));
  EXPECT_TRUE(qp_->has_work(0));
  qp_->transmit(sink_, 1, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
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

}  // namespace
}  // namespace uroce::transport::test_qp
