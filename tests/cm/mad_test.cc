/* SPDX-License-Identifier: BSD-3-Clause */
// The CM MAD codecs: every message round-trips, every struct member lands
// on exactly the bits of its field (MSB-first), the IP CM header has the
// kernel's layout, and the decoder refuses what the kernel refuses.

#include "cm/mad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <functional>
#include <random>
#include <string>

#include "cm/mad_samples.h"

namespace uroce::cm {
namespace {

using test::encode_mad;

Mad decode_ok(const std::vector<std::uint8_t>& bytes) {
  Mad m;
  MadError e{};
  EXPECT_TRUE(decode(bytes, m, e)) << name(e);
  return m;
}

TEST(Mad, EveryMessageRoundTripsWithEveryFieldRandom) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    for (const CmMessage& msg : test::random_messages(rng)) {
      const MadHdr hdr = test::random_hdr(rng);
      const auto bytes = encode_mad(hdr, msg);
      const Mad back = decode_ok(bytes);
      EXPECT_EQ(back.hdr.tid, hdr.tid);
      EXPECT_EQ(back.hdr.attr_id, static_cast<std::uint16_t>(attr_id_of(msg)));
      EXPECT_TRUE(back.msg == msg) << name(attr_id_of(msg)) << " round " << round;
      // Encoding what was decoded gives the same bytes.
      EXPECT_EQ(encode_mad(back.hdr, back.msg), bytes);
    }
  }
}

