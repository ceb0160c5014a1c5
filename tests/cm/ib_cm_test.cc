/* SPDX-License-Identifier: BSD-3-Clause */
// The IB CM state machine one message at a time: two IbCms whose MADs the
// test carries by hand, checking the exact MADs each step emits, the
// states, the events, the timers and the counters, against what cm.c
// does (research/rdma-cm.md 3.4, 3.6).

#include "cm/ib_cm.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <deque>

#include "cm/mad_samples.h"
#include "cm/seeded_random.h"

namespace uroce::cm {
namespace {

using test::kMs;
using test::SeededRandom;

class CaptureSender : public MadSender {
 public:
  void send_mad(const OutMad& m) override { sent.push_back(m); }
  std::deque<OutMad> sent;
};

Mad decoded(const OutMad& m) {
  Mad d;
  MadError e{};
  EXPECT_TRUE(decode(m.mad, d, e)) << name(e);
  return d;
}

template <typename T>
T msg_of(const OutMad& m) {
  Mad d = decoded(m);
  EXPECT_TRUE(std::holds_alternative<T>(d.msg)) << name(attr_id_of(d.msg));
  return std::holds_alternative<T>(d.msg) ? std::get<T>(d.msg) : T{};
}

constexpr std::uint64_t kSid = 0x0000000001061C06;  // TCP port 7174

struct Side {
  Side(std::uint64_t guid, const char* ip, std::uint64_t seed)
      : random(seed), cm(IbCmConfig{guid, 15, 7, 1, {*wire::IpAddr::parse(ip)}}, sender, random) {
    addr = *wire::IpAddr::parse(ip);
  }
  SeededRandom random;
  CaptureSender sender;
  IbCm cm;
  wire::IpAddr addr;

  std::vector<CmEvent> events() {
    std::vector<CmEvent> v;
    CmEvent e;
    while (cm.poll_event(e)) v.push_back(e);
    return v;
  }
  OutMad take() {
    EXPECT_FALSE(sender.sent.empty());
    if (sender.sent.empty()) return {};
    OutMad m = sender.sent.front();
    sender.sent.pop_front();
    return m;
  }
};

// An active and a passive CM, 10.0.0.1 and 10.0.0.2; the passive one
// listens on TCP port 7174.
class IbCmPair : public ::testing::Test {
 protected:
  IbCmPair() : a_(0xA1, "10.0.0.1", 1), b_(0xB2, "10.0.0.2", 2) {
    listen_id_ = b_.cm.create_id(77);
    EXPECT_EQ(b_.cm.listen(listen_id_, kSid), 0);
  }

  GsiAddress from(const Side& s, const Side& to) const {
    GsiAddress g;
    g.local_ip = to.addr;
    g.remote_ip = s.addr;
    g.remote_qpn = 1;
    return g;
  }
  /// Carries one MAD from `s` to `to`.
  void carry(Side& s, Side& to, const OutMad& m) { to.cm.receive(m.mad, from(s, to), now_); }

  ReqParam req_param() const {
    ReqParam p;
    p.path.sgid = a_.addr;
    p.path.dgid = b_.addr;
    p.service_id = kSid;
    p.qp_num = 0x1234;
    p.starting_psn = 0xABCDE;
    p.responder_resources = 4;
    p.initiator_depth = 2;
    return p;
  }

  /// REQ from a, received by b: returns (a's id, b's new id).
  std::pair<std::uint32_t, std::uint32_t> req() {
    const std::uint32_t id = a_.cm.create_id(5);
    EXPECT_EQ(a_.cm.send_req(id, req_param(), now_), 0);
    carry(a_, b_, a_.take());
    auto ev = b_.events();
    EXPECT_EQ(ev.size(), 1u);
    return {id, ev.empty() ? 0 : ev[0].id};
  }

  /// A connection through REQ, REP, RTU; both ESTABLISHED.
  std::pair<std::uint32_t, std::uint32_t> establish() {
    auto [ai, bi] = req();
    RepParam rp;
    rp.qp_num = 0x5678;
    rp.starting_psn = 0x12345;
    rp.responder_resources = 2;
    rp.initiator_depth = 4;
    EXPECT_EQ(b_.cm.send_rep(bi, rp, now_), 0);
    carry(b_, a_, b_.take());
    EXPECT_EQ(a_.events().size(), 1u);
    EXPECT_EQ(a_.cm.send_rtu(ai, {}, now_), 0);
    carry(a_, b_, a_.take());
    EXPECT_EQ(b_.events().size(), 1u);
    EXPECT_EQ(a_.cm.state(ai), CmState::kEstablished);
    EXPECT_EQ(b_.cm.state(bi), CmState::kEstablished);
    return {ai, bi};
  }

