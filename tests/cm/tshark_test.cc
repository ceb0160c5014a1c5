/* SPDX-License-Identifier: BSD-3-Clause */
// Wireshark as the independent judge of the CM MAD layout: MADs encoded
// by lib/cm, carried in RoCEv2 frames as a kernel peer sends them (UD
// SEND-only to QP 1, P_Key 0xFFFF, Q_Key 0x80010000, source QP 1), must
// decode in tshark's infiniband.cm.* fields to the values encoded, with
// nothing malformed. Wireshark 4.0 dissects REQ, REP, RTU, REJ, DREQ and
// DREP field by field; for MRA and SIDR it shows the MAD header only.

#include "support/tshark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cm/cm_net.h"
#include "cm/cma_peers.h"
#include "cm/mad.h"
#include "cm/mad_samples.h"
#include "support/pcap.h"
#include "support/wire_samples.h"

namespace uroce::cm {
namespace {

using test::tshark_number;

struct Expect {
  Expect(std::string f, unsigned long long v, std::string t = {})
      : field(std::move(f)), value(v), text(std::move(t)) {}
  std::string field;
  unsigned long long value = 0;
  std::string text;  ///< compared as text when not empty (addresses, byte strings)
};

struct Case {
  std::string what;
  test::Frame frame;
  std::vector<Expect> expects;
};

template <std::size_t N>
std::string hex(const std::array<std::uint8_t, N>& a, std::size_t from = 0) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::size_t i = from; i < N; ++i) {
    s += d[a[i] >> 4];
    s += d[a[i] & 15];
  }
  return s;
}

std::string ip_text(const wire::IpAddr& a) { return a.to_string(); }

void add_path(std::vector<Expect>& e, const std::string& p, const ReqPath& path, bool ipv4_gids) {
  e.push_back({"infiniband.cm.req." + p + "_locallid", path.local_lid});
  e.push_back({"infiniband.cm.req." + p + "_remotelid", path.remote_lid});
  if (p == "prim") {
    if (ipv4_gids) {
      e.push_back({"infiniband.cm.req.prim_localgid_ipv4", 0, ip_text(path.local_gid)});
      e.push_back({"infiniband.cm.req.prim_remotegid_ipv4", 0, ip_text(path.remote_gid)});
    } else {
      e.push_back({"infiniband.cm.req.prim_localgid", 0, ip_text(path.local_gid)});
      e.push_back({"infiniband.cm.req.prim_remotegid", 0, ip_text(path.remote_gid)});
    }
  } else {
    e.push_back({"infiniband.cm.req.alt_localgid", 0, hex(path.local_gid.bytes)});
    e.push_back({"infiniband.cm.req.alt_remotegid", 0, hex(path.remote_gid.bytes)});
  }
  // Wireshark 4.0 reads the FlowLabel word as three bytes under a 32-bit
  // mask, and the PacketRate from the first of them: it shows the top 12
  // bits of the flow label, and bits 19:14 of it as the rate. The layout
  // itself is the kernel's (ibta_vol1_c12.h: FlowLabel the top 20 bits of
  // the word at 112, PacketRate bits 5:0 of byte 115), pinned in
  // mad_fields.h; here the expectation follows what Wireshark shows.
  e.push_back({"infiniband.cm.req." + p + "_flowlabel", path.flow_label >> 8});
  e.push_back({"infiniband.cm.req." + p + "_pktrate", (path.flow_label >> 12) & 0x3F});
  e.push_back({"infiniband.cm.req." + p + "_tfcclass", path.traffic_class});
  e.push_back({"infiniband.cm.req." + p + "_hoplim", path.hop_limit});
  e.push_back({"infiniband.cm.req." + p + "_sl", path.sl});
  e.push_back({"infiniband.cm.req." + p + "_subnetlocal", path.subnet_local});
  e.push_back({"infiniband.cm.req." + p + "_localacktout", path.local_ack_timeout});
}

