/* SPDX-License-Identifier: BSD-3-Clause */
// Unmodified RDMA programs from Debian's packages (perftest, ibverbs-utils)
// over uroce between two hosts: two network namespaces from
// scripts/testbed.sh, the programs' own TCP exchange over one veth pair and
// RoCEv2 over the other, which uroce drives through net_af_packet. Every
// test checks what a user would: both programs succeed and report what
// they measured, and every UDP 4791 frame on the link decodes in tshark
// as InfiniBand, nothing malformed, with a correct ICRC. Needs root.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <regex>
#include <string>

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
  std::string server;  ///< the program and its arguments on host b
  std::string client;  ///< ... on host a; "{peer}" becomes b's TCP address
  std::string expect;  ///< a regular expression the client's output must match
  bool ipv6 = false;   ///< RoCEv2 over IPv6: every RoCE frame must be IPv6
  bool xrc = false;    ///< XRC: every RoCE frame must carry an XRC opcode (0xA0-0xB7)
  unsigned port = 18515;
};

class Interop : public ::testing::Test {
 protected:
  Interop() : Interop(1500) {}
  explicit Interop(unsigned link_mtu) : Interop({.tag = "ui", .link_mtu = link_mtu}) {}
  explicit Interop(const test::TestbedOptions& options) : bed_(options) {}
  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override { bed_.down(); }

  std::string ns(char host) const { return bed_.ns(host); }
  // The program under uroce-run on `host`, with uroce's addresses there
  // (GID 1 IPv4, GID 2 IPv6).
  std::string over_uroce(char host, const std::string& program) const {
    return bed_.over_uroce(host, program, env_);
  }

  // Runs the pair, captures the RDMA link at both ends, checks the frames.
  void run(const Pair& r) {
    const std::string dir = bed_.dir();
    bed_.start_captures();
    Child server(over_uroce('b', r.server), dir + "/server.log");
    bed_.wait_for_tcp_listener('b', r.port, 30s);
    std::string client_cmd = r.client;
    client_cmd.replace(client_cmd.find("{peer}"), 6, "192.168.77.2");
    Child client(over_uroce('a', client_cmd), dir + "/client.log");
    const int client_rc = client.wait(180s);
    const int server_rc = server.wait(60s);
    bed_.stop_captures();
    const std::string out = client.output();
    EXPECT_EQ(client_rc, 0) << "client:\n" << out << "\nserver:\n" << server.output();
    EXPECT_EQ(server_rc, 0) << "server:\n" << server.output();
    EXPECT_TRUE(std::regex_search(out, std::regex(r.expect)))
        << "the client did not report a result matching " << r.expect << ":\n"
        << out;
    // A one-way transfer (UC or UD) shows RoCEv2 at one end only. The two
    // ends are checked at once: each check runs tshark and python, and
    // the test has the machine to itself (RUN_SERIAL).
    auto b = std::async(std::launch::async, [&] { return check_capture(dir + "/b.pcap", r); });
    const std::size_t roce = check_capture(dir + "/a.pcap", r) + b.get();
    EXPECT_GT(roce, 0u) << "no RoCEv2 frame on the link";
  }