  /// Runs `s`'s timers until `t`.
  void advance(Side& s, Nanos t) {
    while (s.cm.next_deadline() && s.cm.next_deadline() <= t) {
      now_ = s.cm.next_deadline();
      s.cm.on_timer(now_);
    }
    now_ = t;
  }

  Side a_;
  Side b_;
  std::uint32_t listen_id_ = 0;
  Nanos now_ = 1000;
};

TEST_F(IbCmPair, ReqToAServiceNobodyListensOnIsRejectedAtOnce) {
  ReqParam p = req_param();
  p.service_id = 0x0000000001060001;
  const std::uint32_t id = a_.cm.create_id();
  ASSERT_EQ(a_.cm.send_req(id, p, now_), 0);
  const OutMad req = a_.take();
  carry(a_, b_, req);
  // Expect: REJ INVALID_SERVICE_ID (8) for the REQ, LocalCommID 0, the
  // REQ's TID, to QP 1 of the sender.
  const OutMad out = b_.take();
  EXPECT_EQ(out.to.remote_ip, a_.addr);
  EXPECT_EQ(out.to.remote_qpn, 1u);
  EXPECT_EQ(decoded(out).hdr.tid, decoded(req).hdr.tid);
  const auto rej = msg_of<RejMsg>(out);
  EXPECT_EQ(rej.reason, 8);
  EXPECT_EQ(rej.message_rejected, MsgResponse::kReq);
  EXPECT_EQ(rej.local_comm_id, 0u);
  EXPECT_EQ(rej.remote_comm_id, id);
  EXPECT_TRUE(b_.events().empty());
  // Expect: the active side takes it as a REJ of its REQ, back to IDLE.
  carry(b_, a_, out);
  const auto ev = a_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kRejReceived);
  EXPECT_EQ(a_.cm.state(id), CmState::kIdle);
  EXPECT_EQ(a_.cm.next_deadline(), 0u);
}

TEST_F(IbCmPair, ReqCarriesTheParametersAtTheirFieldsAndTheTidOfCmFormTid) {
  const std::uint32_t id = a_.cm.create_id();
  ASSERT_EQ(a_.cm.send_req(id, req_param(), now_), 0);
  const OutMad out = a_.take();
  const Mad m = decoded(out);
  // Expect: TID (hi_tid << 32) | local comm ID.
  EXPECT_EQ(m.hdr.tid, std::uint64_t{7} << 32 | id);
  const auto& r = std::get<ReqMsg>(m.msg);
  EXPECT_EQ(r.local_comm_id, id);
  EXPECT_EQ(r.service_id, kSid);
  EXPECT_EQ(r.local_ca_guid, 0xA1u);
  EXPECT_EQ(r.local_qpn, 0x1234u);
  EXPECT_EQ(r.starting_psn, 0xABCDEu);
  EXPECT_EQ(r.responder_resources, 4);
  EXPECT_EQ(r.initiator_depth, 2);
  EXPECT_EQ(r.remote_cm_response_timeout, 20);
  EXPECT_EQ(r.local_cm_response_timeout, 20);
  EXPECT_EQ(r.max_cm_retries, 15);
  EXPECT_EQ(r.pkey, 0xFFFF);
  EXPECT_EQ(r.path_mtu, 3);  // 1024
  EXPECT_EQ(r.transport_type, TransportType::kRc);
  // Expect: permissive LIDs and not subnet-local over RoCEv2 (hop limit 64).
  EXPECT_EQ(r.primary.local_lid, 0xFFFF);
  EXPECT_EQ(r.primary.remote_lid, 0xFFFF);
  EXPECT_FALSE(r.primary.subnet_local);
  EXPECT_EQ(r.primary.local_gid, a_.addr);
  EXPECT_EQ(r.primary.remote_gid, b_.addr);
  // Expect: LocalACKTimeout cm_ack_timeout(15, 18) = 19.
  EXPECT_EQ(r.primary.local_ack_timeout, 19);
  EXPECT_EQ(r.vendor_id, 0u);  // ECE: vendor 0
  EXPECT_EQ(a_.cm.counters().tx_msgs.get(CmAttr::kReq), 1u);
}

TEST_F(IbCmPair, ReqIsResentEvery6144MsFifteenTimesThenFails) {
  const std::uint32_t id = a_.cm.create_id();
  ASSERT_EQ(a_.cm.send_req(id, req_param(), now_), 0);
  a_.take();
  const Nanos start = now_;
  // Expect: 2 * 2^(18-8) + 2^(20-8) = 6144 ms between sends.
  EXPECT_EQ(a_.cm.next_deadline(), start + 6144 * kMs);
  for (int i = 1; i <= 15; ++i) {
    advance(a_, start + Nanos(i) * 6144 * kMs);
    ASSERT_EQ(a_.sender.sent.size(), 1u) << i;
    EXPECT_EQ(msg_of<ReqMsg>(a_.take()).local_comm_id, id);
  }
  EXPECT_TRUE(a_.events().empty());
  advance(a_, start + 16 * 6144 * kMs);
  // Expect: after the 15th resend times out, REQ_ERROR, -ETIMEDOUT, IDLE.
  const auto ev = a_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kReqError);
  EXPECT_EQ(ev[0].status, -ETIMEDOUT);
  EXPECT_EQ(a_.cm.state(id), CmState::kIdle);
  EXPECT_EQ(a_.cm.counters().tx_msgs.get(CmAttr::kReq), 16u);
  EXPECT_EQ(a_.cm.counters().tx_retries.get(CmAttr::kReq), 15u);
  EXPECT_EQ(a_.cm.next_deadline(), 0u);
}