TEST(Mad, HeaderIsTheKernelsCmHeader) {
  MadHdr h;
  h.tid = 0x0102030405060708;
  const auto b = encode_mad(h, RtuMsg{});
  // Expect: base version 1, class 0x07, class version 2, method SEND,
  // status 0, TID big-endian, attribute 0x0014, modifier 0.
  const std::vector<std::uint8_t> want = {1, 0x07, 2, 0x03, 0, 0,    0, 0, 1, 2, 3, 4,
                                          5, 6,    7, 8,    0, 0x14, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(std::equal(want.begin(), want.end(), b.begin()));
}

// One member of a message, set to all ones in an otherwise zero message,
// must set exactly the bits of its field and nothing else.
struct MemberCase {
  std::string name;
  Field field;
  std::function<CmMessage()> make;
};

template <typename Msg>
CmMessage with(std::function<void(Msg&)> set) {
  Msg m;
  set(m);
  return m;
}

std::vector<MemberCase> member_cases() {
  std::vector<MemberCase> c;
  auto add = [&](std::string n, Field f, std::function<CmMessage()> make) {
    c.push_back({std::move(n), f, std::move(make)});
  };
  constexpr std::uint32_t k24 = 0xFFFFFF;
  // REQ
  add("req.local_comm_id", req::kLocalCommId,
      [] { return with<ReqMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("req.vendor_id", req::kVendorId,
      [] { return with<ReqMsg>([](auto& m) { m.vendor_id = k24; }); });
  add("req.service_id", req::kServiceId,
      [] { return with<ReqMsg>([](auto& m) { m.service_id = ~0ull; }); });
  add("req.local_ca_guid", req::kLocalCaGuid,
      [] { return with<ReqMsg>([](auto& m) { m.local_ca_guid = ~0ull; }); });
  add("req.local_qkey", req::kLocalQkey,
      [] { return with<ReqMsg>([](auto& m) { m.local_qkey = ~0u; }); });
  add("req.local_qpn", req::kLocalQpn,
      [] { return with<ReqMsg>([](auto& m) { m.local_qpn = k24; }); });
  add("req.responder_resources", req::kResponderResources,
      [] { return with<ReqMsg>([](auto& m) { m.responder_resources = 0xFF; }); });
  add("req.local_eecn", req::kLocalEecn,
      [] { return with<ReqMsg>([](auto& m) { m.local_eecn = k24; }); });
  add("req.initiator_depth", req::kInitiatorDepth,
      [] { return with<ReqMsg>([](auto& m) { m.initiator_depth = 0xFF; }); });
  add("req.remote_eecn", req::kRemoteEecn,
      [] { return with<ReqMsg>([](auto& m) { m.remote_eecn = k24; }); });
  add("req.remote_cm_response_timeout", req::kRemoteCmResponseTimeout,
      [] { return with<ReqMsg>([](auto& m) { m.remote_cm_response_timeout = 0x1F; }); });
  add("req.transport_type", req::kTransportServiceType,
      [] { return with<ReqMsg>([](auto& m) { m.transport_type = TransportType::kExtended; }); });
  add("req.end_to_end_flow_control", req::kEndToEndFlowControl,
      [] { return with<ReqMsg>([](auto& m) { m.end_to_end_flow_control = true; }); });
  add("req.starting_psn", req::kStartingPsn,
      [] { return with<ReqMsg>([](auto& m) { m.starting_psn = k24; }); });
  add("req.local_cm_response_timeout", req::kLocalCmResponseTimeout,
      [] { return with<ReqMsg>([](auto& m) { m.local_cm_response_timeout = 0x1F; }); });
  add("req.retry_count", req::kRetryCount,
      [] { return with<ReqMsg>([](auto& m) { m.retry_count = 7; }); });
  add("req.pkey", req::kPartitionKey,
      [] { return with<ReqMsg>([](auto& m) { m.pkey = 0xFFFF; }); });
  add("req.path_mtu", req::kPathMtu,
      [] { return with<ReqMsg>([](auto& m) { m.path_mtu = 0xF; }); });
  add("req.rdc_exists", req::kRdcExists,
      [] { return with<ReqMsg>([](auto& m) { m.rdc_exists = true; }); });
  add("req.rnr_retry_count", req::kRnrRetryCount,
      [] { return with<ReqMsg>([](auto& m) { m.rnr_retry_count = 7; }); });
  add("req.max_cm_retries", req::kMaxCmRetries,
      [] { return with<ReqMsg>([](auto& m) { m.max_cm_retries = 0xF; }); });
  add("req.srq", req::kSrq, [] { return with<ReqMsg>([](auto& m) { m.srq = true; }); });
  add("req.extended_transport_type", req::kExtendedTransportType,
      [] { return with<ReqMsg>([](auto& m) { m.extended_transport_type = 7; }); });
  add("req.primary.local_lid", req::kPrimaryLocalLid,
      [] { return with<ReqMsg>([](auto& m) { m.primary.local_lid = 0xFFFF; }); });
  add("req.primary.remote_lid", req::kPrimaryRemoteLid,
      [] { return with<ReqMsg>([](auto& m) { m.primary.remote_lid = 0xFFFF; }); });
  add("req.primary.flow_label", req::kPrimaryFlowLabel,
      [] { return with<ReqMsg>([](auto& m) { m.primary.flow_label = 0xFFFFF; }); });
  add("req.primary.packet_rate", req::kPrimaryPacketRate,
      [] { return with<ReqMsg>([](auto& m) { m.primary.packet_rate = 0x3F; }); });
  add("req.primary.traffic_class", req::kPrimaryTrafficClass,
      [] { return with<ReqMsg>([](auto& m) { m.primary.traffic_class = 0xFF; }); });
  add("req.primary.hop_limit", req::kPrimaryHopLimit,
      [] { return with<ReqMsg>([](auto& m) { m.primary.hop_limit = 0xFF; }); });
  add("req.primary.sl", req::kPrimarySl,
      [] { return with<ReqMsg>([](auto& m) { m.primary.sl = 0xF; }); });
  add("req.primary.subnet_local", req::kPrimarySubnetLocal,
      [] { return with<ReqMsg>([](auto& m) { m.primary.subnet_local = true; }); });
  add("req.primary.local_ack_timeout", req::kPrimaryLocalAckTimeout,
      [] { return with<ReqMsg>([](auto& m) { m.primary.local_ack_timeout = 0x1F; }); });
  add("req.alternate.local_lid", req::kAlternateLocalLid,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.local_lid = 0xFFFF; }); });
  add("req.alternate.remote_lid", req::kAlternateRemoteLid,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.remote_lid = 0xFFFF; }); });
  add("req.alternate.flow_label", req::kAlternateFlowLabel,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.flow_label = 0xFFFFF; }); });
  add("req.alternate.packet_rate", req::kAlternatePacketRate,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.packet_rate = 0x3F; }); });
  add("req.alternate.traffic_class", req::kAlternateTrafficClass,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.traffic_class = 0xFF; }); });
  add("req.alternate.hop_limit", req::kAlternateHopLimit,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.hop_limit = 0xFF; }); });
  add("req.alternate.sl", req::kAlternateSl,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.sl = 0xF; }); });
  add("req.alternate.subnet_local", req::kAlternateSubnetLocal,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.subnet_local = true; }); });
  add("req.alternate.local_ack_timeout", req::kAlternateLocalAckTimeout,
      [] { return with<ReqMsg>([](auto& m) { m.alternate.local_ack_timeout = 0x1F; }); });
  add("req.sap_supported", req::kSapSupported,
      [] { return with<ReqMsg>([](auto& m) { m.sap_supported = true; }); });
  // MRA
  add("mra.local_comm_id", mra::kLocalCommId,
      [] { return with<MraMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("mra.remote_comm_id", mra::kRemoteCommId,
      [] { return with<MraMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  add("mra.message_mraed", mra::kMessageMraed,
      [] { return with<MraMsg>([](auto& m) { m.message_mraed = static_cast<MsgResponse>(3); }); });
  add("mra.service_timeout", mra::kServiceTimeout,
      [] { return with<MraMsg>([](auto& m) { m.service_timeout = 0x1F; }); });
  // REJ
  add("rej.local_comm_id", rej::kLocalCommId,
      [] { return with<RejMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("rej.remote_comm_id", rej::kRemoteCommId,
      [] { return with<RejMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  add("rej.message_rejected", rej::kMessageRejected, [] {
    return with<RejMsg>([](auto& m) { m.message_rejected = static_cast<MsgResponse>(3); });
  });
  add("rej.reject_info_length", rej::kRejectedInfoLength,
      [] { return with<RejMsg>([](auto& m) { m.reject_info_length = 0x7F; }); });
  add("rej.reason", rej::kReason, [] { return with<RejMsg>([](auto& m) { m.reason = 0xFFFF; }); });
  // REP
  add("rep.local_comm_id", rep::kLocalCommId,
      [] { return with<RepMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("rep.remote_comm_id", rep::kRemoteCommId,
      [] { return with<RepMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  add("rep.local_qkey", rep::kLocalQkey,
      [] { return with<RepMsg>([](auto& m) { m.local_qkey = ~0u; }); });
  add("rep.local_qpn", rep::kLocalQpn,
      [] { return with<RepMsg>([](auto& m) { m.local_qpn = k24; }); });
  add("rep.vendor_id[23:16]", rep::kVendorIdH,
      [] { return with<RepMsg>([](auto& m) { m.vendor_id = 0xFF0000; }); });
  add("rep.vendor_id[15:8]", rep::kVendorIdM,
      [] { return with<RepMsg>([](auto& m) { m.vendor_id = 0x00FF00; }); });
  add("rep.vendor_id[7:0]", rep::kVendorIdL,
      [] { return with<RepMsg>([](auto& m) { m.vendor_id = 0x0000FF; }); });
  add("rep.local_eecn", rep::kLocalEecn,
      [] { return with<RepMsg>([](auto& m) { m.local_eecn = k24; }); });
  add("rep.starting_psn", rep::kStartingPsn,
      [] { return with<RepMsg>([](auto& m) { m.starting_psn = k24; }); });
  add("rep.responder_resources", rep::kResponderResources,
      [] { return with<RepMsg>([](auto& m) { m.responder_resources = 0xFF; }); });
  add("rep.initiator_depth", rep::kInitiatorDepth,
      [] { return with<RepMsg>([](auto& m) { m.initiator_depth = 0xFF; }); });
  add("rep.target_ack_delay", rep::kTargetAckDelay,
      [] { return with<RepMsg>([](auto& m) { m.target_ack_delay = 0x1F; }); });
  add("rep.failover_accepted", rep::kFailoverAccepted,
      [] { return with<RepMsg>([](auto& m) { m.failover_accepted = 3; }); });
  add("rep.end_to_end_flow_control", rep::kEndToEndFlowControl,
      [] { return with<RepMsg>([](auto& m) { m.end_to_end_flow_control = true; }); });
  add("rep.rnr_retry_count", rep::kRnrRetryCount,
      [] { return with<RepMsg>([](auto& m) { m.rnr_retry_count = 7; }); });
  add("rep.srq", rep::kSrq, [] { return with<RepMsg>([](auto& m) { m.srq = true; }); });
  add("rep.local_ca_guid", rep::kLocalCaGuid,
      [] { return with<RepMsg>([](auto& m) { m.local_ca_guid = ~0ull; }); });
  // RTU, DREQ, DREP
  add("rtu.local_comm_id", rtu::kLocalCommId,
      [] { return with<RtuMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("rtu.remote_comm_id", rtu::kRemoteCommId,
      [] { return with<RtuMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  add("dreq.local_comm_id", dreq::kLocalCommId,
      [] { return with<DreqMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("dreq.remote_comm_id", dreq::kRemoteCommId,
      [] { return with<DreqMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  add("dreq.remote_qpn", dreq::kRemoteQpn,
      [] { return with<DreqMsg>([](auto& m) { m.remote_qpn = k24; }); });
  add("drep.local_comm_id", drep::kLocalCommId,
      [] { return with<DrepMsg>([](auto& m) { m.local_comm_id = ~0u; }); });
  add("drep.remote_comm_id", drep::kRemoteCommId,
      [] { return with<DrepMsg>([](auto& m) { m.remote_comm_id = ~0u; }); });
  // SIDR
  add("sidr_req.request_id", sidr_req::kRequestId,
      [] { return with<SidrReqMsg>([](auto& m) { m.request_id = ~0u; }); });
  add("sidr_req.pkey", sidr_req::kPartitionKey,
      [] { return with<SidrReqMsg>([](auto& m) { m.pkey = 0xFFFF; }); });
  add("sidr_req.service_id", sidr_req::kServiceId,
      [] { return with<SidrReqMsg>([](auto& m) { m.service_id = ~0ull; }); });
  add("sidr_rep.request_id", sidr_rep::kRequestId,
      [] { return with<SidrRepMsg>([](auto& m) { m.request_id = ~0u; }); });
  add("sidr_rep.status", sidr_rep::kStatus,
      [] { return with<SidrRepMsg>([](auto& m) { m.status = 0xFF; }); });
  add("sidr_rep.add_info_length", sidr_rep::kAddInfoLength,
      [] { return with<SidrRepMsg>([](auto& m) { m.add_info_length = 0xFF; }); });
  add("sidr_rep.vendor_id[23:8]", sidr_rep::kVendorIdH,
      [] { return with<SidrRepMsg>([](auto& m) { m.vendor_id = 0xFFFF00; }); });
  add("sidr_rep.vendor_id[7:0]", sidr_rep::kVendorIdL,
      [] { return with<SidrRepMsg>([](auto& m) { m.vendor_id = 0x0000FF; }); });
  add("sidr_rep.qpn", sidr_rep::kQpn,
      [] { return with<SidrRepMsg>([](auto& m) { m.qpn = k24; }); });
  add("sidr_rep.service_id", sidr_rep::kServiceId,
      [] { return with<SidrRepMsg>([](auto& m) { m.service_id = ~0ull; }); });
  add("sidr_rep.qkey", sidr_rep::kQkey,
      [] { return with<SidrRepMsg>([](auto& m) { m.qkey = ~0u; }); });
  return c;
}

TEST(Mad, EachMemberSetsExactlyTheBitsOfItsFieldMsbFirst) {
  MadHdr hdr;
  hdr.tid = 0;
  for (const MemberCase& c : member_cases()) {
    SCOPED_TRACE(c.name);
    const CmMessage msg = c.make();
    const auto bytes = encode_mad(hdr, msg);
    // Bit i of the MAD, counted from the MSB of byte 0.
    const std::size_t first = c.field.offset * 8u + c.field.bit;
    for (std::size_t i = kMadHdrSize * 8; i < kMadSize * 8; ++i) {
      const bool set = (bytes[i / 8] >> (7 - i % 8)) & 1;
      const bool inside = i >= first && i < first + c.field.bits;
      ASSERT_EQ(set, inside) << "bit " << i % 8 << " (MSB 0) of byte " << i / 8;
    }
  }
}

// Byte strings: GIDs, ARI, additional information, private data.
TEST(Mad, ByteStringsLandAtTheirOffsets) {
  ReqMsg r;
  r.primary.local_gid = *wire::IpAddr::parse("10.0.0.1");
  r.primary.remote_gid = *wire::IpAddr::parse("fd00::2");
  r.alternate.local_gid.bytes.fill(0xA1);
  r.alternate.remote_gid.bytes.fill(0xA2);
  r.private_data.fill(0x5A);
  auto b = encode_mad({}, r);
  // Expect: the IPv4-mapped GID ::ffff:10.0.0.1 at 80, the IPv6 one at 96.
  EXPECT_EQ(b[80 + 10], 0xFF);
  EXPECT_EQ(b[80 + 11], 0xFF);
  EXPECT_EQ(b[80 + 12], 10);
  EXPECT_EQ(b[80 + 15], 1);
  EXPECT_EQ(b[96], 0xFD);
  EXPECT_EQ(b[111], 2);
  EXPECT_TRUE(std::all_of(b.begin() + 124, b.begin() + 140, [](auto v) { return v == 0xA1; }));
  EXPECT_TRUE(std::all_of(b.begin() + 140, b.begin() + 156, [](auto v) { return v == 0xA2; }));
  EXPECT_TRUE(std::all_of(b.begin() + 164, b.end(), [](auto v) { return v == 0x5A; }));

  RejMsg j;
  j.ari.fill(0x11);
  j.private_data.fill(0x22);
  b = encode_mad({}, j);
  EXPECT_EQ(b[35], 0);
  EXPECT_TRUE(std::all_of(b.begin() + 36, b.begin() + 108, [](auto v) { return v == 0x11; }));
  EXPECT_TRUE(std::all_of(b.begin() + 108, b.end(), [](auto v) { return v == 0x22; }));

  RepMsg p;
  p.private_data.fill(0x33);
  b = encode_mad({}, p);
  EXPECT_EQ(b[59], 0);
  EXPECT_TRUE(std::all_of(b.begin() + 60, b.end(), [](auto v) { return v == 0x33; }));

  SidrRepMsg s;
  s.add_info.fill(0x44);
  s.private_data.fill(0x55);
  b = encode_mad({}, s);
  EXPECT_TRUE(std::all_of(b.begin() + 48, b.begin() + 120, [](auto v) { return v == 0x44; }));
  EXPECT_TRUE(std::all_of(b.begin() + 120, b.end(), [](auto v) { return v == 0x55; }));

  MraMsg m;
  m.private_data.fill(0x66);
  b = encode_mad({}, m);
  EXPECT_TRUE(std::all_of(b.begin() + 34, b.end(), [](auto v) { return v == 0x66; }));
  DreqMsg d;
  d.private_data.fill(0x77);
  b = encode_mad({}, d);
  EXPECT_EQ(b[35], 0);
  EXPECT_TRUE(std::all_of(b.begin() + 36, b.end(), [](auto v) { return v == 0x77; }));
  SidrReqMsg q;
  q.private_data.fill(0x88);
  b = encode_mad({}, q);
  EXPECT_TRUE(std::all_of(b.begin() + 40, b.end(), [](auto v) { return v == 0x88; }));
}

TEST(Mad, DecoderRefusesWhatTheKernelRefuses) {
  std::mt19937_64 rng(3);
  const auto good = encode_mad(test::random_hdr(rng), test::random_req(rng));
  auto refused = [](std::vector<std::uint8_t> b) {
    Mad m;
    MadError e = MadError::kCount;
    EXPECT_FALSE(decode(b, m, e));
    return e;
  };
  // Expect: every length but 256 is refused, and reading stops at the end.
  for (std::size_t n : {0, 1, 23, 24, 100, 255}) {
    EXPECT_EQ(refused(std::vector<std::uint8_t>(good.begin(), good.begin() + n)),
              MadError::kTruncated);
  }
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(refused(longer), MadError::kOversized);

  auto b = good;
  b[0] = 2;
  EXPECT_EQ(refused(b), MadError::kBaseVersion);
  b = good;
  b[1] = 0x04;  // PerfMgt
  EXPECT_EQ(refused(b), MadError::kMgmtClass);
  b = good;
  b[2] = 1;
  EXPECT_EQ(refused(b), MadError::kClassVersion);
  b = good;
  b[3] = 0x01;  // Get
  EXPECT_EQ(refused(b), MadError::kMethod);
  b = good;
  b[3] = 0x83;  // a response bit on SEND
  EXPECT_EQ(refused(b), MadError::kMethod);
  for (std::uint16_t attr : {0x0000, 0x000F, 0x001B, 0xFFFF}) {
    b = good;
    wire::store_be16(&b[16], attr);
    EXPECT_EQ(refused(b), MadError::kUnknownAttribute) << attr;
  }
  b = good;
  wire::store_be16(&b[16], 0x0001);
  EXPECT_EQ(refused(b), MadError::kClassPortInfo);
  for (std::uint16_t attr : {0x0019, 0x001A}) {
    b = good;
    wire::store_be16(&b[16], attr);
    EXPECT_EQ(refused(b), MadError::kAlternatePath);
  }
  b = encode_mad({}, MraMsg{});
  b[32] = 0xC0;
  EXPECT_EQ(refused(b), MadError::kMessageMraed);
  b = encode_mad({}, RejMsg{});
  b[33] = 73 << 1;
  EXPECT_EQ(refused(b), MadError::kRejectInfoLength);
  b[33] = 72 << 1;
  EXPECT_EQ(decode_ok(b).hdr.attr_id, 0x12);
  b = encode_mad({}, SidrRepMsg{});
  b[29] = 73;
  EXPECT_EQ(refused(b), MadError::kSidrAddInfoLength);
}

TEST(Mad, DecoderNeverReadsPastItsInput) {
  // A buffer exactly as long as each prefix: under ASan any read beyond
  // it fails the test.
  std::mt19937_64 rng(11);
  for (const CmMessage& msg : test::random_messages(rng)) {
    const auto full = encode_mad({}, msg);
    for (std::size_t n = 0; n <= kMadSize; ++n) {
      std::vector<std::uint8_t> part(full.begin(), full.begin() + n);
      part.shrink_to_fit();
      Mad m;
      MadError e{};
      EXPECT_EQ(decode(part, m, e), n == kMadSize);
    }
  }
}

TEST(IpCmHdr, Ipv4IsTwelveZeroBytesThenTheAddress) {
  IpCmHdr h;
  h.ip_version = 4;
  h.src_port = 0xC123;
  h.src = *wire::IpAddr::parse("10.77.0.2");
  h.dst = *wire::IpAddr::parse("10.77.0.1");
  std::uint8_t b[IpCmHdr::kSize];
  encode(h, b);
  const std::uint8_t want[IpCmHdr::kSize] = {0x00, 0x40, 0xC1, 0x23, 0,  0,  0, 0, 0,  0,  0, 0,
                                             0,    0,    0,    0,    10, 77, 0, 2, 0,  0,  0, 0,
                                             0,    0,    0,    0,    0,  0,  0, 0, 10, 77, 0, 1};
  EXPECT_TRUE(std::equal(std::begin(want), std::end(want), b));
  IpCmHdr back;
  ASSERT_TRUE(decode(b, back));
  EXPECT_EQ(back, h);
  EXPECT_TRUE(back.src.is_v4());
}

TEST(IpCmHdr, Ipv6RoundTripsAndBadVersionsAreRefused) {
  IpCmHdr h;
  h.ip_version = 6;
  h.src_port = 7174;
  h.src = *wire::IpAddr::parse("fd77::2");
  h.dst = *wire::IpAddr::parse("fd77::1");
  std::uint8_t b[IpCmHdr::kSize];
  encode(h, b);
  EXPECT_EQ(b[1], 0x60);
  IpCmHdr back;
  ASSERT_TRUE(decode(b, back));
  EXPECT_EQ(back, h);
  // Expect: cma_version other than 0, and IP versions other than 4 and 6,
  // are refused (cma_save_ip_info).
  b[0] = 1;
  EXPECT_FALSE(decode(b, back));
  b[0] = 0;
  b[1] = 0x50;
  EXPECT_FALSE(decode(b, back));
}

TEST(ServiceId, PortSpacesAndPortsAsTheKernelFormsThem) {
  EXPECT_EQ(service_id(PortSpace::kTcp, 7174), 0x0000000001061C06u);
  EXPECT_EQ(service_id(PortSpace::kUdp, 7174), 0x0000000001111C06u);
  EXPECT_EQ(service_id_ps(0x0000000001061C06), 0x0106);
  EXPECT_EQ(service_id_port(0x0000000001061C06), 7174);
  EXPECT_TRUE(is_ip_service_id(service_id(PortSpace::kTcp, 1)));
  EXPECT_TRUE(is_ip_service_id(service_id(PortSpace::kUdp, 65535)));
  EXPECT_FALSE(is_ip_service_id(service_id(PortSpace::kIb, 1)));
  EXPECT_FALSE(is_ip_service_id(0x1000000001061C06));
}

TEST(Names, EveryReasonStatusAndErrorHasOne) {
  for (unsigned r = 1; r <= 35; ++r) {
    if (r == 34) continue;
    EXPECT_FALSE(name(static_cast<RejReason>(r)).empty()) << r;
  }
  EXPECT_TRUE(name(static_cast<RejReason>(34)).empty());
  for (unsigned s = 0; s <= 5; ++s) EXPECT_FALSE(name(static_cast<SidrStatus>(s)).empty());
  for (unsigned e = 0; e < static_cast<unsigned>(MadError::kCount); ++e)
    EXPECT_FALSE(name(static_cast<MadError>(e)).empty());
  EXPECT_EQ(name(RejReason::kConsumerDefined), "consumer defined");
}

}  // namespace
}  // namespace uroce::cm
