/* SPDX-License-Identifier: BSD-3-Clause */
// Selective repeat (selective_repeat.cc), one QP at a time: the responder
// keeps what comes ahead of the expected PSN and says so, the requester
// resends only what a SACK shows lost, and neither uses it with a peer
// that does not offer it.

#include <gtest/gtest.h>

#include "qp_harness.h"
#include "transport/limits.h"

namespace uroce::transport::test_qp {
namespace {

class SelectiveRepeat : public QpTest {
 protected:
  void SetUp() override {
    make_qp(QpType::kRc, 4, /*selective_repeat=*/true);
    peer_offers_sr_ = true;
  }

  // A SACK from the peer: everything up to `acked` executed, `count` PSNs
  // from `first` held.
  void deliver_sack(std::uint32_t acked, std::uint32_t first, unsigned count) {
    std::vector<std::uint32_t> psns;
    for (unsigned k = 0; k < count; ++k) psns.push_back(first + k);
    deliver_sack(acked, psns);
  }
  // The same, the PSNs held listed.
  void deliver_sack(std::uint32_t acked, const std::vector<std::uint32_t>& psns) {
    std::uint8_t bytes[wire::SackEth::kSize] = {};
    for (const std::uint32_t psn : psns) {
      const std::int32_t i = Psn(psn) - Psn(acked + 1);
      ASSERT_TRUE(i >= 0 && i < static_cast<std::int32_t>(wire::SackEth::kBits));
      wire::SackEth::set(bytes, static_cast<unsigned>(i));
    }
    wire::ExtHeaders ext;
    ext.aeth = {AethSyndrome::ack(), 0};
    ext.sack.bytes = bytes;
    deliver(Opcode::kSelectiveAcknowledge, acked, ext);
  }

  // The PSNs a SACK says are held.
  static std::vector<std::uint32_t> held(const Sent& sack) {
    std::vector<std::uint32_t> out;
    const wire::SackEth view{sack.sack.data()};
    for (unsigned i = 0; i < wire::SackEth::kBits && !sack.sack.empty(); ++i)
      if (view.test(i)) out.push_back((sack.bth.psn + 1 + static_cast<int>(i)).value());
    return out;
  }

  std::uint64_t count(Counter c) const { return qp_->counters().get(c); }

  // Posts a signaled RDMA WRITE of `buf` (a packet per 256 bytes at this
  // path MTU) and sends it at `now`, every packet; the sink is left empty.
  void write_sent(std::vector<std::uint8_t>& buf, std::uint64_t id, Nanos now = 0) {
    SendWr wr = send_wr(WrOpcode::kRdmaWrite, buf, id);
    wr.remote_addr = 0x1000;
    wr.rkey = 0x42;
    ASSERT_EQ(qp_->post_send(wr), 0);
    ASSERT_EQ(drain(now).size(), (buf.size() + 255) / 256);
    sink_.sent.clear();
  }

  // The local ACK timeout of perftest and most programs: 4.096 us << 14,
  // 67 ms.
  static constexpr Nanos kFullTimeout = Nanos{4096} << 14;
  void use_full_timeout() {
    local_ack_timeout_ = 14;
    make_qp(QpType::kRc, 4, /*selective_repeat=*/true);
  }

  // Two one-packet SENDs (PSNs +0, +1) sent at 0 and acknowledged
  // together at 50 us. The ACK is the peer's first answer: it says the
  // peer keeps out of order, and times the first SEND's round trip (the
  // second is not timed, one at a time): SRTT 50 us, RTTVAR 25 us, so a
  // tail probe waits 150 us.
  void learn_peer() {
    std::vector<std::uint8_t> buf(8);
    ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 1)), 0);
    ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 1)), 0);
    ASSERT_EQ(drain(0).size(), 2u);
    sink_.sent.clear();
    wire::ExtHeaders ack;
    ack.aeth = {AethSyndrome::ack(), 0};
    deliver(Opcode::kRcAcknowledge, kOurPsn + 1, ack, {}, false, 50'000);
    ASSERT_EQ(poll(scq_).size(), 2u);
  }
};

