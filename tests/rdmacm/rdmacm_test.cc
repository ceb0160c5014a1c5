/* SPDX-License-Identifier: BSD-3-Clause */
// Unmodified librdmacm programs from Debian's packages (rdmacm-utils,
// perftest with -R) over uroce between two hosts: the network namespaces
// of scripts/testbed.sh, uroce on the "rdma" veth through net_af_packet.
// The programs exchange nothing but CM MADs and RDMA: no TCP, the
// addresses they connect to are uroce's own. Each test checks what a user
// would (both programs succeed and report their results); one also
// captures the link and has tshark decode every CM MAD, and checks the
// device's CM counters moved. Needs root.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child.h"
#include "support/icrc_check.h"
#include "support/pcap.h"
#include "support/stats_lines.h"
#include "support/testbed_pair.h"
#include "support/tshark.h"
#include "wire/roce_parser.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;

struct Pair {
  std::string server;  ///< on host b
  std::string client;  ///< on host a
  std::string expect;  ///< a regular expression the client's output must match
  /// perftest -R: the client may connect before the server listens (below).
  bool listen_race = false;
};

// Whether the client was turned away because nobody listened yet: REJ
// "invalid ServiceID" (8) to a REQ, SIDR_REP "ServiceID not supported"
// (1) to a SIDR_REQ. perftest -R opens its data connection right after a
// handshake on its control connection, and its server listens for it only
// after that handshake too: the client can win. Debian's perftest
// (4.5-0.17) then retries on ids it has destroyed and crashes; upstream
// fixed that retry in 2025 ("Fix crashes and logical flaws in RDMA CM
// connection retry"). The kernel's rdma_cm answers the same way.
bool lost_listen_race(const std::string& client_output) {
  return client_output.find("RDMA_CM_EVENT_REJECTED; error: 8.") != std::string::npos ||
         client_output.find("RDMA_CM_EVENT_UNREACHABLE; error: 1.") != std::string::npos;
}

class Rdmacm : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override { bed_.down(); }

  std::string dir() const { return bed_.dir(); }

  // The program under uroce-run on `host` (10.77.0.1 and fd77::1 on a,
  // .2 and ::2 on b), its counters to <dir>/<host>.stats at exit and its
  // stats endpoint in <dir>/<host>/.
  std::string over_uroce(char host, const std::string& program) const {
    return bed_.over_uroce(host, program);
  }

  test::CounterMap live_counters(char host) const { return bed_.live_counters(host); }
  void wait_for_listener(char host) const { bed_.wait_for_cm_listener(host, 30s); }

  test::CounterMap counters(char host) const { return bed_.counters(host); }

  // Runs the server on b until it listens, then the client on a; both
  // must succeed. Returns the client's output. A pair that can lose
  // perftest's race to the listener runs again, at most twice, when that
  // is what the client reports.
  std::string run(const Pair& p) {
    for (int attempt = 1;; ++attempt) {
      Child server(over_uroce('b', p.server), dir() + "/server.log");
      wait_for_listener('b');
      Child client(over_uroce('a', p.client), dir() + "/client.log");
      const int client_rc = client.wait(120s);
      const std::string out = client.output();
      if (client_rc != 0 && p.listen_race && attempt < 3 && lost_listen_race(out)) {
        std::printf("attempt %d: the client connected before the server listened:\n%s\n", attempt,
                    out.c_str());
        server.signal(SIGKILL);
        server.wait(10s);
        continue;
      }
      const int server_rc = server.wait(30s);
      EXPECT_EQ(client_rc, 0) << "client:\n" << out << "\nserver:\n" << server.output();
      EXPECT_EQ(server_rc, 0) << "server:\n" << server.output();
      EXPECT_TRUE(std::regex_search(out, std::regex(p.expect)))
          << "the client did not report a result matching " << p.expect << ":\n"
          << out;
      return out;
    }
  }

  test::TestbedPair bed_{{.tag = "ur", .stats_file = true, .stats_dir = true}};
};

// What tshark must decode in each CM message (IBA 12.6): its attribute,
// and a field of its own.
const std::map<std::string, std::string> kCmField = {
    {"0x0010", "infiniband.cm.req.serviceid"},    {"0x0012", "infiniband.cm.rej.localcommid"},
    {"0x0013", "infiniband.cm.rep.remotecommid"}, {"0x0014", "infiniband.cm.rtu.localcommid"},
    {"0x0015", "infiniband.cm.dreq.localcommid"}, {"0x0016", "infiniband.cm.drsp.localcommid"},
};