TEST_F(IbCmPair, DuplicateReqIsSilentUntilADelayedMraThenGetsTheMra) {
  auto [ai, bi] = req();
  EXPECT_EQ(b_.cm.state(bi), CmState::kReqRcvd);
  const OutMad again = [&] {
    advance(a_, now_ + 6144 * kMs);
    return a_.take();
  }();
  // Expect: a duplicate while REQ_RCVD: nothing sent, counted.
  carry(a_, b_, again);
  EXPECT_TRUE(b_.sender.sent.empty());
  EXPECT_EQ(b_.cm.counters().rx_duplicates.get(CmAttr::kReq), 1u);
  // Expect: a delayed MRA (CMA_CM_MRA_SETTING) sends nothing by itself.
  ASSERT_EQ(b_.cm.send_mra(bi, kMraFlagDelay | 24, {}, now_), 0);
  EXPECT_TRUE(b_.sender.sent.empty());
  EXPECT_EQ(b_.cm.state(bi), CmState::kMraReqSent);
  // Expect: the next duplicate gets the MRA: REQ MRAed, ServiceTimeout 24.
  carry(a_, b_, again);
  const OutMad mra_out = b_.take();
  const auto mra = msg_of<MraMsg>(mra_out);
  EXPECT_EQ(mra.message_mraed, MsgResponse::kReq);
  EXPECT_EQ(mra.service_timeout, 24);
  EXPECT_EQ(mra.local_comm_id, bi);
  EXPECT_EQ(mra.remote_comm_id, ai);
  EXPECT_EQ(b_.cm.counters().tx_retries.get(CmAttr::kMra), 1u);
  // Expect: the MRA stretches the active side's wait to 2^16 + 2^(19-8) ms.
  carry(b_, a_, mra_out);
  EXPECT_EQ(a_.cm.state(ai), CmState::kMraReqRcvd);
  EXPECT_EQ(a_.cm.next_deadline(), now_ + (65536 + 2048) * kMs);
  EXPECT_EQ(a_.events().at(0).type, CmEventType::kMraReceived);
}