TEST_F(SelectiveRepeat, ResponderKeepsWritesAheadOfAGapAndExecutesThemInOrder) {
  std::vector<std::uint8_t> target(3 * 16);
  const auto key = mem_.reg(target.data(), target.size(), kAll);
  auto write = [&](std::uint32_t k) {
    deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn + k, reth(target.data() + 16 * k, key, 16),
            bytes(16, static_cast<std::uint8_t>(16 * k)), /*ack_req=*/true);
  };
  const std::size_t bytes_before = qp_->state_bytes();
  write(1);  // PSN kPeerPsn lost
  write(2);
  EXPECT_EQ(target, std::vector<std::uint8_t>(48, 0)) << "nothing executes ahead of the gap";
  const std::size_t bytes_holding = qp_->state_bytes();
  EXPECT_GT(bytes_holding, bytes_before + kMaxUnackedPsns * sizeof(void*) + 2 * 16)
      << "the table of slots, and the kept frames";
  ASSERT_EQ(drain().size(), 1u) << "one SACK for both";
  Sent sack = pop();
  EXPECT_EQ(sack.opcode(), Opcode::kSelectiveAcknowledge);
  EXPECT_EQ(sack.bth.psn, Psn(kPeerPsn - 1)) << "nothing executed yet";
  EXPECT_EQ(held(sack), (std::vector<std::uint32_t>{kPeerPsn + 1, kPeerPsn + 2}));
  EXPECT_EQ(count(Counter::kSrOooKept), 2u);
  EXPECT_EQ(count(Counter::kPacketSeqErr), 0u) << "no NAK";

  write(1);  // a resend of a kept PSN: a duplicate, and a SACK again
  EXPECT_EQ(count(Counter::kSrOooKept), 2u);
  ASSERT_EQ(drain().size(), 1u);
  sack = pop();
  EXPECT_EQ(sack.opcode(), Opcode::kSelectiveAcknowledge);
  EXPECT_EQ(held(sack), (std::vector<std::uint32_t>{kPeerPsn + 1, kPeerPsn + 2}));

  write(0);  // the gap fills: all three execute, and one ACK covers them
  EXPECT_EQ(target, bytes(48, 0));
  ASSERT_EQ(drain().size(), 1u);
  const Sent ack = pop();
  EXPECT_EQ(ack.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(ack.bth.psn, Psn(kPeerPsn + 2));
  EXPECT_EQ(ack.ext.aeth.syndrome.type, wire::AethType::kAck);
  EXPECT_EQ(qp_->progress_state().rq_psn, kPeerPsn + 3);
  // What stays is the table of slots; the frames went when they ran.
  EXPECT_LT(qp_->state_bytes(), bytes_holding);
  EXPECT_LE(qp_->state_bytes(), bytes_before + kMaxUnackedPsns * sizeof(void*));
}

TEST_F(SelectiveRepeat, KeptSendsFillTheReceiveQueueInPsnOrder) {
  std::vector<std::uint8_t> first(32), second(32);
  post_recv(first, 1);
  post_recv(second, 2);
  deliver(Opcode::kRcSendOnly, kPeerPsn + 1, {}, bytes(8, 100), true);
  EXPECT_TRUE(poll(rcq_).empty());
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8, 1), true);
  const auto wc = poll(rcq_);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(std::vector<std::uint8_t>(first.begin(), first.begin() + 8), bytes(8, 1));
  EXPECT_EQ(std::vector<std::uint8_t>(second.begin(), second.begin() + 8), bytes(8, 100));
}