// Every MAD to QP 1 in `pcap`: a well-formed RoCEv2 frame (ICRC too), and
// a CM message tshark decodes field by field, nothing malformed, no
// expert warning. Returns the attributes seen.
std::multiset<std::string> check_cm_capture(const std::string& pcap) {
  std::size_t mads = 0;
  for (const auto& frame : test::read_pcap(pcap)) {
    wire::RocePacket pkt;
    const wire::DropReason why = wire::parse_roce_frame(frame, pkt);
    if (why == wire::DropReason::kNotIp || why == wire::DropReason::kNotUdp ||
        why == wire::DropReason::kNotRoceV2Port)
      continue;
    EXPECT_EQ(why, wire::DropReason::kNone) << pcap << ": " << wire::name(why);
    if (why == wire::DropReason::kNone && pkt.bth.dest_qp == 1) {
      ++mads;
      EXPECT_EQ(pkt.ext.deth.qkey, 0x80010000u) << "GSI Q_Key";
      EXPECT_EQ(pkt.ext.deth.src_qp, 1u) << "from QP 1";
      EXPECT_EQ(pkt.bth.pkey, 0xFFFF);
      EXPECT_EQ(pkt.payload.size(), 256u) << "one MAD";
    }
  }
  std::vector<std::string> fields = {"frame.number",
                                     "infiniband.bth.destqp",
                                     "infiniband.mad.attributeid",
                                     "_ws.malformed",
                                     "_ws.expert.severity",
                                     "infiniband.cm.req.ip_cm.sip4",
                                     "infiniband.cm.req.ip_cm.dip4"};
  for (const auto& [attr, field] : kCmField) fields.push_back(field);
  std::multiset<std::string> seen;
  for (const auto& d : test::tshark_decode(pcap, fields, {"infiniband.identify_payload:FALSE"})) {
    const std::string frame = pcap + " frame " + d.at("frame.number");
    EXPECT_EQ(d.at("_ws.malformed"), "") << frame;
    if (d.at("infiniband.bth.destqp").empty() ||
        test::tshark_number(d.at("infiniband.bth.destqp")) != 1)
      continue;
    const std::string attr = d.at("infiniband.mad.attributeid");
    seen.insert(attr);
    const auto it = kCmField.find(attr);
    EXPECT_NE(it, kCmField.end()) << frame << ": CM attribute '" << attr << "'";
    if (it != kCmField.end()) {
      EXPECT_NE(d.at(it->second), "") << frame << ": no " << it->second;
    }
    // PI_WARN is 0x00600000: chat and notes are fine, warnings and errors not.
    const std::string sev = d.at("_ws.expert.severity");
    EXPECT_TRUE(sev.empty() || test::tshark_number(sev) < 0x00600000) << frame << ": " << sev;
    if (attr == "0x0010") {
      EXPECT_EQ(d.at("infiniband.cm.req.ip_cm.sip4"), "10.77.0.1") << frame;
      EXPECT_EQ(d.at("infiniband.cm.req.ip_cm.dip4"), "10.77.0.2") << frame;
    }
  }
  EXPECT_EQ(seen.size(), mads) << pcap << ": tshark and uroce disagree on the MADs";
  const auto icrc = test::independent_icrc_check(pcap);
  EXPECT_EQ(icrc.bad, 0u) << pcap << ": " << icrc.output;
  return seen;
}

TEST_F(Rdmacm, RpingVerifiesItsDataAndEveryCmMadDecodes) {
  bed_.start_captures();
  // -V: each side checks every byte the other sent; -v prints each ping.
  run({"rping -s -a 10.77.0.2 -V -C 100", "rping -c -a 10.77.0.2 -V -v -C 100",
       R"(ping data: rdma-ping-99: )"});
  bed_.stop_captures();
  std::multiset<std::string> seen = check_cm_capture(dir() + "/a.pcap");
  seen.merge(check_cm_capture(dir() + "/b.pcap"));
  // The whole life of a connection: REQ, REP, RTU, then DREQ and DREP.
  for (const char* attr : {"0x0010", "0x0013", "0x0014", "0x0015", "0x0016"})
    EXPECT_EQ(seen.count(attr), 1u) << "CM attribute " << attr << " once on the link";

  // The CM's counters, named as the kernel's sysfs names them.
  auto a = counters('a');
  auto b = counters('b');
  EXPECT_EQ(a["cm.cm_tx_msgs/req"], 1u);
  EXPECT_EQ(a["cm.cm_rx_msgs/rep"], 1u);
  EXPECT_EQ(a["cm.cm_tx_msgs/rtu"], 1u);
  EXPECT_EQ(b["cm.cm_rx_msgs/req"], 1u);
  EXPECT_EQ(b["cm.cm_tx_msgs/rep"], 1u);
  EXPECT_EQ(b["cm.cm_rx_msgs/rtu"], 1u);
  EXPECT_EQ(a["cm.cm_tx_msgs/dreq"] + b["cm.cm_tx_msgs/dreq"], 1u);
  EXPECT_EQ(a["cm.cm_tx_retries/req"] + b["cm.cm_tx_retries/rep"], 0u) << "nothing was lost";
  EXPECT_GE(a["cm.gsi_tx_mads"], 3u);
  EXPECT_GE(b["cm.gsi_rx_mads"], 3u);
  std::printf("rping over the CM: client sent %llu MADs, received %llu\n", a["cm.gsi_tx_mads"],
              a["cm.gsi_rx_mads"]);
}