TEST_F(IbCmPair, RepIsResentOnTheActiveSidesResponseTimeoutAndFailsAfterItsRetries) {
  auto [ai, bi] = req();
  RepParam rp;
  rp.qp_num = 0x99;
  ASSERT_EQ(b_.cm.send_rep(bi, rp, now_), 0);
  const OutMad rep_out = b_.take();
  const auto rep = msg_of<RepMsg>(rep_out);
  // Expect: the REP echoes the REQ's TID and names both comm IDs.
  EXPECT_EQ(decoded(rep_out).hdr.tid, std::uint64_t{7} << 32 | ai);
  EXPECT_EQ(rep.local_comm_id, bi);
  EXPECT_EQ(rep.remote_comm_id, ai);
  EXPECT_EQ(rep.target_ack_delay, 15);
  EXPECT_EQ(rep.local_ca_guid, 0xB2u);
  const Nanos start = now_;
  // Expect: resent every 2^(20-8) = 4096 ms, 15 times, then REP_ERROR.
  EXPECT_EQ(b_.cm.next_deadline(), start + 4096 * kMs);
  advance(b_, start + 15 * 4096 * kMs);
  EXPECT_EQ(b_.sender.sent.size(), 15u);
  EXPECT_TRUE(b_.events().empty());
  advance(b_, start + 16 * 4096 * kMs);
  const auto ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kRepError);
  EXPECT_EQ(b_.cm.state(bi), CmState::kIdle);
}

TEST_F(IbCmPair, DuplicateRepAfterEstablishedGetsTheRtuAgain) {
  auto [ai, bi] = req();
  ASSERT_EQ(b_.cm.send_rep(bi, RepParam{}, now_), 0);
  const OutMad rep = b_.take();
  carry(b_, a_, rep);
  EXPECT_EQ(a_.events().at(0).type, CmEventType::kRepReceived);
  EXPECT_EQ(a_.cm.state(ai), CmState::kRepRcvd);
  const std::array<std::uint8_t, 3> pd = {1, 2, 3};
  ASSERT_EQ(a_.cm.send_rtu(ai, pd, now_), 0);
  const OutMad rtu = a_.take();
  // Expect: the RTU was lost; the REP comes again, and the RTU with it,
  // with the same private data.
  carry(b_, a_, rep);
  const OutMad again = a_.take();
  EXPECT_EQ(again.mad, rtu.mad);
  EXPECT_EQ(a_.cm.counters().rx_duplicates.get(CmAttr::kRep), 1u);
  EXPECT_EQ(a_.cm.counters().tx_retries.get(CmAttr::kRtu), 1u);
  EXPECT_TRUE(a_.events().empty());
  carry(a_, b_, again);
  EXPECT_EQ(b_.events().at(0).type, CmEventType::kRtuReceived);
  EXPECT_EQ(b_.cm.state(bi), CmState::kEstablished);
  // Expect: a duplicate RTU is counted and changes nothing.
  carry(a_, b_, rtu);
  EXPECT_EQ(b_.cm.counters().rx_duplicates.get(CmAttr::kRtu), 1u);
  EXPECT_TRUE(b_.events().empty());
}

TEST_F(IbCmPair, DisconnectThenTimewaitThenTimewaitExit) {
  auto [ai, bi] = establish();
  ASSERT_EQ(a_.cm.send_dreq(ai, {}, now_), 0);
  const OutMad dreq_out = a_.take();
  const auto dreq = msg_of<DreqMsg>(dreq_out);
  // Expect: the DREQ names the peer's QPN (which it checks) and a fresh TID.
  EXPECT_EQ(dreq.remote_qpn, 0x5678u);
  EXPECT_EQ(decoded(dreq_out).hdr.tid, std::uint64_t{7} << 32 | ai);
  carry(a_, b_, dreq_out);
  EXPECT_EQ(b_.events().at(0).type, CmEventType::kDreqReceived);
  EXPECT_EQ(b_.cm.state(bi), CmState::kDreqRcvd);
  ASSERT_EQ(b_.cm.send_drep(bi, {}, now_), 0);
  EXPECT_EQ(b_.cm.state(bi), CmState::kTimewait);
  const OutMad drep = b_.take();
  EXPECT_EQ(decoded(drep).hdr.tid, decoded(dreq_out).hdr.tid);
  // Expect: the DREP was lost; the DREQ's resend gets it again from timewait.
  advance(a_, now_ + 6144 * kMs);
  const OutMad dreq_again = a_.take();
  carry(a_, b_, dreq_again);
  EXPECT_EQ(b_.take().mad, drep.mad);
  EXPECT_EQ(b_.cm.counters().rx_duplicates.get(CmAttr::kDreq), 1u);
  carry(b_, a_, drep);
  EXPECT_EQ(a_.events().at(0).type, CmEventType::kDrepReceived);
  EXPECT_EQ(a_.cm.state(ai), CmState::kTimewait);
  // Expect: timewait lasts 2^(LocalACKTimeout - 8) ms: 19 on both sides.
  const Nanos tw = now_;
  advance(a_, tw + 2047 * kMs);
  EXPECT_TRUE(a_.events().empty());
  advance(a_, tw + 2048 * kMs);
  auto ev = a_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kTimewaitExit);
  EXPECT_EQ(a_.cm.state(ai), CmState::kIdle);
  advance(b_, tw + 4096 * kMs);
  ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kTimewaitExit);
}