TEST_F(SelectiveRepeat, ARequesterThatDoesNotOfferItGetsASequenceNak) {
  peer_offers_sr_ = false;  // Linux rxe, a ConnectX in go-back-N
  std::vector<std::uint8_t> buf(16);
  post_recv(buf, 1);
  deliver(Opcode::kRcSendOnly, kPeerPsn + 1, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  const Sent nak = pop();
  EXPECT_EQ(nak.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(nak.ext.aeth.syndrome, AethSyndrome::nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(count(Counter::kSrOooKept), 0u);
}

TEST_F(SelectiveRepeat, AResponderThatDoesNotOfferItNaksAsBefore) {
  make_qp(QpType::kRc);  // selective repeat off
  std::vector<std::uint8_t> buf(16);
  post_recv(buf, 1);
  deliver(Opcode::kRcSendOnly, kPeerPsn + 1, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_EQ(pop().ext.aeth.syndrome, AethSyndrome::nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(count(Counter::kSrOooKept), 0u);
}

TEST_F(SelectiveRepeat, RequestsOfferItOnlyWhenTheQpDoes) {
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 1)), 0);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_TRUE(pop().bth.selective_repeat);
  make_qp(QpType::kRc);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 1)), 0);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_FALSE(pop().bth.selective_repeat);
}

TEST_F(SelectiveRepeat, RequesterResendsOnlyWhatTheSackShowsLost) {
  // Five packets of 256 bytes; the second is lost, the rest arrive.
  std::vector<std::uint8_t> buf = bytes(5 * 256, 3);
  write_sent(buf, 7);
  deliver_sack(kOurPsn, kOurPsn + 2, 3);
  ASSERT_EQ(drain().size(), 1u) << "only the lost packet goes again";
  const Sent resent = pop();
  EXPECT_EQ(resent.bth.psn, Psn(kOurPsn + 1));
  EXPECT_EQ(resent.opcode(), Opcode::kRcRdmaWriteMiddle);
  EXPECT_TRUE(resent.bth.ack_req) << "its answer ends the recovery";
  EXPECT_EQ(resent.payload, std::vector<std::uint8_t>(buf.begin() + 256, buf.begin() + 512));
  EXPECT_EQ(count(Counter::kSrRetransmitted), 1u);
  EXPECT_EQ(count(Counter::kCompleterRetryErr), 0u) << "no go-back-N";
  EXPECT_TRUE(poll(scq_).empty());

  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 4, ack);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

TEST_F(SelectiveRepeat, ATimeoutResendsWhatIsNotHeldAndProbesTheOldest) {
  std::vector<std::uint8_t> buf = bytes(4 * 256, 5);
  write_sent(buf, 8);
  // The first two are lost; the peer holds the last two. The recovery
  // resends the first two, and loses them again.
  deliver_sack(kOurPsn - 1, kOurPsn + 2, 2);
  ASSERT_EQ(drain().size(), 2u);
  sink_.sent.clear();
  // The local ACK timer expires: everything the peer does not hold goes
  // again, and no more.
  const Nanos later = qp_->next_deadline();
  ASSERT_NE(later, 0u);
  qp_->on_timer(later);
  auto& sent = drain(later);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].bth.psn, Psn(kOurPsn));
  EXPECT_EQ(sent[1].bth.psn, Psn(kOurPsn + 1));
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 1u);
  EXPECT_EQ(count(Counter::kCompleterRetryErr), 0u) << "no go-back-N";

  // Now everything arrived but the ACK was lost: a timeout resends the
  // oldest PSN alone, held or not, for the peer to acknowledge again.
  sink_.sent.clear();
  deliver_sack(kOurPsn + 1, kOurPsn + 2, 2);
  drain(later);
  sink_.sent.clear();
  const Nanos again = qp_->next_deadline();
  ASSERT_NE(again, 0u);
  qp_->on_timer(again);
  auto& probe = drain(again);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].bth.psn, Psn(kOurPsn + 2));
}

TEST_F(SelectiveRepeat, ResponsesSayTheResponderKeepsWhatComesOutOfOrder) {
  // Before any loss, so that the requester knows what its peer does.
  std::vector<std::uint8_t> buf(16);
  post_recv(buf, 1);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  const Sent ack = pop();
  EXPECT_EQ(ack.opcode(), Opcode::kRcAcknowledge);
  EXPECT_TRUE(ack.bth.selective_repeat);

  // Not to a requester that does not offer it (rxe reads nothing there,
  // but says nothing either).
  make_qp(QpType::kRc, 4, /*selective_repeat=*/true);
  peer_offers_sr_ = false;
  post_recv(buf, 1);
  deliver(Opcode::kRcSendOnly, kPeerPsn, {}, bytes(8), true);
  ASSERT_EQ(drain().size(), 1u);
  EXPECT_FALSE(pop().bth.selective_repeat);
}