TEST_F(Rdmacm, RpingOverIpv6) {
  run({"rping -s -a fd77::2 -V -C 20", "rping -c -a fd77::2 -V -v -C 20",
       R"(ping data: rdma-ping-19: )"});
}

TEST_F(Rdmacm, UcmatoseFourConnections) {
  run({"ucmatose -c 4", "ucmatose -s 10.77.0.2 -c 4", R"(test complete\s+return status 0)"});
}

TEST_F(Rdmacm, UdaddySidr) {
  run({"udaddy", "udaddy -s 10.77.0.2", R"(test complete\s+return status 0)"});
}

TEST_F(Rdmacm, MckeyDeliversEveryMessageToTheGroup) {
  // mckey: both ends join 239.77.0.1 through rdma_cm (JOIN_IP_MCAST, then
  // librdmacm's ibv_attach_mcast on the MULTICAST_JOIN event), the
  // receiver with two ids, so two QPs; the sender sends ten datagrams to
  // the group, and each of the receiver's QPs must get all ten.
  bed_.start_captures();
  // stdbuf: the receiver's lines as it prints them, to know it joined.
  Child receiver(over_uroce('b', "stdbuf -oL mckey -m 239.77.0.1 -b 10.77.0.2 -c 2"),
                 dir() + "/receiver.log");
  const auto joins = [&] {
    const std::string out = receiver.output();
    std::size_t n = 0;
    for (auto at = out.find("mckey: joined dgid"); at != std::string::npos;
         at = out.find("mckey: joined dgid", at + 1))
      ++n;
    return n;
  };
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (joins() < 2 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(50ms);
  ASSERT_EQ(joins(), 2u) << receiver.output();
  Child sender(over_uroce('a', "mckey -m 239.77.0.1 -s -b 10.77.0.1"), dir() + "/sender.log");
  const int sender_rc = sender.wait(60s);
  const int receiver_rc = receiver.wait(30s);
  bed_.stop_captures();
  const std::string out = receiver.output();
  EXPECT_EQ(sender_rc, 0) << "sender:\n" << sender.output();
  EXPECT_EQ(receiver_rc, 0) << "receiver:\n" << out;
  // The event's address vector names the group's MGID, the IPv4-mapped
  // address; the receiver polled one completion per message.
  EXPECT_NE(out.find("mckey: joined dgid: ::ffff:239.77.0.1 mlid 0x0 sl 0"), std::string::npos)
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(receiving data transfers\s+data transfers complete\s+test complete\s+)"
                      R"(return status 0)")))
      << out;

  // On the link: ten SEND-with-immediate datagrams to the group's MAC and
  // the multicast QPN, well-formed (ICRC too) and decoded by tshark.
  std::size_t to_group = 0;
  for (const auto& frame : test::read_pcap(dir() + "/b.pcap")) {
    wire::RocePacket pkt;
    if (wire::parse_roce_frame(frame, pkt) != wire::DropReason::kNone || pkt.bth.dest_qp == 1)
      continue;
    ++to_group;
    const std::uint8_t group_mac[] = {0x01, 0x00, 0x5E, 0x4D, 0x00, 0x01};
    EXPECT_TRUE(std::equal(group_mac, group_mac + 6, frame.begin())) << "the mapped MAC";
    EXPECT_EQ(pkt.bth.dest_qp, 0xFFFFFFu);
    EXPECT_EQ(pkt.dst_ip, *wire::IpAddr::parse("239.77.0.1"));
    EXPECT_EQ(pkt.ext.deth.qkey, 0x01234567u) << "RDMA_UDP_QKEY";
    EXPECT_EQ(pkt.payload.size(), 100u);
  }
  EXPECT_EQ(to_group, 10u);
  std::size_t decoded = 0;
  for (const auto& d : test::tshark_decode(
           dir() + "/b.pcap",
           {"frame.number", "infiniband.bth.destqp", "eth.dst", "ip.dst", "_ws.malformed"})) {
    EXPECT_EQ(d.at("_ws.malformed"), "") << "frame " << d.at("frame.number");
    if (d.at("infiniband.bth.destqp").empty() ||
        test::tshark_number(d.at("infiniband.bth.destqp")) != 0xFFFFFF)
      continue;
    ++decoded;
    EXPECT_EQ(d.at("eth.dst"), "01:00:5e:4d:00:01");
    EXPECT_EQ(d.at("ip.dst"), "239.77.0.1");
  }
  EXPECT_EQ(decoded, 10u);
  const auto icrc = test::independent_icrc_check(dir() + "/b.pcap");
  EXPECT_EQ(icrc.bad, 0u) << icrc.output;

  // The receiver's device gave every datagram to both its attached QPs.
  auto a = counters('a');
  auto b = counters('b');
  EXPECT_EQ(a["engine.multicast_xmit_packets"], 10u);
  EXPECT_EQ(b["engine.multicast_rcv_packets"], 10u);
  EXPECT_EQ(b["engine.multicast_delivered"], 20u);
  EXPECT_EQ(b["engine.multicast_no_group"], 0u);
  EXPECT_EQ(b["port.rdma_recvs"], 20u);
}