std::vector<Expect> req_expects(const ReqMsg& r, bool ipv6) {
  std::vector<Expect> e = {
      {"infiniband.cm.req", r.local_comm_id},
      {"infiniband.cm.req.localcaguid", r.local_ca_guid},
      {"infiniband.cm.req.localqkey", r.local_qkey},
      {"infiniband.cm.req.localqpn", r.local_qpn},
      {"infiniband.cm.req.responderres", r.responder_resources},
      {"infiniband.cm.req.localeecn", r.local_eecn},
      {"infiniband.cm.req.initdepth", r.initiator_depth},
      {"infiniband.cm.req.remoteeecn", r.remote_eecn},
      {"infiniband.cm.req.remoteresptout", r.remote_cm_response_timeout},
      {"infiniband.cm.req.transpsvctype", static_cast<unsigned>(r.transport_type)},
      {"infiniband.cm.req.e2eflowctrl", r.end_to_end_flow_control},
      {"infiniband.cm.req.startpsn", r.starting_psn},
      {"infiniband.cm.req.localresptout", r.local_cm_response_timeout},
      {"infiniband.cm.req.retrcount", r.retry_count},
      {"infiniband.cm.req.pkey", r.pkey},
      {"infiniband.cm.req.pppmtu", r.path_mtu},
      {"infiniband.cm.req.rdcexist", r.rdc_exists},
      {"infiniband.cm.req.rnrretrcount", r.rnr_retry_count},
      {"infiniband.cm.req.maxcmretr", r.max_cm_retries},
      {"infiniband.cm.req.srq", r.srq},
      {"infiniband.cm.req.ext_transport", r.extended_transport_type},
  };
  add_path(e, "prim", r.primary, !ipv6);
  add_path(e, "alt", r.alternate, false);
  if (is_ip_service_id(r.service_id)) {
    e.push_back({"infiniband.cm.req.serviceid.protocol", (r.service_id >> 16) & 0xFF});
    e.push_back({"infiniband.cm.req.serviceid.dport", r.service_id & 0xFFFF});
  } else {
    e.push_back({"infiniband.cm.req.serviceid", r.service_id});
  }
  IpCmHdr h;
  if (is_ip_service_id(r.service_id) && decode(r.private_data.data(), h)) {
    e.push_back({"infiniband.cm.req.ip_cm.majv", 0});
    e.push_back({"infiniband.cm.req.ip_cm.minv", 0});
    e.push_back({"infiniband.cm.req.ip_cm.ipv", h.ip_version});
    e.push_back({"infiniband.cm.req.ip_cm.sport", h.src_port});
    if (h.ip_version == 4) {
      e.push_back({"infiniband.cm.req.ip_cm.sip4", 0, ip_text(h.src)});
      e.push_back({"infiniband.cm.req.ip_cm.dip4", 0, ip_text(h.dst)});
    } else {
      e.push_back({"infiniband.cm.req.ip_cm.sip6", 0, ip_text(h.src)});
      e.push_back({"infiniband.cm.req.ip_cm.dip6", 0, ip_text(h.dst)});
    }
    e.push_back({"infiniband.cm.req.ip_cm.private", 0, hex(r.private_data, IpCmHdr::kSize)});
  } else {
    e.push_back({"infiniband.cm.req.private", 0, hex(r.private_data)});
  }
  return e;
}

std::vector<Expect> message_expects(const CmMessage& msg, bool ipv6) {
  if (const auto* r = std::get_if<ReqMsg>(&msg)) return req_expects(*r, ipv6);
  if (const auto* p = std::get_if<RepMsg>(&msg)) {
    return {{"infiniband.cm.rep", p->local_comm_id},
            {"infiniband.cm.rep.remotecommid", p->remote_comm_id},
            {"infiniband.cm.rep.localqkey", p->local_qkey},
            {"infiniband.cm.rep.localqpn", p->local_qpn},
            {"infiniband.cm.rep.localeecn", p->local_eecn},
            {"infiniband.cm.rep.startpsn", p->starting_psn},
            {"infiniband.cm.rep.respres", p->responder_resources},
            {"infiniband.cm.rep.initdepth", p->initiator_depth},
            {"infiniband.cm.rep.tgtackdelay", p->target_ack_delay},
            {"infiniband.cm.rep.failoveracc", p->failover_accepted},
            {"infiniband.cm.rep.e2eflowctrl", p->end_to_end_flow_control},
            {"infiniband.cm.rep.rnrretrcount", p->rnr_retry_count},
            {"infiniband.cm.rep.srq", p->srq},
            {"infiniband.cm.rep.localcaguid", p->local_ca_guid},
            {"infiniband.cm.rep.private", 0, hex(p->private_data)}};
  }
  if (const auto* t = std::get_if<RtuMsg>(&msg)) {
    return {{"infiniband.cm.rtu.localcommid", t->local_comm_id},
            {"infiniband.cm.rtu.remotecommid", t->remote_comm_id},
            {"infiniband.cm.rtu.private", 0, hex(t->private_data)}};
  }
  if (const auto* j = std::get_if<RejMsg>(&msg)) {
    return {{"infiniband.cm.rej.localcommid", j->local_comm_id},
            {"infiniband.cm.rej.remotecommid", j->remote_comm_id},
            {"infiniband.cm.rej.msgrej", static_cast<unsigned>(j->message_rejected)},
            {"infiniband.cm.rej.rejinfolen", j->reject_info_length},
            {"infiniband.cm.rej.reason", j->reason},
            {"infiniband.cm.rej.ari", 0, hex(j->ari)},
            {"infiniband.cm.rej.private", 0, hex(j->private_data)}};
  }
  if (const auto* d = std::get_if<DreqMsg>(&msg)) {
    return {{"infiniband.cm.dreq.localcommid", d->local_comm_id},
            {"infiniband.cm.dreq.remotecommid", d->remote_comm_id},
            {"infiniband.cm.req.remoteqpneecn", d->remote_qpn},  // Wireshark's name for it
            {"infiniband.cm.dreq.private", 0, hex(d->private_data)}};
  }
  if (const auto* d = std::get_if<DrepMsg>(&msg)) {
    return {{"infiniband.cm.drsp.localcommid", d->local_comm_id},
            {"infiniband.cm.drsp.remotecommid", d->remote_comm_id},
            {"infiniband.cm.drsp.private", 0, hex(d->private_data)}};
  }
  return {};  // MRA, SIDR_REQ, SIDR_REP: header only in Wireshark 4.0
}