TEST_F(SelectiveRepeat, ALossAtTheTailIsProbedAfterAFewRoundTrips) {
  use_full_timeout();
  learn_peer();
  // A WRITE of two packets, the last of what is posted: nothing sent
  // after a loss here draws a SACK.
  std::vector<std::uint8_t> buf = bytes(2 * 256, 9);
  const Nanos t = 200'000;
  write_sent(buf, 2, t);
  // Round-trip 50 us, deviation 25 us: srtt + 4 rttvar = 150 us.
  EXPECT_EQ(qp_->next_deadline(), t + 150'000);
  qp_->on_timer(t + 150'000);
  auto& probe = drain(t + 150'000);
  ASSERT_EQ(probe.size(), 1u) << "the oldest PSN alone";
  EXPECT_EQ(probe[0].bth.psn, Psn(kOurPsn + 2));
  EXPECT_TRUE(probe[0].bth.ack_req);
  EXPECT_EQ(count(Counter::kSrTailProbes), 1u);
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 0u) << "not a timeout";
  EXPECT_EQ(count(Counter::kCompleterRetryErr), 0u);
  sink_.sent.clear();
  // Nothing came back: the next probe waits twice as long.
  EXPECT_EQ(qp_->next_deadline(), t + 150'000 + 300'000);

  // The first packet arrives; the second was lost: a probe again, once
  // the ACK moved the requester on.
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 0};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 2, ack, {}, false, t + 200'000);
  const Nanos again = qp_->next_deadline();
  ASSERT_LT(again, t + 200'000 + kFullTimeout);
  qp_->on_timer(again);
  auto& second = drain(again);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].bth.psn, Psn(kOurPsn + 3));
  EXPECT_EQ(second[0].payload, std::vector<std::uint8_t>(buf.begin() + 256, buf.end()));
  EXPECT_EQ(count(Counter::kSrTailProbes), 2u);
  deliver(Opcode::kRcAcknowledge, kOurPsn + 3, ack, {}, false, again + 50'000);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(qp_->next_deadline(), 0u) << "nothing outstanding";
}

TEST_F(SelectiveRepeat, UnansweredTailProbesBackOffUntilTheFullTimeout) {
  use_full_timeout();
  learn_peer();
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 3)), 0);
  Nanos t = 200'000;
  ASSERT_EQ(drain(t).size(), 1u);
  // Probes after 150 us, 300 us, ... 38.4 ms: then 76.8 ms would be
  // longer than the full timeout, which runs instead and spends retry_cnt.
  Nanos wait = 150'000;
  for (unsigned k = 0; k < 9; ++k, wait *= 2) {
    ASSERT_EQ(qp_->next_deadline(), t + wait) << "probe " << k;
    t += wait;
    sink_.sent.clear();
    qp_->on_timer(t);
    ASSERT_EQ(drain(t).size(), 1u) << "probe " << k << " resends the SEND";
  }
  EXPECT_EQ(count(Counter::kSrTailProbes), 9u);
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 0u);
  ASSERT_EQ(qp_->next_deadline(), t + kFullTimeout);
  qp_->on_timer(t + kFullTimeout);
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 1u);
  EXPECT_EQ(count(Counter::kSrTailProbes), 9u);
}

TEST_F(SelectiveRepeat, ADeadPeerEndsTheQpWhateverItsTimeout) {
  // timeout 31: 2^31 x 4.096 us, 2.4 hours. Probes doubling from 150 us
  // would never get there; after the last one the full timeout runs and
  // spends retry_cnt (2) like any other.
  local_ack_timeout_ = 31;
  make_qp(QpType::kRc, 4, /*selective_repeat=*/true);
  learn_peer();
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 3)), 0);
  drain(200'000);
  std::vector<Wc> wc;
  for (int k = 0; k < 40 && wc.empty(); ++k) {
    const Nanos t = qp_->next_deadline();
    ASSERT_NE(t, 0u) << "the timer stopped with the SEND outstanding";
    qp_->on_timer(t);
    drain(t);
    sink_.sent.clear();
    wc = poll(scq_);
  }
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(count(Counter::kSrTailProbes), 17u);
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 3u);
}