TEST_F(Rdmacm, RdmaServerAndClientSyncIds) {
  run({"rdma_server", "rdma_client -s 10.77.0.2", R"(rdma_client: end 0)"});
}

TEST_F(Rdmacm, RstreamOverRsockets) {
  // librdmacm's rsockets: stream sockets on CM-connected RC QPs, their
  // parameters in the CM's private data.
  run({"rstream -b 10.77.0.2 -S 65536 -C 200", "rstream -s 10.77.0.2 -S 65536 -C 200",
       R"(custom\s+64k\s+200\s+1\s+)"});
}

TEST_F(Rdmacm, RiostreamOverRsocketsIoMaps) {
  // rsockets' riomap: the receiver maps its buffer for the sender's RDMA
  // writes (riowrite) instead of taking SENDs.
  run({"riostream -b 10.77.0.2 -S 65536 -C 200", "riostream -s 10.77.0.2 -S 65536 -C 200",
       R"(custom\s+64k\s+200\s+1\s+)"});
}

// perftest prints one result line per size: "<bytes> <iterations> ...".
const std::string kBwLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]*[1-9][0-9.]*\s+[0-9.]+)";
const std::string kLatLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+)";

Pair perftest(const std::string& tool, const std::string& args, const std::string& expect) {
  // -R: the connection through rdma_cm, its keys over the CM QP too.
  return {tool + " -d uroce0 -R " + args, tool + " -d uroce0 -R " + args + " 10.77.0.2", expect,
          true};
}

TEST_F(Rdmacm, IbSendBw) { run(perftest("ib_send_bw", "-n 500", kBwLine)); }
TEST_F(Rdmacm, IbWriteBw) { run(perftest("ib_write_bw", "-n 500", kBwLine)); }
TEST_F(Rdmacm, IbReadBw) { run(perftest("ib_read_bw", "-n 500", kBwLine)); }
TEST_F(Rdmacm, IbSendLat) { run(perftest("ib_send_lat", "-n 500", kLatLine)); }
TEST_F(Rdmacm, IbSendBwUd) { run(perftest("ib_send_bw", "-c UD -n 500", kBwLine)); }

TEST_F(Rdmacm, AConnectionToAPortNobodyListensOnIsRejectedAtOnce) {
  // A uroce host whose CM listens on another port: the REQ gets REJ 8
  // (invalid ServiceID) straight away, long before the REQ's first resend
  // (6 s) or its timeout.
  Child server(over_uroce('b', "rping -s -a 10.77.0.2 -p 7175"), dir() + "/server.log");
  wait_for_listener('b');
  const auto start = std::chrono::steady_clock::now();
  Child client(over_uroce('a', "rping -c -a 10.77.0.2 -p 7174 -C 1"), dir() + "/client.log");
  const int rc = client.wait(60s);
  const auto took = std::chrono::steady_clock::now() - start;
  auto b = live_counters('b');
  server.interrupt();
  server.wait(10s);
  EXPECT_NE(rc, 0) << client.output();
  EXPECT_NE(client.output().find("RDMA_CM_EVENT_REJECTED, error 8"), std::string::npos)
      << client.output();
  EXPECT_LT(took, 4s) << "the REJ came at once (the REQ would be resent after 6 s)";
  EXPECT_EQ(b["cm.cm_rx_msgs/req"], 1u);
  EXPECT_EQ(b["cm.cm_tx_msgs/rej"], 1u);
}

}  // namespace
}  // namespace uroce