  // Every RoCEv2 frame parses with a correct ICRC, checked by lib/wire and
  // by tests/support/icrc_check.py, and tshark decodes it as InfiniBand
  // with nothing malformed. Returns how many there were.
  std::size_t check_capture(const std::string& pcap, const Pair& r) {
    const bool ipv6 = r.ipv6;
    const auto frames = test::read_pcap(pcap);
    std::size_t roce = 0;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      wire::RocePacket pkt;
      const wire::DropReason why = wire::parse_roce_frame(frames[i], pkt);
      if (why == wire::DropReason::kNotIp || why == wire::DropReason::kNotUdp ||
          why == wire::DropReason::kNotRoceV2Port)
        continue;  // not RoCEv2 (ARP, say)
      ++roce;
      if (why == wire::DropReason::kNone) {
        EXPECT_EQ(pkt.ipv6, ipv6) << pcap << " frame " << i + 1 << " is IPv" << (pkt.ipv6 ? 6 : 4);
        if (r.xrc && pkt.info->operation != wire::Operation::kCnp) {
          EXPECT_EQ(wire::transport_of(pkt.bth.opcode), wire::Transport::kXrc)
              << pcap << " frame " << i + 1 << " is " << pkt.info->name;
        }
      }
      EXPECT_EQ(why, wire::DropReason::kNone)
          << pcap << " frame " << i + 1 << ": " << wire::name(why);
    }
    // Payloads are the programs' bytes: keep Wireshark from guessing a
    // protocol inside them (a 2-byte RDMA WRITE reads as an EtherType).
    const auto decoded = test::tshark_decode(
        pcap, {"frame.number", "udp.dstport", "infiniband.bth.opcode", "_ws.malformed"},
        {"infiniband.identify_payload:FALSE"});
    std::size_t ib = 0;
    for (const auto& d : decoded) {
      EXPECT_EQ(d.at("_ws.malformed"), "") << pcap << " frame " << d.at("frame.number");
      if (d.at("udp.dstport") != "4791") continue;
      ++ib;
      EXPECT_NE(d.at("infiniband.bth.opcode"), "")
          << pcap << " frame " << d.at("frame.number") << " is UDP 4791 but not InfiniBand";
    }
    EXPECT_EQ(ib, roce) << pcap << ": tshark and uroce disagree on the RoCEv2 frames";
    // The ICRCs once more, by a check that shares no code with lib/wire.
    const auto icrc = test::independent_icrc_check(pcap);
    EXPECT_EQ(icrc.roce, roce) << pcap << ": " << icrc.output;
    EXPECT_EQ(icrc.bad, 0u) << pcap << ": " << icrc.output;
    return roce;
  }

  // One program under uroce on host a; returns its output.
  std::string run_one(const std::string& program, int* rc) {
    Child c(over_uroce('a', program), bed_.dir() + "/one.log");
    *rc = c.wait(60s);
    return c.output();
  }

  test::TestbedPair bed_;
  std::string env_;  ///< variables for the programs under uroce (UROCE_...)
};

// The RDMA link with 9000-byte frames: uroce finds the link's MTU and
// offers a path MTU of 4096.
class InteropJumbo : public Interop {
 protected:
  InteropJumbo() : Interop(9000) {}
};

TEST_F(Interop, IbvDevicesListsUroce0WithItsMacGuid) {
  int rc = 0;
  const std::string out = run_one("ibv_devices", &rc);
  ASSERT_EQ(rc, 0) << out;
  // The node GUID is the modified EUI-64 of the port's MAC.
  std::string addr;
  {
    Child c("ip netns exec " + ns('a') + " cat /sys/class/net/rdma/address",
            bed_.dir() + "/mac.log");
    ASSERT_EQ(c.wait(10s), 0);
    addr = c.output();
  }
  unsigned m[6];
  ASSERT_EQ(
      std::sscanf(addr.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]), 6);
  char guid[17];
  std::snprintf(guid, sizeof(guid), "%02x%02x%02xfffe%02x%02x%02x", m[0] ^ 2, m[1], m[2], m[3],
                m[4], m[5]);
  EXPECT_TRUE(std::regex_search(out, std::regex(std::string(R"(uroce0\s+)") + guid))) << out;
}