Case make_case(const wire::RoceRoute& route, const MadHdr& hdr, const CmMessage& msg) {
  Case c;
  c.what = std::string(name(attr_id_of(msg))) + (route.ipv6() ? " ipv6" : " ipv4");
  const auto mad = test::encode_mad(hdr, msg);
  c.frame = test::gsi_frame(route, mad);
  c.expects = {
      {"infiniband.bth.opcode", 0x64},
      {"infiniband.bth.p_key", 0xFFFF},
      {"infiniband.bth.destqp", 1},
      {"infiniband.deth.q_key", 0x80010000},
      {"infiniband.deth.srcqp", 1},
      {"infiniband.mad.baseversion", 1},
      {"infiniband.mad.mgmtclass", 0x07},
      {"infiniband.mad.classversion", 2},
      {"infiniband.mad.method", 0x03},
      {"infiniband.mad.status", 0},
      {"infiniband.mad.transactionid", hdr.tid},
      {"infiniband.mad.attributeid", static_cast<unsigned>(attr_id_of(msg))},
      {"infiniband.mad.attributemodifier", 0},
  };
  for (Expect& e : message_expects(msg, route.ipv6())) c.expects.push_back(std::move(e));
  return c;
}

std::string bytes_text(std::string s) {
  std::erase(s, ':');
  std::transform(s.begin(), s.end(), s.begin(), [](char ch) { return std::tolower(ch); });
  return s;
}

void check(const std::vector<Case>& cases) {
  test::TempDir dir;
  const std::string pcap = dir.path() + "/cm.pcap";
  std::vector<test::Frame> frames;
  for (const Case& c : cases) frames.push_back(c.frame);
  test::write_pcap(pcap, frames);
  std::vector<std::string> fields = {"frame.protocols", "_ws.malformed", "_ws.expert.severity",
                                     "_ws.expert.message"};
  for (const Case& c : cases)
    for (const Expect& e : c.expects)
      if (std::find(fields.begin(), fields.end(), e.field) == fields.end())
        fields.push_back(e.field);
  const auto decoded = test::tshark_decode(pcap, fields);
  ASSERT_EQ(decoded.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const test::DecodedFrame& d = decoded[i];
    SCOPED_TRACE(c.what + " (frame " + std::to_string(i + 1) + ")");
    EXPECT_EQ(d.at("_ws.malformed"), "");
    EXPECT_NE(d.at("_ws.expert.severity"), "8388608") << d.at("_ws.expert.message");
    for (const Expect& e : c.expects) {
      const std::string& shown = d.at(e.field);
      ASSERT_FALSE(shown.empty()) << e.field << " not decoded";
      if (!e.text.empty()) {
        EXPECT_EQ(bytes_text(shown), bytes_text(e.text)) << e.field;
      } else {
        EXPECT_EQ(tshark_number(shown), e.value) << e.field << " shown as " << shown;
      }
    }
  }
}

TEST(Tshark, DecodesEveryFieldOfRandomMessagesAsEncoded) {
  std::mt19937_64 rng(42);
  std::vector<Case> cases;
  for (bool ipv6 : {false, true}) {
    const wire::RoceRoute route = test::sample_route(ipv6);
    for (int round = 0; round < 4; ++round) {
      for (CmMessage msg : test::random_messages(rng)) {
        if (auto* r = std::get_if<ReqMsg>(&msg)) {
          // Half the REQs carry the rdma_cm TCP/UDP ServiceID and an IP CM
          // header, which Wireshark then dissects as such.
          r->primary.local_gid = route.src_ip;
          r->primary.remote_gid = route.dst_ip;
          if (round % 2 == 0) {
            r->service_id = service_id(round == 0 ? PortSpace::kTcp : PortSpace::kUdp,
                                       static_cast<std::uint16_t>(rng()));
            IpCmHdr h;
            h.ip_version = ipv6 ? 6 : 4;
            h.src_port = static_cast<std::uint16_t>(rng());
            h.src = route.src_ip;
            h.dst = route.dst_ip;
            encode(h, r->private_data.data());
          }
        }
        cases.push_back(make_case(route, test::random_hdr(rng), msg));
      }
    }
  }
  check(cases);
}