TEST_F(IbCmPair, DreqOfAnUnknownConnectionGetsADrep) {
  DreqMsg d;
  d.local_comm_id = 0x1111;
  d.remote_comm_id = 0x2222;
  MadHdr h;
  h.tid = 0x77;
  b_.cm.receive(test::encode_mad(h, d), from(a_, b_), now_);
  // Expect: DREP with the IDs swapped and the DREQ's TID (cm_issue_drep).
  const OutMad out = b_.take();
  const auto drep = msg_of<DrepMsg>(out);
  EXPECT_EQ(drep.local_comm_id, 0x2222u);
  EXPECT_EQ(drep.remote_comm_id, 0x1111u);
  EXPECT_EQ(decoded(out).hdr.tid, 0x77u);
  EXPECT_EQ(b_.cm.counters().rx_duplicates.get(CmAttr::kDreq), 1u);
}

TEST_F(IbCmPair, DreqNamingAnotherQpnIsDropped) {
  auto [ai, bi] = establish();
  ASSERT_EQ(a_.cm.send_dreq(ai, {}, now_), 0);
  OutMad out = a_.take();
  // The DREQ's RemoteQPN rewritten: not the passive side's QP.
  set_field(out.mad.data(), dreq::kRemoteQpn, 0x5679);
  carry(a_, b_, out);
  EXPECT_EQ(b_.cm.state(bi), CmState::kEstablished);
  EXPECT_TRUE(b_.events().empty());
  EXPECT_EQ(b_.cm.counters().rx_dropped.get(CmDrop::kDreqQpnMismatch), 1u);
}

TEST_F(IbCmPair, ReqFromAQpnInTimewaitIsRejectedAsAStaleConnection) {
  auto [ai, bi] = establish();
  ASSERT_EQ(a_.cm.send_dreq(ai, {}, now_), 0);
  carry(a_, b_, a_.take());
  ASSERT_EQ(b_.cm.send_drep(bi, {}, now_), 0);
  carry(b_, a_, b_.take());
  b_.events();
  a_.events();
  ASSERT_EQ(b_.cm.state(bi), CmState::kTimewait);
  // Expect: a new REQ from the same QPN and CA GUID while the old
  // connection is in timewait: REJ STALE_CONN (10), no event.
  const std::uint32_t again = a_.cm.create_id();
  ASSERT_EQ(a_.cm.send_req(again, req_param(), now_), 0);
  const OutMad req = a_.take();
  carry(a_, b_, req);
  const auto rej = msg_of<RejMsg>(b_.take());
  EXPECT_EQ(rej.reason, 10);
  EXPECT_EQ(rej.remote_comm_id, again);
  EXPECT_TRUE(b_.events().empty());
  // Expect: once the timewait ends, the same REQ is a new connection.
  advance(b_, now_ + 2048 * kMs);
  EXPECT_EQ(b_.events().at(0).type, CmEventType::kTimewaitExit);
  carry(a_, b_, req);
  const auto ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kReqReceived);
  EXPECT_EQ(ev[0].listen_id, listen_id_);
  EXPECT_EQ(ev[0].context, 77u);
}

TEST_F(IbCmPair, DestroyingAnActiveIdRejectsWithTimeoutAndItsGuid) {
  auto [ai, bi] = req();
  ASSERT_EQ(b_.cm.send_mra(bi, kMraFlagDelay | 24, {}, now_), 0);
  a_.cm.destroy_id(ai, now_);
  EXPECT_FALSE(a_.cm.exists(ai));
  EXPECT_EQ(a_.cm.next_deadline(), 0u);
  const OutMad out = a_.take();
  const auto rej = msg_of<RejMsg>(out);
  // Expect: REJ TIMEOUT (4), ARI = the CA GUID, by which the passive side
  // finds its half though it names no remote comm ID.
  EXPECT_EQ(rej.reason, 4);
  EXPECT_EQ(rej.reject_info_length, 8);
  EXPECT_EQ(wire::load_be64(rej.ari.data()), 0xA1u);
  carry(a_, b_, out);
  const auto ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kRejReceived);
  EXPECT_EQ(b_.cm.state(bi), CmState::kIdle);
}

