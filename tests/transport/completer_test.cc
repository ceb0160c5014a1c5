/* SPDX-License-Identifier: BSD-3-Clause */
// The completer (completer.cc): ACKs, NAKs and responses in, completions
// out; go-back-N, the local ACK timeout and RNR retries.

#include <gtest/gtest.h>

#include "transport/qp_harness.h"

namespace uroce::transport::test_qp {
namespace {

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

TEST_F(QpTest, ItsProgressShowsPsnsWorkLeftAndRetriesLeft) {
  auto data = bytes(600);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 1)), 0);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 2)), 0);
  ASSERT_EQ(drain(0).size(), 6u);
  Qp::Progress p = qp_->progress_state();
  EXPECT_EQ(p.sq_psn, (Psn(kOurPsn) + 6).value());
  EXPECT_EQ(p.sq_unacked_psn, kOurPsn);
  EXPECT_EQ(p.rq_psn, kPeerPsn);
  EXPECT_EQ(p.sq_wqes, 2u);
  EXPECT_EQ(p.retry_left, 2u);
  // The first message acknowledged: one WR left, from its first PSN.
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 0};
  deliver(Opcode::kRcAcknowledge, (Psn(kOurPsn) + 2).value(), ack);
  p = qp_->progress_state();
  EXPECT_EQ(p.sq_unacked_psn, (Psn(kOurPsn) + 3).value());
  EXPECT_EQ(p.sq_wqes, 1u);
  // A timeout spends a retry and goes back to the unacknowledged PSN.
  sink_.sent.clear();
  const Nanos t = qp_->next_deadline();
  qp_->on_timer(t);
  ASSERT_EQ(drain(t).size(), 3u);
  p = qp_->progress_state();
  EXPECT_EQ(p.retry_left, 1u);
  EXPECT_EQ(p.sq_psn, (Psn(kOurPsn) + 6).value());
  EXPECT_EQ(p.sq_unacked_psn, (Psn(kOurPsn) + 3).value());
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

TEST_F(QpTest, TheAckTimerRunsOnlyOnceAPacketAsksForAnAck) {
  // A 1 KiB SEND is four packets at path MTU 256; only the last asks for
  // an ACK. Sent two now and two much later (as a QP among thousands gets
  // its turns), it must not time out in between: the responder owes no
  // ACK for the first two.
  auto data = bytes(1024);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 5)), 0);
  ASSERT_EQ(qp_->transmit(sink_, 2, 1000), 2u);
  EXPECT_FALSE(pop().bth.ack_req);
  EXPECT_FALSE(pop().bth.ack_req);
  EXPECT_EQ(qp_->next_deadline(), 0u) << "no timer for packets nothing must answer";
  const Nanos later = 1000 + 100 * 8192;
  qp_->on_timer(later);
  ASSERT_EQ(qp_->transmit(sink_, 2, later), 2u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn + 2)) << "the message goes on where it was";
  const Sent last = pop();
  EXPECT_TRUE(last.bth.ack_req);
  EXPECT_EQ(qp_->next_deadline(), later + 8192);
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 3, ack, {}, false, later + 100);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(qp_->next_deadline(), 0u);
  EXPECT_EQ(qp_->counters().get(Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(qp_->counters().get(Counter::kCompleterRetryErr), 0u);
}

TEST_F(QpTest, AfterATimeoutTheTimerWaitsForTheResentAckReq) {
  auto data = bytes(1024);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 5)), 0);
  ASSERT_EQ(drain(0).size(), 4u);
  sink_.sent.clear();
  qp_->on_timer(8192);  // nothing came back: go back to +0
  ASSERT_EQ(qp_->transmit(sink_, 1, 8192), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn));
  // The first +0's ACK, late. Expect: no timer until +3, which asks for
  // an ACK, is sent again (the engine may take its time).
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 0};
  deliver(Opcode::kRcAcknowledge, kOurPsn, ack, {}, false, 8300);
  EXPECT_EQ(qp_->next_deadline(), 0u);
  ASSERT_EQ(drain(50'000).size(), 3u);
  EXPECT_EQ(qp_->next_deadline(), 50'000u + 8192);
}

TEST_F(QpTest, ANakOverTakenByALaterAckIsIgnored) {
  auto data = bytes(1024);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 5)), 0);
  ASSERT_EQ(drain(0).size(), 4u);
  sink_.sent.clear();
  // The responder NAKed PSN +1 (+1 lost), then received it resent and
  // acknowledged it; the network delivers the ACK first.
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 0};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 1, ack, {}, false, 100);
  wire::ExtHeaders nak;
  nak.aeth = {AethSyndrome::nak(NakCode::kPsnSequenceError), 0};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 1, nak, {}, false, 200);
  // Expect: no going back behind what is acknowledged; the rest is still
  // under the ACK timer, and its ACK completes the SEND.
  EXPECT_TRUE(drain(300).empty());
  EXPECT_EQ(qp_->counters().get(Counter::kCompleterRetryErr), 0u);
  EXPECT_NE(qp_->next_deadline(), 0u);
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 3, ack, {}, false, 400);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
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

}  // namespace
}  // namespace uroce::transport::test_qp
