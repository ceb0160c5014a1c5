/* SPDX-License-Identifier: BSD-3-Clause */
// The requester (requester.cc): how WRs become packets, binds and local
// invalidations in send-queue order, and what it refuses locally.

#include <gtest/gtest.h>

#include "transport/qp_harness.h"

namespace uroce::transport::test_qp {
namespace {

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

// SQD (IBA 10.3.1): the send queue finishes the message it is in the
// middle of and begins no other; it is drained once what it began is
// acknowledged, and back in RTS it goes on.
TEST_F(QpTest, SqdFinishesTheMessageItBeganAndBeginsNoOther) {
  auto first = bytes(1024);  // four packets at path MTU 256
  auto second = bytes(100, 7);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, first, 1)), 0);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, second, 2)), 0);
  ASSERT_EQ(qp_->transmit(sink_, 2, 0), 2u);
  sink_.sent.clear();
  QpAttr a;
  a.qp_state = QpState::kSqd;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  EXPECT_TRUE(qp_->attr().sq_draining);

  // Expect: the first SEND's last two packets, nothing of the second.
  ASSERT_EQ(drain(10).size(), 2u);
  EXPECT_EQ(pop().opcode(), Opcode::kRcSendMiddle);
  const Sent last = pop();
  EXPECT_EQ(last.opcode(), Opcode::kRcSendLast);
  EXPECT_EQ(last.bth.psn, Psn(kOurPsn) + 3);
  EXPECT_TRUE(qp_->attr().sq_draining) << "not acknowledged yet";
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, (Psn(kOurPsn) + 3).value(), ack, {}, false, 20);
  auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_FALSE(qp_->attr().sq_draining) << "drained";
  EXPECT_FALSE(qp_->has_work(30));
  EXPECT_TRUE(drain(30).empty());

  // Back in RTS, the second SEND goes.
  a.qp_state = QpState::kRts;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  ASSERT_EQ(drain(40).size(), 1u);
  const Sent only = pop();
  EXPECT_EQ(only.opcode(), Opcode::kRcSendOnly);
  EXPECT_EQ(only.payload, second);
}

TEST_F(QpTest, SqdResendsWhatItBeganWhenItIsLost) {
  auto data = bytes(512);  // two packets
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 1)), 0);
  ASSERT_EQ(drain(0).size(), 2u);
  sink_.sent.clear();
  QpAttr a;
  a.qp_state = QpState::kSqd;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  // The second packet was lost: the responder NAKs it.
  wire::ExtHeaders nak;
  nak.aeth = {AethSyndrome::nak(NakCode::kPsnSequenceError), 0};
  deliver(Opcode::kRcAcknowledge, (Psn(kOurPsn) + 1).value(), nak, {}, false, 100);
  ASSERT_EQ(drain(200).size(), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn) + 1);
  // And when its ACK never comes, the timer sends it again.
  qp_->on_timer(200 + 8192);
  ASSERT_EQ(drain(200 + 8192).size(), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn) + 1);
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, (Psn(kOurPsn) + 1).value(), ack, {}, false, 9000);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(qp_->state(), QpState::kSqd);
  EXPECT_FALSE(qp_->attr().sq_draining);
}

TEST_F(QpTest, AQpWithNothingBegunIsDrainedOnEnteringSqd) {
  auto data = bytes(64);
  QpAttr a;
  a.qp_state = QpState::kSqd;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  EXPECT_FALSE(qp_->attr().sq_draining);
  // A WR posted in SQD waits for RTS.
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, data, 1)), 0);
  EXPECT_TRUE(drain(0).empty());
  a.qp_state = QpState::kRts;
  ASSERT_EQ(qp_->modify(a, attr_mask::kState, 0), 0);
  EXPECT_EQ(drain(0).size(), 1u);
}

}  // namespace
}  // namespace uroce::transport::test_qp