TEST_F(IbCmPair, DestroyingAPassiveIdBeforeAnsweringRejectsConsumerDefinedOrStaysSilentForEnomem) {
  auto [ai, bi] = req();
  b_.cm.destroy_id(bi, now_, ENOMEM);
  // Expect: no room (ENOMEM): nothing sent, so the REQ's resend may succeed.
  EXPECT_TRUE(b_.sender.sent.empty());
  EXPECT_EQ(b_.cm.counters().rx_dropped.get(CmDrop::kBacklogFull), 1u);
  advance(a_, now_ + 6144 * kMs);
  carry(a_, b_, a_.take());
  const auto ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  b_.cm.destroy_id(ev[0].id, now_, EINVAL);
  const auto rej = msg_of<RejMsg>(b_.take());
  EXPECT_EQ(rej.reason, 28);
  EXPECT_EQ(rej.local_comm_id, 0u);
  EXPECT_EQ(rej.remote_comm_id, ai);
}

TEST_F(IbCmPair, ForgedMessagesNamingNoConnectionAreDroppedAndCounted) {
  auto [ai, bi] = establish();
  const auto before_a = a_.cm.state(ai);
  const auto before_b = b_.cm.state(bi);
  MadHdr h;
  // A REP that answers no REQ of ours.
  RepMsg rep;
  rep.local_comm_id = 0x4242;
  rep.remote_comm_id = 0x5151;
  a_.cm.receive(test::encode_mad(h, rep), from(b_, a_), now_);
  // An RTU, DREP, REJ and MRA with a right local ID but a wrong remote one.
  RtuMsg rtu;
  rtu.local_comm_id = ai ^ 1;
  rtu.remote_comm_id = bi;
  b_.cm.receive(test::encode_mad(h, rtu), from(a_, b_), now_);
  RejMsg rej;
  rej.local_comm_id = ai ^ 1;
  rej.remote_comm_id = bi;
  rej.message_rejected = MsgResponse::kOther;
  rej.reason = 28;
  b_.cm.receive(test::encode_mad(h, rej), from(a_, b_), now_);
  DrepMsg drep;
  drep.local_comm_id = bi;
  drep.remote_comm_id = ai ^ 0x100;
  a_.cm.receive(test::encode_mad(h, drep), from(b_, a_), now_);
  MraMsg mra;
  mra.local_comm_id = 9;
  mra.remote_comm_id = ai;
  mra.message_mraed = MsgResponse::kRep;
  a_.cm.receive(test::encode_mad(h, mra), from(b_, a_), now_);
  SidrRepMsg sidr;
  sidr.request_id = ai;
  a_.cm.receive(test::encode_mad(h, sidr), from(b_, a_), now_);
  // Expect: nothing sent, no event, no state changed; each counted.
  EXPECT_TRUE(a_.sender.sent.empty());
  EXPECT_TRUE(b_.sender.sent.empty());
  EXPECT_TRUE(a_.events().empty());
  EXPECT_TRUE(b_.events().empty());
  EXPECT_EQ(a_.cm.state(ai), before_a);
  EXPECT_EQ(b_.cm.state(bi), before_b);
  EXPECT_EQ(a_.cm.counters().rx_dropped.get(CmDrop::kUnmatchedCommId), 4u);
  EXPECT_EQ(b_.cm.counters().rx_dropped.get(CmDrop::kUnmatchedCommId), 2u);
}