// A whole connection as lib/cm runs it, REQ to TIMEWAIT, captured on the
// simulated wire: every MAD decodes, and the REQ, REP and DREQ show the
// QPNs, PSNs, ports and addresses the two sides used.
TEST(Tshark, DecodesAConnectionLibCmSetsUpAndTearsDown) {
  for (bool ipv6 : {false, true}) {
    SCOPED_TRACE(ipv6 ? "ipv6" : "ipv4");
    test::CmNet net(99);
    test::CmHost& a = net.add_host(ipv6 ? "fd77::2" : "10.77.0.2");
    test::CmHost& b = net.add_host(ipv6 ? "fd77::1" : "10.77.0.1");
    test::Peer pa(net, a), pb(net, b);
    pa.private_data = {0xCA, 0xFE};
    pb.listen(PortSpace::kTcp, 7174);
    const std::uint32_t x = pa.connect(PortSpace::kTcp, b.ip(), 7174);
    ASSERT_TRUE(net.run_until(
        [&] {
          return pb.first_request() && pb.count(pb.first_request(), CmaEventType::kEstablished);
        },
        10 * test::kSec));
    pa.disconnect(x);
    ASSERT_TRUE(net.run_until([&] { return pa.count(x, CmaEventType::kTimewaitExit) > 0; },
                              100 * test::kSec));
    const test::FakeQp* qa = pa.qp(x);
    const test::FakeQp* qb = pb.qp(pb.first_request());
    const QpAttr& a_rtr = qa->steps()[2].attr;
    const QpAttr& b_rtr = qb->steps()[2].attr;
    const std::uint16_t sport = a.cma().query(x)->src_port;

    std::vector<Case> cases;
    std::vector<std::uint16_t> attrs;
    for (const test::CapturedMad& c : net.captured()) {
      Mad m;
      MadError e{};
      ASSERT_TRUE(decode(c.mad, m, e));
      Case k = make_case(test::sample_route(ipv6), m.hdr, m.msg);
      k.frame = c.frame;
      const std::uint16_t attr = m.hdr.attr_id;
      attrs.push_back(attr);
      if (attr == 0x10) {
        k.expects.push_back({"infiniband.cm.req.serviceid.dport", 7174});
        k.expects.push_back({"infiniband.cm.req.serviceid.protocol", 0x06});
        k.expects.push_back({"infiniband.cm.req.localqpn", qa->qpn()});
        k.expects.push_back({"infiniband.cm.req.startpsn", a_rtr.rq_psn});
        k.expects.push_back({"infiniband.cm.req.localcaguid", a.cma().device().node_guid});
        k.expects.push_back({"infiniband.cm.req.pppmtu", 3});
        k.expects.push_back({"infiniband.cm.req.remoteresptout", 20});
        k.expects.push_back({"infiniband.cm.req.localresptout", 20});
        k.expects.push_back({"infiniband.cm.req.maxcmretr", 15});
        k.expects.push_back({"infiniband.cm.req.ip_cm.ipv", ipv6 ? 6u : 4u});
        k.expects.push_back({"infiniband.cm.req.ip_cm.sport", sport});
        k.expects.push_back({ipv6 ? "infiniband.cm.req.ip_cm.sip6" : "infiniband.cm.req.ip_cm.sip4",
                             0, a.ip().to_string()});
        k.expects.push_back({ipv6 ? "infiniband.cm.req.ip_cm.dip6" : "infiniband.cm.req.ip_cm.dip4",
                             0, b.ip().to_string()});
      } else if (attr == 0x13) {
        k.expects.push_back({"infiniband.cm.rep.localqpn", qb->qpn()});
        k.expects.push_back({"infiniband.cm.rep.startpsn", b_rtr.rq_psn});
        k.expects.push_back({"infiniband.cm.rep.localcaguid", b.cma().device().node_guid});
      } else if (attr == 0x15) {
        k.expects.push_back({"infiniband.cm.req.remoteqpneecn", qb->qpn()});
      }
      cases.push_back(std::move(k));
    }
    // Expect: REQ, REP, RTU, then DREQ and DREP, nothing else on a clean link.
    EXPECT_EQ(attrs, (std::vector<std::uint16_t>{0x10, 0x13, 0x14, 0x15, 0x16}));
    check(cases);
  }
}

}  // namespace
}  // namespace uroce::cm