TEST_F(SelectiveRepeat, WithoutAPeerThatKeepsOutOfOrderTheFullTimeoutRuns) {
  peer_offers_sr_ = false;  // its ACKs do not say it keeps them
  use_full_timeout();
  learn_peer();
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 3)), 0);
  ASSERT_EQ(drain(200'000).size(), 1u);
  EXPECT_EQ(qp_->next_deadline(), 200'000 + kFullTimeout);
}

TEST_F(SelectiveRepeat, ASackForAQpThatDidNotOfferItIsDropped) {
  make_qp(QpType::kRc);
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 1)), 0);
  drain();
  sink_.sent.clear();
  deliver_sack(kOurPsn, kOurPsn + 1, 0);  // would acknowledge the SEND
  EXPECT_EQ(count(Counter::kDroppedInvalid), 1u);
  EXPECT_TRUE(poll(scq_).empty()) << "not taken as an ACK";
  EXPECT_TRUE(drain().empty());
}

TEST_F(SelectiveRepeat, AProbeOfAReadAsksOnlyForTheResponsesMissing) {
  use_full_timeout();
  learn_peer();
  // A READ of two responses (PSNs +2, +3), the last of what is posted.
  std::vector<std::uint8_t> local(512);
  SendWr r = send_wr(WrOpcode::kRdmaRead, local, 3);
  r.remote_addr = 0x10000;
  r.rkey = 0x77;
  ASSERT_EQ(qp_->post_send(r), 0);
  const Nanos t = 200'000;
  ASSERT_EQ(drain(t).size(), 1u);
  sink_.sent.clear();

  // No response: the probe asks the whole READ again, from its PSN.
  ASSERT_EQ(qp_->next_deadline(), t + 150'000);
  qp_->on_timer(t + 150'000);
  ASSERT_EQ(drain(t + 150'000).size(), 1u);
  Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadRequest);
  EXPECT_EQ(s.bth.psn, Psn(kOurPsn + 2));
  EXPECT_EQ(s.ext.reth.va, 0x10000u);
  EXPECT_EQ(s.ext.reth.dma_length, 512u);

  // The first response comes, the second is lost: the next probe asks
  // for the second alone, from its PSN and address.
  const auto remote = bytes(512, 5);
  wire::ExtHeaders aeth;
  aeth.aeth = {AethSyndrome::ack(), 1};
  deliver(Opcode::kRcRdmaReadResponseFirst, kOurPsn + 2, aeth,
          std::vector<std::uint8_t>(remote.begin(), remote.begin() + 256), false, t + 200'000);
  const Nanos again = qp_->next_deadline();
  ASSERT_LT(again, t + 200'000 + kFullTimeout);
  qp_->on_timer(again);
  ASSERT_EQ(drain(again).size(), 1u);
  s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadRequest);
  EXPECT_EQ(s.bth.psn, Psn(kOurPsn + 3));
  EXPECT_EQ(s.ext.reth.va, 0x10000u + 256);
  EXPECT_EQ(s.ext.reth.dma_length, 256u);
  EXPECT_EQ(count(Counter::kSrTailProbes), 2u);
  EXPECT_EQ(count(Counter::kLocalAckTimeoutErr), 0u);

  // Its answer completes the READ with every byte in place.
  deliver(Opcode::kRcRdmaReadResponseOnly, kOurPsn + 3, aeth,
          std::vector<std::uint8_t>(remote.begin() + 256, remote.end()), false, again + 50'000);
  const auto wc = poll(scq_);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(local, remote);
  EXPECT_EQ(qp_->next_deadline(), 0u);
}

TEST_F(SelectiveRepeat, EveryKindOfAnswerCarriesTheOffer) {
  // A SACK, a READ's responses and a NAK, as well as the ACKs above.
  std::vector<std::uint8_t> target(16);
  const auto key = mem_.reg(target.data(), target.size(), kAll);
  deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn + 1, reth(target.data(), key, 16), bytes(16), true);
  ASSERT_EQ(drain().size(), 1u);
  Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kSelectiveAcknowledge);
  EXPECT_TRUE(s.bth.selective_repeat);

  deliver(Opcode::kRcRdmaReadRequest, kPeerPsn, reth(target.data(), key, 16), {}, true);
  auto& answers = drain();
  ASSERT_EQ(answers.size(), 2u) << "the READ's response, then the ACK of the kept WRITE";
  s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadResponseOnly);
  EXPECT_TRUE(s.bth.selective_repeat);
  s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(s.bth.psn, Psn(kPeerPsn + 1));
  EXPECT_TRUE(s.bth.selective_repeat);

  // A WRITE to a key nobody registered: NAK remote access error.
  deliver(Opcode::kRcRdmaWriteOnly, kPeerPsn + 2, reth(target.data(), key + 1, 16), bytes(16),
          true);
  ASSERT_EQ(drain().size(), 1u);
  s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcAcknowledge);
  EXPECT_EQ(s.ext.aeth.syndrome.type, wire::AethType::kNak);
  EXPECT_TRUE(s.bth.selective_repeat);
}

TEST_F(SelectiveRepeat, AResetQpForgetsItsPeerAndItsRoundTrip) {
  use_full_timeout();
  learn_peer();
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  ASSERT_EQ(qp_->modify(reset, attr_mask::kState, 0), 0);
  ASSERT_NO_FATAL_FAILURE(connect());
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 9)), 0);
  ASSERT_EQ(drain(1'000'000).size(), 1u);
  EXPECT_EQ(qp_->next_deadline(), 1'000'000 + kFullTimeout)
      << "no probe before the new peer's first answer";
}