TEST_F(Interop, IbvDevinfoShowsAnActiveRoceV2Port) {
  int rc = 0;
  const std::string out = run_one("ibv_devinfo -v", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* want :
       {R"(hca_id:\s+uroce0)", R"(state:\s+PORT_ACTIVE)", R"(link_layer:\s+Ethernet)",
        R"(max_mtu:\s+4096)", R"(active_mtu:\s+1024)",
        R"(GID\[\s*0\]:\s+fe80::[0-9a-f:]+, RoCE v2)",
        R"(GID\[\s*1\]:\s+::ffff:10\.77\.0\.1, RoCE v2)", R"(GID\[\s*2\]:\s+fd77::1, RoCE v2)"}) {
    EXPECT_TRUE(std::regex_search(out, std::regex(want))) << "no " << want << " in\n" << out;
  }
  const std::string brief = run_one("ibv_devinfo -d uroce0", &rc);
  ASSERT_EQ(rc, 0) << brief;
  EXPECT_TRUE(std::regex_search(brief, std::regex(R"(state:\s+PORT_ACTIVE)"))) << brief;
}

// perftest prints one result line per size: "<bytes> <iterations> ..."
const std::string kBwLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]*[1-9][0-9.]*\s+[0-9.]+)";
const std::string kLatLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+)";
const std::string kPingpong = R"(\d+ iters in [0-9.]+ seconds)";

Pair perftest(const std::string& tool, const std::string& args, const std::string& expect) {
  return {tool + " -d uroce0 " + args, tool + " -d uroce0 " + args + " {peer}", expect};
}

Pair pingpong(const std::string& tool, const std::string& args) {
  return {tool + " -d uroce0 -g 1 " + args, tool + " -d uroce0 -g 1 " + args + " {peer}",
          kPingpong};
}

// perftest, RC.
TEST_F(Interop, IbWriteBw) { run(perftest("ib_write_bw", "-n 200", kBwLine)); }
TEST_F(Interop, IbWriteLat) { run(perftest("ib_write_lat", "-n 200", kLatLine)); }
TEST_F(Interop, IbReadBw) { run(perftest("ib_read_bw", "-n 200", kBwLine)); }
TEST_F(Interop, IbReadLat) { run(perftest("ib_read_lat", "-n 200", kLatLine)); }
TEST_F(Interop, IbSendBw) { run(perftest("ib_send_bw", "-n 200", kBwLine)); }
TEST_F(Interop, IbSendLat) { run(perftest("ib_send_lat", "-n 200", kLatLine)); }
TEST_F(Interop, IbAtomicBwFetchAdd) { run(perftest("ib_atomic_bw", "-n 500", kBwLine)); }
TEST_F(Interop, IbAtomicBwCmpAndSwap) {
  run(perftest("ib_atomic_bw", "-n 500 -A CMP_AND_SWAP", kBwLine));
}
TEST_F(Interop, IbAtomicLat) { run(perftest("ib_atomic_lat", "-n 200", kLatLine)); }
TEST_F(Interop, IbAtomicLatCmpAndSwap) {
  run(perftest("ib_atomic_lat", "-n 200 -A CMP_AND_SWAP", kLatLine));
}

// perftest options.
TEST_F(Interop, IbWriteBwAllSizes) { run(perftest("ib_write_bw", "-a -n 20", kBwLine)); }
TEST_F(Interop, IbSendLatAllSizes) { run(perftest("ib_send_lat", "-a -n 20", kLatLine)); }
TEST_F(Interop, IbWriteBwFourQps) { run(perftest("ib_write_bw", "-q 4 -n 100", kBwLine)); }
TEST_F(Interop, IbWriteBwBidirectional) { run(perftest("ib_write_bw", "-b -n 200", kBwLine)); }
TEST_F(Interop, IbReadBwDurationGbits) {
  run(perftest("ib_read_bw", "-D 2 --report_gbits", kBwLine));
}
TEST_F(Interop, IbSendBwEvents) { run(perftest("ib_send_bw", "-e -n 200", kBwLine)); }
TEST_F(Interop, IbSendLatEvents) { run(perftest("ib_send_lat", "-e -n 200", kLatLine)); }