TEST_F(IbCmPair, MalformedMadsAreCountedByReasonAndChangeNothing) {
  auto [ai, bi] = establish();
  RtuMsg rtu;
  rtu.local_comm_id = ai;
  rtu.remote_comm_id = bi;
  auto good = test::encode_mad({}, rtu);
  auto bad = good;
  bad[2] = 1;  // class version 1
  b_.cm.receive(bad, from(a_, b_), now_);
  bad = good;
  bad[1] = 0x03;  // SA class
  b_.cm.receive(bad, from(a_, b_), now_);
  bad = good;
  bad[0] = 0;
  b_.cm.receive(bad, from(a_, b_), now_);
  bad = good;
  bad[3] = 0x81;  // GetResp
  b_.cm.receive(bad, from(a_, b_), now_);
  b_.cm.receive(wire::ConstBytes(good).first(200), from(a_, b_), now_);
  bad = good;
  wire::store_be16(&bad[16], 0x0019);  // LAP
  b_.cm.receive(bad, from(a_, b_), now_);
  GsiAddress limited = from(a_, b_);
  limited.pkey = 0x8001;
  b_.cm.receive(good, limited, now_);
  const CmCounters& c = b_.cm.counters();
  EXPECT_EQ(c.rx_malformed.get(MadError::kClassVersion), 1u);
  EXPECT_EQ(c.rx_malformed.get(MadError::kMgmtClass), 1u);
  EXPECT_EQ(c.rx_malformed.get(MadError::kBaseVersion), 1u);
  EXPECT_EQ(c.rx_malformed.get(MadError::kMethod), 1u);
  EXPECT_EQ(c.rx_malformed.get(MadError::kTruncated), 1u);
  EXPECT_EQ(c.rx_malformed.get(MadError::kAlternatePath), 1u);
  EXPECT_EQ(c.rx_msgs.get(CmAttr::kLap), 1u);
  EXPECT_EQ(c.rx_dropped.get(CmDrop::kBadPkey), 1u);
  EXPECT_TRUE(b_.sender.sent.empty());
  EXPECT_TRUE(b_.events().empty());
  EXPECT_EQ(b_.cm.state(bi), CmState::kEstablished);
}

