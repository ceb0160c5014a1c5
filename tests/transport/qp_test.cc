/* SPDX-License-Identifier: BSD-3-Clause */
// The QP (qp.cc): the IBA state machine, posting, flushing, and the
// congestion-control hooks it offers lib/cc.

#include <gtest/gtest.h>


#include "transport/qp_harness.h"

namespace uroce::transport::test_qp {
namespace {

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

// A WQE's slot is back with post_send before its completion can be
// polled: a program keeping its send queue full (qperf posts one WR per
// completion it polls) never gets ENOMEM. The CQ's notifier runs right
// as the completion lands, and posts from there.
TEST_F(QpTest, ASendQueueSlotIsFreeOnceItsCompletionIsVisible) {
  auto data = bytes(8);
  const SendWr w = send_wr(WrOpcode::kSend, data, 1);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(qp_->post_send(w), 0);
  ASSERT_EQ(qp_->post_send(w), ENOMEM) << "send queue full";
  ASSERT_EQ(drain().size(), 16u);
  struct PostOnCompletion : CqNotifier {
    void notify(Cq& cq) override {
      Wc wc;
      seen = cq.poll(&wc, 1);
      rc = qp->post_send(*wr);
    }
    Qp* qp = nullptr;
    const SendWr* wr = nullptr;
    std::uint32_t seen = 0;
    int rc = -1;
  } poster;
  poster.qp = qp_.get();
  poster.wr = &w;
  scq_.set_notifier(&poster);
  scq_.arm(false);
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, kOurPsn, ack);  // the first SEND only
  EXPECT_EQ(poster.seen, 1u);
  EXPECT_EQ(poster.rc, 0) << "the acknowledged WR's slot was still taken";
  scq_.set_notifier(nullptr);
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

}  // namespace
}  // namespace uroce::transport::test_qp