TEST_F(SelectiveRepeat, ARequesterHeldByItsInitiatorDepthProbes) {
  use_full_timeout();
  learn_peer();
  // Five READs of one response each; the initiator depth (4) holds the
  // fifth, so nothing follows the fourth until an answer comes: a loss of
  // the last responses draws no SACK, though four PSNs are outstanding.
  std::vector<std::vector<std::uint8_t>> local(5, std::vector<std::uint8_t>(8));
  for (std::uint64_t k = 0; k < 5; ++k) {
    SendWr r = send_wr(WrOpcode::kRdmaRead, local[k], k);
    r.remote_addr = 0x10000 + 8 * k;
    r.rkey = 0x77;
    ASSERT_EQ(qp_->post_send(r), 0);
  }
  const Nanos t = 200'000;
  ASSERT_EQ(drain(t).size(), 4u);
  sink_.sent.clear();
  EXPECT_EQ(qp_->next_deadline(), t + 150'000) << "a tail probe's wait, not the full timeout";
  qp_->on_timer(t + 150'000);
  ASSERT_EQ(drain(t + 150'000).size(), 1u);
  const Sent s = pop();
  EXPECT_EQ(s.opcode(), Opcode::kRcRdmaReadRequest);
  EXPECT_EQ(s.bth.psn, Psn(kOurPsn + 2)) << "the oldest READ";
  EXPECT_EQ(count(Counter::kSrTailProbes), 1u);
}

TEST_F(SelectiveRepeat, ARequesterWithItsWindowFullProbes) {
  use_full_timeout();
  learn_peer();
  // A WRITE of 300 packets: 256 fill the window (kMaxUnackedPsns), and
  // nothing more goes until an answer comes.
  std::vector<std::uint8_t> buf = bytes(300 * 256, 4);
  SendWr wr = send_wr(WrOpcode::kRdmaWrite, buf, 2);
  wr.remote_addr = 0x1000;
  wr.rkey = 0x42;
  ASSERT_EQ(qp_->post_send(wr), 0);
  const Nanos t = 200'000;
  ASSERT_EQ(drain(t).size(), kMaxUnackedPsns);
  sink_.sent.clear();
  EXPECT_EQ(qp_->next_deadline(), t + 150'000) << "a tail probe's wait, not the full timeout";
  qp_->on_timer(t + 150'000);
  ASSERT_EQ(drain(t + 150'000).size(), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn + 2)) << "the oldest PSN alone";
}

TEST_F(SelectiveRepeat, AWindowFilledByAPacketThatAsksNoAckIsATailToo) {
  use_full_timeout();
  learn_peer();
  // A WRITE of 10 packets, then one of 300: the window fills at the
  // 246th packet of the second, which does not ask for an ACK (every
  // 64th does).
  std::vector<std::uint8_t> small = bytes(10 * 256, 1), large = bytes(300 * 256, 2);
  for (auto* buf : {&small, &large}) {
    SendWr wr = send_wr(WrOpcode::kRdmaWrite, *buf, buf->size());
    wr.remote_addr = 0x1000;
    wr.rkey = 0x42;
    ASSERT_EQ(qp_->post_send(wr), 0);
  }
  const Nanos t = 200'000;
  auto& sent = drain(t);
  ASSERT_EQ(sent.size(), kMaxUnackedPsns);
  EXPECT_FALSE(sent.back().bth.ack_req);
  sink_.sent.clear();
  EXPECT_EQ(qp_->next_deadline(), t + 150'000) << "a tail probe's wait, not the full timeout";
}

TEST_F(SelectiveRepeat, AResendAfterAnRnrNakIsNotTimed) {
  use_full_timeout();
  learn_peer();  // SRTT 50 us, RTTVAR 25 us
  std::vector<std::uint8_t> buf(8);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 2)), 0);
  ASSERT_EQ(drain(200'000).size(), 1u);
  sink_.sent.clear();
  // RNR NAK: the requester goes back and resends after the NAK's timer.
  wire::ExtHeaders rnr;
  rnr.aeth = {AethSyndrome::rnr_nak(3), 0};  // 30 us
  deliver(Opcode::kRcAcknowledge, kOurPsn + 2, rnr, {}, false, 210'000);
  qp_->on_timer(240'000);
  ASSERT_EQ(drain(240'000).size(), 1u);
  EXPECT_EQ(pop().bth.psn, Psn(kOurPsn + 2));
  // Its ACK comes 5 ms later. Which send it answers is unknown (Karn):
  // no sample, and the round trip stays 50 us.
  wire::ExtHeaders ack;
  ack.aeth = {AethSyndrome::ack(), 0};
  deliver(Opcode::kRcAcknowledge, kOurPsn + 2, ack, {}, false, 5'240'000);
  ASSERT_EQ(poll(scq_).size(), 1u);
  ASSERT_EQ(qp_->post_send(send_wr(WrOpcode::kSend, buf, 3)), 0);
  const Nanos t = 6'000'000;
  ASSERT_EQ(drain(t).size(), 1u);
  EXPECT_EQ(qp_->next_deadline(), t + 150'000) << "a probe after SRTT + 4 RTTVAR, as before";
}

TEST_F(SelectiveRepeat, AProbeDuringARecoveryResendsTheOldestAlone) {
  use_full_timeout();
  learn_peer();
  std::vector<std::uint8_t> buf = bytes(4 * 256, 6);
  const Nanos t = 200'000;
  write_sent(buf, 2, t);  // PSNs +2 .. +5
  // The responder holds +4 and +5: +2 and +3 are resent.
  deliver_sack(kOurPsn + 1, kOurPsn + 4, 2);
  auto& resent = drain(t + 50'000);
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_EQ(resent[0].bth.psn, Psn(kOurPsn + 2));
  EXPECT_EQ(resent[1].bth.psn, Psn(kOurPsn + 3));
  sink_.sent.clear();
  // Both resends are lost, and nothing answers: the tail probe resends
  // the oldest PSN alone, not the whole recovery again.
  const Nanos probe_at = qp_->next_deadline();
  ASSERT_LT(probe_at, t + kFullTimeout);
  qp_->on_timer(probe_at);
  auto& probe = drain(probe_at);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].bth.psn, Psn(kOurPsn + 2));
  EXPECT_EQ(probe[0].payload, std::vector<std::uint8_t>(buf.begin(), buf.begin() + 256));
  EXPECT_EQ(count(Counter::kSrTailProbes), 1u);
}

}  // namespace
}  // namespace uroce::transport::test_qp