TEST_F(IbCmPair, QpAttributesFollowTheStateAndSwapResourcesAndPsns) {
  const std::uint32_t id = a_.cm.create_id();
  QpAttr attr;
  unsigned mask = 0;
  EXPECT_EQ(a_.cm.init_qp_attr(id, QpState::kInit, attr, mask), EINVAL);  // IDLE
  ASSERT_EQ(a_.cm.send_req(id, req_param(), now_), 0);
  carry(a_, b_, a_.take());
  const std::uint32_t bi = b_.events().at(0).id;
  // Expect: REQ_SENT has INIT attributes, not RTR ones.
  EXPECT_EQ(a_.cm.init_qp_attr(id, QpState::kInit, attr, mask), 0);
  EXPECT_EQ(a_.cm.init_qp_attr(id, QpState::kRtr, attr, mask), EINVAL);

  using namespace qp_attr_mask;
  // Passive, REQ_RCVD: RTR from the REQ: its QPN and the resources swapped.
  ASSERT_EQ(b_.cm.init_qp_attr(bi, QpState::kRtr, attr, mask), 0);
  EXPECT_EQ(mask, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer);
  EXPECT_EQ(attr.dest_qp_num, 0x1234u);
  EXPECT_EQ(attr.max_dest_rd_atomic, 2);  // the REQ's InitiatorDepth
  EXPECT_EQ(attr.path_mtu, wire::Mtu::k1024);
  EXPECT_EQ(attr.ah_attr.grh.dgid, a_.addr);
  EXPECT_EQ(attr.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(attr.ah_attr.is_global, 1);
  // RTS: it sends from the REQ's StartingPSN; its ACK timeout is the REQ's 19.
  ASSERT_EQ(b_.cm.init_qp_attr(bi, QpState::kRts, attr, mask), 0);
  EXPECT_EQ(mask, kState | kSqPsn | kRetryCnt | kRnrRetry | kMaxQpRdAtomic | kTimeout);
  EXPECT_EQ(attr.sq_psn, 0xABCDEu);
  EXPECT_EQ(attr.max_rd_atomic, 4);  // the REQ's ResponderResources
  EXPECT_EQ(attr.timeout, 19);
  EXPECT_EQ(attr.retry_cnt, 7);
  EXPECT_EQ(attr.rnr_retry, 7);
  // INIT: READ and ATOMIC because responder resources were offered.
  ASSERT_EQ(b_.cm.init_qp_attr(bi, QpState::kInit, attr, mask), 0);
  EXPECT_EQ(mask, kState | kAccessFlags | kPkeyIndex | kPort);
  EXPECT_EQ(attr.qp_access_flags,
            qp_access::kRemoteWrite | qp_access::kRemoteRead | qp_access::kRemoteAtomic);

  RepParam rp;
  rp.qp_num = 0x5678;
  rp.starting_psn = 0x12345;
  rp.responder_resources = 0;
  rp.initiator_depth = 3;
  rp.rnr_retry_count = 5;
  ASSERT_EQ(b_.cm.send_rep(bi, rp, now_), 0);
  carry(b_, a_, b_.take());
  a_.events();
  // Active after the REP: its QPN, PSN and resources, swapped back.
  ASSERT_EQ(a_.cm.init_qp_attr(id, QpState::kRtr, attr, mask), 0);
  EXPECT_EQ(attr.dest_qp_num, 0x5678u);
  EXPECT_EQ(attr.rq_psn, 0xABCDEu);       // what it advertised in the REQ
  EXPECT_EQ(attr.max_dest_rd_atomic, 3);  // the REP's InitiatorDepth
  ASSERT_EQ(a_.cm.init_qp_attr(id, QpState::kRts, attr, mask), 0);
  EXPECT_EQ(attr.sq_psn, 0x12345u);
  EXPECT_EQ(attr.max_rd_atomic, 0);  // the REP's ResponderResources
  EXPECT_EQ(attr.rnr_retry, 5);
  EXPECT_EQ(attr.timeout, cm_ack_timeout(15, 18));
  ASSERT_EQ(a_.cm.init_qp_attr(id, QpState::kInit, attr, mask), 0);
  // READ and ATOMIC: the REP's InitiatorDepth of 3 is what this side responds to.
  EXPECT_EQ(attr.qp_access_flags,
            qp_access::kRemoteWrite | qp_access::kRemoteRead | qp_access::kRemoteAtomic);
}

TEST_F(IbCmPair, SidrRequestAndReplyAndNoListenerIsUnsupported) {
  const std::uint64_t udp = 0x0000000001110050;
  const std::uint32_t l = b_.cm.create_id();
  ASSERT_EQ(b_.cm.listen(l, udp), 0);
  const std::uint32_t id = a_.cm.create_id();
  SidrReqParam p;
  p.path.sgid = a_.addr;
  p.path.dgid = b_.addr;
  p.service_id = udp;
  ASSERT_EQ(a_.cm.send_sidr_req(id, p, now_), 0);
  const OutMad req = a_.take();
  EXPECT_EQ(msg_of<SidrReqMsg>(req).request_id, id);
  EXPECT_EQ(msg_of<SidrReqMsg>(req).pkey, 0xFFFF);
  carry(a_, b_, req);
  auto ev = b_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kSidrReqReceived);
  // Expect: a resend while the first is unanswered is a duplicate.
  carry(a_, b_, req);
  EXPECT_TRUE(b_.events().empty());
  EXPECT_EQ(b_.cm.counters().rx_duplicates.get(CmAttr::kSidrReq), 1u);
  SidrRepParam rp;
  rp.qp_num = 0x4321;
  rp.qkey = kUdpQkey;
  ASSERT_EQ(b_.cm.send_sidr_rep(ev[0].id, rp, now_), 0);
  const OutMad rep = b_.take();
  const auto r = msg_of<SidrRepMsg>(rep);
  EXPECT_EQ(r.request_id, id);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.qpn, 0x4321u);
  EXPECT_EQ(r.qkey, kUdpQkey);
  EXPECT_EQ(r.service_id, udp);
  carry(b_, a_, rep);
  ev = a_.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, CmEventType::kSidrRepReceived);
  EXPECT_EQ(a_.cm.next_deadline(), 0u);
  // Expect: a second reply (to a resend) is a duplicate.
  carry(b_, a_, rep);
  EXPECT_EQ(a_.cm.counters().rx_duplicates.get(CmAttr::kSidrRep), 1u);

  // Expect: a SIDR_REQ nobody listens for: SIDR_REP UNSUPPORTED (1).
  p.service_id = 0x0000000001110051;
  const std::uint32_t id2 = a_.cm.create_id();
  ASSERT_EQ(a_.cm.send_sidr_req(id2, p, now_), 0);
  carry(a_, b_, a_.take());
  EXPECT_EQ(msg_of<SidrRepMsg>(b_.take()).status, 1);
}

TEST_F(IbCmPair, ListenRefusesAServiceAlreadyCovered) {
  const std::uint32_t l = b_.cm.create_id();
  EXPECT_EQ(b_.cm.listen(l, kSid), EBUSY);
  EXPECT_EQ(b_.cm.listen(l, 0x1060000, 0xFFFFFFFFFFFF0000), EBUSY);
  EXPECT_EQ(b_.cm.listen(l, 0x1060001), 0);
}

}  // namespace
}  // namespace uroce::cm