TEST_F(InteropJumbo, IbWriteBwUsesPathMtu4096) {
  run(perftest("ib_write_bw", "-n 200", R"(Mtu\s*:\s*4096\[B\])"));
}
TEST_F(InteropJumbo, IbReadBw) { run(perftest("ib_read_bw", "-n 200", kBwLine)); }
TEST_F(InteropJumbo, IbSendBwUd) {
  run(perftest("ib_send_bw", "-c UD -n 200", R"(Mtu\s*:\s*4096\[B\])"));
}

// Each host's device on two lcores (DeviceConfig::lcores): net_af_packet
// with a socket per lcore in one fanout group, the kernel spreading the
// flows over them by hash, the QPs spread over the lcores by QPN. Sixteen
// QPs, so that each lcore of each host has some (all on one lcore: one
// chance in 2^15).
class InteropLcores : public Interop {
 protected:
  InteropLcores() : Interop(test::TestbedOptions{.tag = "uil", .stats_file = true}) {
    env_ = "UROCE_DEVICE0_LCORES=2";
  }
  // Each host's counters: both lcores received RoCE, and the sum is the
  // device's.
  void expect_both_lcores_worked() {
    for (char host : {'a', 'b'}) {
      const auto c = test::stats_lines(test::slurp(bed_.stats_path(host)), "uroce0");
      EXPECT_GT(c.count("lcore:0.rx_roce") ? c.at("lcore:0.rx_roce") : 0, 0u) << host;
      EXPECT_GT(c.count("lcore:1.rx_roce") ? c.at("lcore:1.rx_roce") : 0, 0u) << host;
      EXPECT_EQ(c.at("engine.rx_roce"), c.at("lcore:0.rx_roce") + c.at("lcore:1.rx_roce"));
      EXPECT_EQ(c.at("engine.rx_handed_off"), c.at("engine.rx_handed_in")) << host;
      EXPECT_EQ(c.at("engine.rx_unknown_qpn"), 0u) << host;
    }
  }
};

TEST_F(InteropLcores, IbWriteBwSixteenQps) {
  run(perftest("ib_write_bw", "-q 16 -n 200", kBwLine));
  expect_both_lcores_worked();
}
TEST_F(InteropLcores, IbSendBwSixteenQps) {
  run(perftest("ib_send_bw", "-q 16 -n 200", kBwLine));
  expect_both_lcores_worked();
}

// RoCEv2 over IPv6: the GID of uroce's IPv6 address (index 2), peers
// resolved with neighbour discovery.
TEST_F(Interop, RcPingpongIpv6) {
  Pair p = pingpong("ibv_rc_pingpong", "-c");
  for (std::string* cmd : {&p.server, &p.client}) cmd->replace(cmd->find("-g 1"), 4, "-g 2");
  p.ipv6 = true;
  run(p);
}
TEST_F(Interop, RcPingpongLinkLocalGid) {
  // GID 0, the fe80:: address made from the MAC, which many programs use
  // by default: the peer is found with neighbour discovery.
  Pair p = pingpong("ibv_rc_pingpong", "-c");
  for (std::string* cmd : {&p.server, &p.client}) cmd->replace(cmd->find("-g 1"), 4, "-g 0");
  p.ipv6 = true;
  run(p);
}
TEST_F(Interop, IbWriteBwIpv6) {
  Pair p = perftest("ib_write_bw", "-n 200 -x 2", kBwLine);
  p.ipv6 = true;
  run(p);
}
TEST_F(Interop, IbSendLatUdIpv6) {
  Pair p = perftest("ib_send_lat", "-c UD -n 200 -x 2", kLatLine);
  p.ipv6 = true;
  run(p);
}

// perftest, UC and UD.
TEST_F(Interop, IbWriteBwUc) { run(perftest("ib_write_bw", "-c UC -n 200", kBwLine)); }
// UC resends nothing: a SEND the kernel drops between the veths (its
// backlog holds 1000 frames) leaves ib_send_bw's server waiting forever.
// 200 messages of 4 KiB are 800 frames, which the backlog holds even when
// the receiver is descheduled; 64 KiB messages were 12800 (a hang seen
// once on a loaded machine).
TEST_F(Interop, IbSendBwUc) { run(perftest("ib_send_bw", "-c UC -n 200 -s 4096", kBwLine)); }
TEST_F(Interop, IbSendLatUc) { run(perftest("ib_send_lat", "-c UC -n 200", kLatLine)); }
TEST_F(Interop, IbSendBwUd) { run(perftest("ib_send_bw", "-c UD -n 200", kBwLine)); }
TEST_F(Interop, IbSendLatUd) { run(perftest("ib_send_lat", "-c UD -n 200", kLatLine)); }

// ibverbs-utils pingpongs: -g 1 is uroce's IPv4 GID.
TEST_F(Interop, RcPingpong) { run(pingpong("ibv_rc_pingpong", "")); }
TEST_F(Interop, RcPingpongValidateLarge) { run(pingpong("ibv_rc_pingpong", "-c -s 65536 -n 200")); }
TEST_F(Interop, RcPingpongEvents) { run(pingpong("ibv_rc_pingpong", "-c -e")); }
TEST_F(Interop, RcPingpongNewPostSend) { run(pingpong("ibv_rc_pingpong", "-c -N")); }
TEST_F(Interop, RcPingpongSizes) { run(pingpong("ibv_rc_pingpong", "-c -s 1 -n 500")); }
TEST_F(Interop, UcPingpong) { run(pingpong("ibv_uc_pingpong", "-c")); }
TEST_F(Interop, UcPingpongEvents) { run(pingpong("ibv_uc_pingpong", "-c -e -s 16384")); }
TEST_F(Interop, UdPingpong) { run(pingpong("ibv_ud_pingpong", "-c")); }
TEST_F(Interop, UdPingpongEvents) { run(pingpong("ibv_ud_pingpong", "-c -e -s 1000")); }
TEST_F(Interop, SrqPingpong) { run(pingpong("ibv_srq_pingpong", "-c")); }
TEST_F(Interop, SrqPingpongEvents) { run(pingpong("ibv_srq_pingpong", "-c -e -q 4")); }

// XRC: a domain opened on a file, XRC SRQs, initiator and target QPs,
// the XRCETH on the wire.
Pair xrc(Pair p) {
  p.xrc = true;
  return p;
}
TEST_F(Interop, XsrqPingpong) {
  Pair p = xrc(pingpong("ibv_xsrq_pingpong", ""));
  p.expect = R"((^|\n)success\n)";  // all it says once every message came back
  run(p);
}
TEST_F(Interop, IbSendBwXrc) { run(xrc(perftest("ib_send_bw", "-c XRC -n 200", kBwLine))); }
TEST_F(Interop, IbWriteBwXrc) { run(xrc(perftest("ib_write_bw", "-c XRC -n 200", kBwLine))); }
TEST_F(Interop, IbReadBwXrc) { run(xrc(perftest("ib_read_bw", "-c XRC -n 200", kBwLine))); }
TEST_F(Interop, IbSendLatXrc) { run(xrc(perftest("ib_send_lat", "-c XRC -n 200", kLatLine))); }
TEST_F(Interop, IbWriteLatXrc) { run(xrc(perftest("ib_write_lat", "-c XRC -n 200", kLatLine))); }
TEST_F(Interop, IbReadLatXrc) { run(xrc(perftest("ib_read_lat", "-c XRC -n 200", kLatLine))); }
TEST_F(Interop, IbAtomicBwXrc) { run(xrc(perftest("ib_atomic_bw", "-c XRC -n 500", kBwLine))); }
TEST_F(Interop, IbAtomicLatXrc) {
  run(xrc(perftest("ib_atomic_lat", "-c XRC -n 200 -A CMP_AND_SWAP", kLatLine)));
}

}  // namespace
}  // namespace uroce
