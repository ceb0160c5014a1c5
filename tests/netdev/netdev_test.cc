/* SPDX-License-Identifier: BSD-3-Clause */
// Netdev mode: uroce on a kernel interface, sharing it and its addresses
// with the kernel (docs/netdev-mode.md). Two network namespaces with one
// veth pair, "eth", whose kernel addresses are the devices' GIDs
// (scripts/testbed.sh, TESTBED_LAYOUT=netdev). Unmodified perftest and
// ibverbs-utils run their TCP exchange and their RDMA over the same link
// and address, in-process and through the device daemon; the kernel keeps
// answering ping and ARP and sends no ICMP port unreachable for RoCE;
// uroce answers nothing itself and is handed nothing but its own frames.
// Needs root.

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "support/child.h"
#include "support/hugepages.h"
#include "support/pcap.h"
#include "support/super_frame.h"
#include "support/testbed_pair.h"
#include "support/tshark.h"
#include "wire/roce_parser.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;

struct Pair {
  std::string server;  ///< the program and its arguments on host b
  std::string client;  ///< ... on host a, b's address after it
  std::string expect;  ///< a regular expression the client's output must match
  bool ipv6 = false;   ///< RoCEv2 over IPv6: every RoCE frame must be IPv6
  std::string server_ip = "10.78.0.2";
};

const std::string kBwLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]*[1-9][0-9.]*\s+[0-9.]+)";
const std::string kLatLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+)";
const std::string kPingpong = R"(\d+ iters in [0-9.]+ seconds)";

Pair perftest(const std::string& tool, const std::string& args, const std::string& expect) {
  return {tool + " -d uroce0 " + args, tool + " -d uroce0 " + args, expect};
}

// GID 0 is the link-local address, 1 the interface's IPv4 address, 2 its
// IPv6 one.
Pair pingpong(const std::string& tool, int gid, const std::string& args = "") {
  const std::string cmd = tool + " -d uroce0 -g " + std::to_string(gid) + " " + args;
  return {cmd, cmd, kPingpong, gid != 1};
}

class Netdev : public ::testing::Test {
 protected:
  /// `ports`: each host's port, a's then b's ("" for af_packet, the
  /// default); `link_mtu` 0 for testbed.sh's 1500.
  explicit Netdev(std::array<std::string, 2> ports = {}, unsigned link_mtu = 0)
      : bed_({.tag = "un",
              .link_mtu = link_mtu,
              .netdev = true,
              .netdev_ports = ports,
              .stats_file = true,
              .stats_dir = true}),
        both_af_xdp_(ports[0] == "af_xdp" && ports[1] == "af_xdp"),
        super_frames_(ports[0] == "packet" || ports[1] == "packet") {}

  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override {
    for (auto& d : daemons_) test::TestbedPair::stop_daemon(d);
    bed_.down();
  }

  std::string in(char host, const std::string& cmd) const {
    return "ip netns exec " + bed_.ns(host) + " " + cmd;
  }
  std::string program(char host, const std::string& cmd) const {
    return attached_ ? bed_.attached(host, cmd) : bed_.over_uroce(host, cmd);
  }

  // Runs the pair over the link, captured at both ends. While the server
  // has its device open the kernel must still answer ping on b's address.
  void run(const Pair& p) {
    const std::string dir = bed_.dir();
    bed_.start_captures();
    Child server(program('b', p.server), dir + "/server.log");
    bed_.wait_for_tcp_listener('b', 18515, 30s);
    {
      Child ping(in('a', "ping -c 2 -i 0.2 -W 2 10.78.0.2 && ping -c 2 -i 0.2 -W 2 fd78::2"),
                 dir + "/ping.log");
      EXPECT_EQ(ping.wait(20s), 0) << "the kernel no longer answers ping:\n" << ping.output();
    }
    Child client(program('a', p.client + " " + p.server_ip), dir + "/client.log");
    const int client_rc = client.wait(120s);
    const int server_rc = server.wait(60s);
    bed_.stop_captures();
    const std::string out = client.output();
    EXPECT_EQ(client_rc, 0) << "client:\n" << out << "\nserver:\n" << server.output();
    EXPECT_EQ(server_rc, 0) << "server:\n" << server.output();
    EXPECT_TRUE(std::regex_search(out, std::regex(p.expect)))
        << "the client did not report a result matching " << p.expect << ":\n"
        << out;
    // The two ends at once: each check runs tshark, and the test has the
    // machine to itself (RUN_SERIAL).
    auto b = std::async(std::launch::async, [&] { return check_capture(dir + "/b.pcap", p.ipv6); });
    const std::size_t roce = check_capture(dir + "/a.pcap", p.ipv6) + b.get();
    if (!both_af_xdp_) {
      EXPECT_GT(roce, 0u) << "no RoCEv2 frame on the link";
    }
    if (!attached_) {
      for (char host : {'a', 'b'}) check_counters(host);
      // A one-way transfer (UC, UD) has RoCE arriving at one end only.
      EXPECT_GT(bed_.counters('a')["engine.rx_roce"] + bed_.counters('b')["engine.rx_roce"], 0u);
    }
  }

  // Every RoCEv2 frame on the link parses (ICRC included) and is of the
  // family the GID says; the programs' TCP is on the same link; and no
  // ICMP port unreachable answers RoCE. Returns the RoCEv2 frames.
  std::size_t check_capture(const std::string& pcap, bool ipv6) {
    std::size_t roce = 0;
    std::set<std::string> super;  // frame numbers of super-frames
    const auto frames = test::read_pcap(pcap);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      wire::RocePacket pkt;
      wire::DropReason why = wire::parse_roce_frame(frames[i], pkt);
      if (why == wire::DropReason::kNotIp || why == wire::DropReason::kNotUdp ||
          why == wire::DropReason::kNotRoceV2Port)
        continue;
      // A packet port's UDP GSO super-frame: every packet in it must be
      // RoCEv2 with a correct ICRC.
      if (why != wire::DropReason::kNone && super_frames_) {
        if (const auto segments = test::split_super_frame(frames[i])) {
          super.insert(std::to_string(i + 1));
          roce += segments->size();
          why = wire::parse_roce_frame(segments->front(), pkt);
          EXPECT_EQ(pkt.ipv6, ipv6) << pcap;
          continue;
        }
      }
      ++roce;
      EXPECT_EQ(why, wire::DropReason::kNone)
          << pcap << " frame " << i + 1 << ": " << wire::name(why);
      if (why == wire::DropReason::kNone) {
        EXPECT_EQ(pkt.ipv6, ipv6) << pcap;
      }
    }
    std::size_t tcp = 0;
    const auto decoded = test::tshark_decode(pcap,
                                             {"frame.number", "tcp.port", "icmp.type", "icmp.code",
                                              "icmpv6.type", "icmpv6.code", "_ws.malformed"},
                                             {"infiniband.identify_payload:FALSE"});
    for (const auto& d : decoded) {
      const std::string& n = d.at("frame.number");
      // (tshark reads a super-frame as one packet whose payload runs on.)
      if (super.contains(n)) continue;
      EXPECT_EQ(d.at("_ws.malformed"), "") << pcap << " frame " << n;
      EXPECT_FALSE(d.at("icmp.type") == "3" && d.at("icmp.code") == "3")
          << pcap << " frame " << n << ": ICMP port unreachable";
      EXPECT_FALSE(d.at("icmpv6.type") == "1" && d.at("icmpv6.code") == "4")
          << pcap << " frame " << n << ": ICMPv6 port unreachable";
      if (d.at("tcp.port").find("18515") != std::string::npos) ++tcp;
    }
    EXPECT_GT(tcp, 0u) << pcap << ": the programs' TCP exchange is not on the link";
    return roce;
  }

  // The device answered nothing for the kernel's addresses and was handed
  // only frames it acts on: no TCP, no ping, none of the kernel's own.
  void check_counters(char host) {
    const test::CounterMap c = bed_.counters(host);
    ASSERT_FALSE(c.empty()) << "no counters from " << host;
    EXPECT_EQ(c.at("engine.tx_arp_reply"), 0u) << host;
    EXPECT_EQ(c.at("engine.tx_neighbor_advert"), 0u) << host;
    EXPECT_EQ(c.at("engine.rx_icmp_echo"), 0u) << host;
    EXPECT_EQ(c.at("engine.rx_other"), 0u) << host << ": frames that are not uroce's got in";
    // Peers' MACs are the kernel's to find (its neighbour table).
    EXPECT_EQ(c.at("engine.tx_arp_request"), 0u) << host;
    EXPECT_EQ(c.at("engine.tx_neighbor_solicit"), 0u) << host;
    EXPECT_EQ(c.at("drop.bad_icrc"), 0u) << host;
    // Every QP's work was found by the event that gave it (a doorbell, a
    // packet, a timer), none by the engine's rescan.
    EXPECT_EQ(c.at("engine.tx_sched_rescued"), 0u) << host;
  }

  // Waits up to 20 s for `what` to appear `times` times in c's output.
  static bool saw(const Child& c, const std::string& what, int times = 1) {
    const auto count = [&] {
      const std::string out = c.output();
      int n = 0;
      for (auto at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
      return n;
    };
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (count() < times && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(50ms);
    return count() >= times;
  }

  test::TestbedPair bed_;
  /// Neither end's RoCE is in a capture: XDP takes it before the
  /// kernel's capture taps see it, and AF_XDP's transmit skips them.
  const bool both_af_xdp_;
  /// The link carries a packet port's UDP GSO super-frames.
  const bool super_frames_;
  bool attached_ = false;
  std::unique_ptr<Child> daemons_[2];
};

TEST_F(Netdev, IbvDevinfoShowsTheInterfacesAddressesAsGids) {
  Child c(bed_.over_uroce('a', "ibv_devinfo -v -d uroce0"), bed_.dir() + "/devinfo.log");
  ASSERT_EQ(c.wait(60s), 0) << c.output();
  const std::string out = c.output();
  for (const char* want :
       {R"(state:\s+PORT_ACTIVE)", R"(GID\[\s*0\]:\s+fe80::[0-9a-f:]+, RoCE v2)",
        R"(GID\[\s*1\]:\s+::ffff:10\.78\.0\.1, RoCE v2)", R"(GID\[\s*2\]:\s+fd78::1, RoCE v2)"})
    EXPECT_TRUE(std::regex_search(out, std::regex(want))) << "no " << want << " in\n" << out;
  // GID 0 is the kernel's own link-local address (EUI-64 of the MAC).
  Child ll(in('a', "ip -6 -o addr show dev eth scope link"), bed_.dir() + "/ll.log");
  ASSERT_EQ(ll.wait(10s), 0);
  std::smatch m;
  const std::string addrs = ll.output();
  ASSERT_TRUE(std::regex_search(addrs, m, std::regex(R"(inet6 (fe80::[0-9a-f:]+)/64)"))) << addrs;
  EXPECT_NE(out.find("GID[  0]:\t\t" + m[1].str()), std::string::npos)
      << "GID 0 is not " << m[1] << ":\n"
      << out;
}

// The port follows the interface: `ip link set down` on it is the port's
// error event, up again its active event.
TEST_F(Netdev, TheInterfacesLinkIsThePortsState) {
  Child watch(bed_.over_uroce('a', "stdbuf -oL ibv_asyncwatch -d uroce0", "UROCE_LOG=info"),
              bed_.dir() + "/asyncwatch.log");
  ASSERT_TRUE(saw(watch, "uroce0: opened on")) << watch.output();
  ASSERT_EQ(test::sh(in('a', "ip link set eth down")), 0);
  EXPECT_TRUE(saw(watch, "IBV_EVENT_PORT_ERR")) << watch.output();
  ASSERT_EQ(test::sh(in('a', "ip link set eth up")), 0);
  EXPECT_TRUE(saw(watch, "IBV_EVENT_PORT_ACTIVE")) << watch.output();
  watch.interrupt();
  watch.wait(10s);
}

// The GID table follows the interface's addresses while a program runs:
// `ip addr add` and `ip addr del` are each an IBV_EVENT_GID_CHANGE, the
// program's sysfs tree shows the entry come and go, and an address of
// another interface changes nothing.
TEST_F(Netdev, AnAddressAddedOrRemovedIsAGidChange) {
  // Inside the program's namespace (uroce-run --sysfs), a loop prints GID
  // 3 of the tree for as long as ibv_asyncwatch runs.
  std::string cmd =
      bed_.over_uroce('a',
                      "sh -c 'while kill -0 $$ 2>/dev/null; do echo gid3=$(cat "
                      "/sys/class/infiniband/uroce0/ports/1/gids/3 2>/dev/null); sleep 0.1; done & "
                      "exec stdbuf -oL ibv_asyncwatch -d uroce0'",
                      "UROCE_LOG=info");
  cmd.replace(cmd.find(" -- "), 4, " --sysfs -- ");
  Child watch(cmd, bed_.dir() + "/asyncwatch.log");
  ASSERT_TRUE(saw(watch, "uroce0: opened on")) << watch.output();
  const std::string unset = "gid3=0000:0000:0000:0000:0000:0000:0000:0000";
  const std::string set = "gid3=0000:0000:0000:0000:0000:ffff:0a4e:000b";  // 10.78.0.11
  ASSERT_TRUE(saw(watch, unset)) << watch.output();
  ASSERT_EQ(test::sh(in('a', "ip addr add 10.78.0.11/24 dev eth")), 0);
  EXPECT_TRUE(saw(watch, "IBV_EVENT_GID_CHANGE")) << watch.output();
  EXPECT_TRUE(saw(watch, "the GID table changed, 4 entries")) << watch.output();
  EXPECT_TRUE(saw(watch, set)) << watch.output();
  ASSERT_EQ(test::sh(in('a', "ip addr del 10.78.0.11/24 dev eth")), 0);
  EXPECT_TRUE(saw(watch, "IBV_EVENT_GID_CHANGE", 2)) << watch.output();
  const auto cleared = [&] {
    const std::string out = watch.output();
    const auto at = out.rfind(set);
    return at != std::string::npos && out.find(unset, at) != std::string::npos;
  };
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (!cleared() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(cleared()) << "GID 3 of the tree was not cleared:\n" << watch.output();
  // Another interface's address changes nothing here.
  ASSERT_EQ(test::sh(in('a', "ip addr add 10.79.0.1/32 dev lo")), 0);
  std::this_thread::sleep_for(500ms);
  watch.interrupt();
  watch.wait(10s);
  const std::string out = watch.output();
  int events = 0;
  for (auto at = out.find("IBV_EVENT_GID_CHANGE"); at != std::string::npos;
       at = out.find("IBV_EVENT_GID_CHANGE", at + 1))
    ++events;
  EXPECT_EQ(events, 2) << out;
}

// The programs over each port, at both ends: af_packet (the default);
// af_xdp, whose XDP program takes RoCE off the interface before the
// kernel's stack and passes it everything else (docs/netdev-mode.md); and
// uroce's packet port, its super-frames split at the far end
// (docs/packet-port.md).
class NetdevPrograms : public Netdev, public ::testing::WithParamInterface<std::string> {
 protected:
  NetdevPrograms() : Netdev({GetParam(), GetParam()}) {}
};
INSTANTIATE_TEST_SUITE_P(Port, NetdevPrograms, ::testing::Values("af_packet", "af_xdp", "packet"),
                         [](const auto& info) { return info.param; });

TEST_P(NetdevPrograms, IbWriteBw) { run(perftest("ib_write_bw", "-n 500", kBwLine)); }
TEST_P(NetdevPrograms, IbSendLat) { run(perftest("ib_send_lat", "-n 500", kLatLine)); }
TEST_P(NetdevPrograms, IbSendBwUd) { run(perftest("ib_send_bw", "-c UD -n 500", kBwLine)); }
TEST_P(NetdevPrograms, IbWriteBwUc) { run(perftest("ib_write_bw", "-c UC -n 500", kBwLine)); }
TEST_P(NetdevPrograms, IbWriteBwIpv6) {
  Pair p = perftest("ib_write_bw", "-n 500 -x 2", kBwLine);
  p.ipv6 = true;
  run(p);
}
TEST_P(NetdevPrograms, RcPingpongIpv4Gid) { run(pingpong("ibv_rc_pingpong", 1, "-c")); }
TEST_P(NetdevPrograms, RcPingpongLinkLocalGid) { run(pingpong("ibv_rc_pingpong", 0, "-c")); }
TEST_P(NetdevPrograms, UdPingpong) { run(pingpong("ibv_ud_pingpong", 1, "-c")); }
// The device daemon takes a netdev device too; its programs attach.
TEST_P(NetdevPrograms, ThroughTheDeviceDaemon) {
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  attached_ = true;
  run(perftest("ib_write_bw", "-n 500", kBwLine));
}

// Programs that find the device by the host's address: the connection
// manager's peers are the kernel's addresses. Each server on b, its
// client on a; the client must report `expect`. `tcp_port` is the
// server's own TCP control port; with 0 (none) the client starts once
// the server's connection manager listens, or its REQ would find no
// device (and be resent 6 s later) or no listener (REJ).
class NetdevMiddleware : public Netdev {
 protected:
  std::string run_pair(const std::string& server_cmd, const std::string& client_cmd,
                       unsigned tcp_port, const std::string& expect, bool server_ends = true) {
    const std::string dir = bed_.dir();
    Child server(bed_.over_uroce('b', server_cmd), dir + "/server.log");
    if (tcp_port != 0)
      bed_.wait_for_tcp_listener('b', tcp_port, 30s);
    else
      bed_.wait_for_cm_listener('b', 30s);
    Child client(bed_.over_uroce('a', client_cmd), dir + "/client.log");
    const int client_rc = client.wait(120s);
    const std::string out = client.output();
    EXPECT_EQ(client_rc, 0) << "client:\n" << out << "\nserver:\n" << server.output();
    if (server_ends) {
      EXPECT_EQ(server.wait(30s), 0) << "server:\n" << server.output();
    } else {
      server.interrupt();
      server.wait(10s);
    }
    EXPECT_TRUE(std::regex_search(out, std::regex(expect)))
        << "the client did not report " << expect << ":\n"
        << out;
    return out;
  }
};

TEST_F(NetdevMiddleware, RpingVerifiesItsData) {
  run_pair("rping -s -a 10.78.0.2 -V -C 50", "rping -c -a 10.78.0.2 -V -v -C 50", 0,
           R"(ping data: rdma-ping-49)");
}

// rping has no TCP exchange to fill the kernel's neighbour table first:
// the connection manager's address resolution asks the kernel for b's MAC
// (RTM_NEWNEIGH with NTF_USE), the kernel sends the ARP request, and the
// answer is in its table, where uroce reads it. uroce sends no ARP itself.
TEST_F(NetdevMiddleware, PeersAreFoundThroughTheKernelsNeighbourTable) {
  ASSERT_EQ(test::sh(in('a', "ip neigh flush dev eth")), 0);
  run_pair("rping -s -a 10.78.0.2 -V -C 5", "rping -c -a 10.78.0.2 -V -v -C 5", 0,
           R"(ping data: rdma-ping-4)");
  const test::CounterMap c = bed_.counters('a');
  ASSERT_FALSE(c.empty());
  EXPECT_GE(c.at("engine.kernel_neighbor_solicit"), 1u);
  EXPECT_EQ(c.at("engine.tx_arp_request"), 0u);
  Child mac_b(in('b', "cat /sys/class/net/eth/address"), bed_.dir() + "/mac.log");
  ASSERT_EQ(mac_b.wait(10s), 0);
  std::string mac = mac_b.output();
  mac.erase(mac.find_last_not_of(" \n") + 1);
  Child neigh(in('a', "ip neigh show 10.78.0.2 dev eth"), bed_.dir() + "/neigh.log");
  ASSERT_EQ(neigh.wait(10s), 0);
  EXPECT_NE(neigh.output().find("lladdr " + mac), std::string::npos)
      << "the kernel's table has not b's MAC " << mac << ":\n"
      << neigh.output();
}

// A peer behind a router: a reaches 10.99.0.5 through 10.78.0.2 (b, its
// gateway), and b answers no ARP for 10.99.0.5 from a's subnet
// (arp_ignore 2). uroce sends to the gateway's MAC, as the kernel and rxe
// do (the route's next hop): rping connects, and a's kernel never asked
// for 10.99.0.5 itself.
TEST_F(NetdevMiddleware, APeerBehindARouterIsReachedAtTheRoutersMac) {
  ASSERT_EQ(test::sh(in('b', "ip addr add 10.99.0.5/32 dev eth")), 0);
  ASSERT_EQ(test::sh(in('b', "sysctl -qw net.ipv4.conf.all.arp_ignore=2")), 0);
  ASSERT_EQ(test::sh(in('a', "ip route add 10.99.0.0/24 via 10.78.0.2 dev eth")), 0);
  run_pair("rping -s -a 10.99.0.5 -V -C 5", "rping -c -a 10.99.0.5 -V -v -C 5", 0,
           R"(ping data: rdma-ping-4)");
  Child neigh(in('a', "ip neigh show dev eth"), bed_.dir() + "/neigh.log");
  ASSERT_EQ(neigh.wait(10s), 0);
  EXPECT_EQ(neigh.output().find("10.99.0.5"), std::string::npos) << neigh.output();
  EXPECT_NE(neigh.output().find("10.78.0.2 "), std::string::npos) << neigh.output();
}

// qperf -cm1: its control over TCP to b's address, its QPs connected by
// rdma_cm to the same address. (Its UD tests build their address handle
// from the UD connect request, which rdma_cm fills on InfiniBand only: on
// RoCE they fail on any device.)
TEST_F(NetdevMiddleware, QperfOverTheConnectionManager) {
  const std::string out =
      run_pair("qperf", "qperf -cm1 -t 1 10.78.0.2 rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_lat",
               19765, R"(rc_bw:\s+bw\s+=\s+[0-9.]+ [KMG]B/sec)", false);
  for (const char* want : {R"(rc_lat:\s+latency\s+=\s+[0-9.]+ [mu]?s)",
                           R"(rc_rdma_write_bw:\s+bw\s+=\s+[0-9.]+ [KMG]B/sec)",
                           R"(rc_rdma_read_lat:\s+latency\s+=\s+[0-9.]+ [mu]?s)"})
    EXPECT_TRUE(std::regex_search(out, std::regex(want))) << "no " << want << " in\n" << out;
}

// libfabric's verbs provider: connected endpoints (FI_EP_MSG over rdma_cm)
// and reliable datagrams (ofi_rxm over them), every size, data checked.
TEST_F(NetdevMiddleware, FiPingpongVerbsMsg) {
  run_pair("fi_pingpong -p verbs -e msg -I 100 -c",
           "fi_pingpong -p verbs -e msg -I 100 -c 10.78.0.2", 47592, R"(\n1m\s+100\s+=100\s)");
}
TEST_F(NetdevMiddleware, FiPingpongVerbsRxm) {
  run_pair("fi_pingpong -p 'verbs;ofi_rxm' -e rdm -I 100 -c",
           "fi_pingpong -p 'verbs;ofi_rxm' -e rdm -I 100 -c 10.78.0.2", 47592,
           R"(\n1m\s+100\s+=100\s)");
}

// Two programs of one host, one device: the daemon's. The client's CM
// request goes to the host's own address and the daemon hands it to the
// program that listens (not back to the client's own CM).
TEST_F(NetdevMiddleware, RpingBetweenTwoProgramsOfOneHost) {
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  const std::string dir = bed_.dir();
  Child server(bed_.attached('b', "rping -s -a 10.78.0.2 -V -C 20"), dir + "/server.log");
  // Until the server listens a request is rejected (REJ 8): ask again.
  Child client(bed_.attached('b',
                             "sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do rping -c -a 10.78.0.2 "
                             "-V -v -C 20 && exit 0; sleep 0.5; done; exit 1'"),
               dir + "/client.log");
  EXPECT_EQ(client.wait(60s), 0) << client.output() << "\nserver:\n" << server.output();
  EXPECT_EQ(server.wait(30s), 0) << server.output();
  EXPECT_NE(client.output().find("ping data: rdma-ping-19"), std::string::npos) << client.output();
}

// An address b's interface gains after its daemon started is a GID of the
// device: programs see it, and RDMA to it arrives. Removed, it is gone.
TEST_F(Netdev, TheDaemonTakesAnAddressAddedWhileItRuns) {
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  attached_ = true;
  ASSERT_EQ(test::sh(in('b', "ip addr add 10.78.0.12/24 dev eth")), 0);
  const auto devinfo = [&](const char* name) {
    Child c(bed_.attached('b', "ibv_devinfo -v -d uroce0"), bed_.dir() + "/" + name + ".log");
    EXPECT_EQ(c.wait(60s), 0) << c.output();
    return c.output();
  };
  // GID 3, after the link-local one and the interface's first two.
  const std::string with = devinfo("devinfo-added");
  EXPECT_TRUE(
      std::regex_search(with, std::regex(R"(GID\[\s*3\]:\s+::ffff:10\.78\.0\.12, RoCE v2)")))
      << with;
  Pair p = perftest("ib_write_bw", "-n 500", kBwLine);
  p.server += " -x 3";
  p.server_ip = "10.78.0.12";
  run(p);
  std::size_t to_new = 0;
  for (const auto& frame : test::read_pcap(bed_.dir() + "/b.pcap")) {
    wire::RocePacket pkt;
    if (wire::parse_roce_frame(frame, pkt) == wire::DropReason::kNone &&
        pkt.dst_ip == *wire::IpAddr::parse("10.78.0.12"))
      ++to_new;
  }
  EXPECT_GT(to_new, 0u) << "no RoCE to the new address";
  ASSERT_EQ(test::sh(in('b', "ip addr del 10.78.0.12/24 dev eth")), 0);
  std::this_thread::sleep_for(300ms);
  const std::string without = devinfo("devinfo-removed");
  EXPECT_EQ(without.find("10.78.0.12"), std::string::npos) << without;
}

class NetdevAfXdp : public Netdev {
 protected:
  NetdevAfXdp() : Netdev({"af_xdp", "af_xdp"}) {}
};

// The program is taken off the interface when the port closes, and one
// that a killed program left is taken off by the next: the interface's
// XDP hook is free again either way.
TEST_F(NetdevAfXdp, TheXdpProgramGoesWithTheProgram) {
  const auto attached = [&] {
    Child c(in('a', "ip link show dev eth"), bed_.dir() + "/link.log");
    c.wait(10s);
    return c.output().find("prog/xdp") != std::string::npos;
  };
  Child server(program('a', "ib_write_bw -d uroce0"), bed_.dir() + "/server.log");
  bed_.wait_for_tcp_listener('a', 18515, 30s);
  EXPECT_TRUE(attached()) << "no XDP program on the interface while the port is open";
  // A second program cannot take the interface from the first.
  Child second(program('a', "ibv_devinfo -d uroce0"), bed_.dir() + "/second.log");
  EXPECT_NE(second.wait(60s), 0);
  EXPECT_NE(second.output().find("another uroce program has an af_xdp port on eth"),
            std::string::npos)
      << second.output();
  ASSERT_EQ(test::sh("ip netns pids " + bed_.ns('a') + " | xargs -r kill -KILL"), 0);
  server.wait(10s);
  EXPECT_TRUE(attached()) << "a killed program cannot take its XDP program off";
  Child next(program('a', "ibv_devinfo -d uroce0"), bed_.dir() + "/next.log");
  EXPECT_EQ(next.wait(60s), 0) << next.output();
  EXPECT_NE(next.output().find("PORT_ACTIVE"), std::string::npos) << next.output();
  EXPECT_FALSE(attached()) << "the XDP program outlived the program that closed its port";
}

// af_xdp towards af_packet: b's capture sees what a's AF_XDP socket sent,
// and every RoCE frame of it parses with a correct ICRC and decodes in
// tshark (check_capture).
class NetdevAfXdpToAfPacket : public Netdev {
 protected:
  NetdevAfXdpToAfPacket() : Netdev({"af_xdp", ""}) {}
};

TEST_F(NetdevAfXdpToAfPacket, IbWriteBw) { run(perftest("ib_write_bw", "-n 500", kBwLine)); }
TEST_F(NetdevAfXdpToAfPacket, RcPingpongIpv6) { run(pingpong("ibv_rc_pingpong", 2, "-c")); }

// Ten million frames through af_xdp in one run, path MTU 2048 on a veth
// of MTU 3000: every WRITE completes, the ethdev lost nothing, and the
// pool is as full at the end as when the port opened (the PMD's fill
// ring keeps 2048 mbufs; a leak would keep more). With hugepages and with
// --no-huge.
class NetdevAfXdpLongRun : public Netdev {
 protected:
  NetdevAfXdpLongRun() : Netdev({"af_xdp", "af_xdp"}, 3000) {}

  void ten_million_frames(const std::string& uroce_run_option) {
    // 312,500 WRITEs of 64 KiB in 2048-byte packets.
    const std::string args = "-s 65536 -n 312500 --report_gbits";
    Pair p = perftest("ib_write_bw", args, kBwLine);
    const auto with_option = [&](char host, const std::string& cmd) {
      std::string c = bed_.over_uroce(host, cmd);
      if (!uroce_run_option.empty()) c.replace(c.find(" -- "), 4, " " + uroce_run_option + " -- ");
      return c;
    };
    const std::string dir = bed_.dir();
    Child server(with_option('b', p.server), dir + "/server.log");
    bed_.wait_for_tcp_listener('b', 18515, 30s);
    Child client(with_option('a', p.client + " " + p.server_ip), dir + "/client.log");
    ASSERT_EQ(client.wait(170s), 0) << client.output() << "\nserver:\n" << server.output();
    ASSERT_EQ(server.wait(30s), 0) << server.output();
    EXPECT_TRUE(std::regex_search(client.output(), std::regex(kBwLine))) << client.output();
    const test::CounterMap a = bed_.counters('a'), b = bed_.counters('b');
    EXPECT_GE(a.at("engine.tx_frames"), 10'000'000u);
    EXPECT_GE(b.at("engine.rx_frames"), 10'000'000u);
    // A frame the kernel dropped at a full AF_XDP ring (nic.imissed) is
    // recovered by the requester's timer when nothing follows it; that is
    // the load of the machine, not a stall. A timeout with no frame lost is.
    const auto missed = [](const test::CounterMap& c) {
      const auto it = c.find("nic.imissed");
      return it == c.end() ? 0 : it->second;
    };
    const bool lost = missed(a) + missed(b) > 0;
    for (const auto* c : {&a, &b}) {
      // (nic.oerrors may move: frames the full ring refused, which the
      // engine sends again.)
      EXPECT_EQ(c->at("nic.rx_nombuf"), 0u);
      if (!lost) {
        EXPECT_EQ(c->at("port.local_ack_timeout_err"), 0u)
            << "a stall: the requester timed out and no frame was lost";
      }
      EXPECT_LE(c->at("nic.mbufs") - c->at("nic.mbufs_free"), 2048u + 64u)
          << "mbufs that never came back";
    }
    std::printf("10M frames: %s\n", client.output().substr(client.output().rfind("65536")).c_str());
  }
};

TEST_F(NetdevAfXdpLongRun, TenMillionFramesWithoutHugepages) { ten_million_frames(""); }
TEST_F(NetdevAfXdpLongRun, TenMillionFramesOnHugepages) {
  test::Hugepages huge(1100);
  ASSERT_GE(huge.pages(), 1024) << "could not allocate hugepages";
  ten_million_frames("--hugepages");
}

// The port's MTU follows the interface's (up to what the port opened
// with): the daemon's device tells programs that attach after
// `ip link set eth mtu 1000` an active MTU of 512, and their RDMA goes in
// frames that fit; back at 1500, 1024 again.
TEST_F(Netdev, TheMtuFollowsTheInterface) {
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  attached_ = true;
  const auto active_mtu = [&](const char* name) {
    Child c(bed_.attached('b', "ibv_devinfo -d uroce0"), bed_.dir() + "/" + name + ".log");
    EXPECT_EQ(c.wait(60s), 0) << c.output();
    std::smatch m;
    const std::string out = c.output();
    return std::regex_search(out, m, std::regex(R"(active_mtu:\s+(\d+))")) ? m[1].str() : out;
  };
  EXPECT_EQ(active_mtu("devinfo-1500"), "1024");
  for (char host : {'a', 'b'}) ASSERT_EQ(test::sh(in(host, "ip link set eth mtu 1000")), 0);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(active_mtu("devinfo-1000"), "512");
  run(perftest("ib_write_bw", "-n 200", kBwLine));
  for (const auto& frame : test::read_pcap(bed_.dir() + "/b.pcap"))
    EXPECT_LE(frame.size(), 1000u + 14) << "a frame larger than the link's MTU";
  for (char host : {'a', 'b'}) ASSERT_EQ(test::sh(in(host, "ip link set eth mtu 1500")), 0);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(active_mtu("devinfo-back"), "1024");
}

// uroce link, as rdma link: a running daemon is given a netdev device on a
// second interface of each host (eth2, 10.79.0.0/24), shows it, serves it
// (ib_write_bw between the hosts over it), refuses to delete it while a
// program is attached, and deletes it; added again, it serves again.
TEST_F(Netdev, UroceLinkAddsShowsAndDeletesADaemonsDevice) {
  ASSERT_EQ(test::sh("ip link add eth2 netns " + bed_.ns('a') + " type veth peer name eth2 netns " +
                     bed_.ns('b')),
            0);
  for (char host : {'a', 'b'}) {
    const std::string n = host == 'a' ? "1" : "2";
    ASSERT_EQ(test::sh(in(host, "ip link set eth2 up")), 0);
    ASSERT_EQ(test::sh(in(host, "ip addr add 10.79.0." + n + "/24 dev eth2")), 0);
  }
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  attached_ = true;
  const auto link = [&](char host, const std::string& args, const char* log) {
    Child c(in(host, std::string(UROCE_BIN_DIR) + "/uroce --socket " + bed_.daemon_socket(host) +
                         " link " + args),
            bed_.dir() + "/" + log + "-" + host + ".log");
    const int rc = c.wait(60s);
    return std::make_pair(rc, c.output());
  };
  for (char host : {'a', 'b'}) {
    const auto [rc, out] = link(host, "add uroce1 netdev eth2 port af_xdp", "add");
    ASSERT_EQ(rc, 0) << out;
  }
  const auto [show_rc, shown] = link('b', "show", "show");
  EXPECT_EQ(show_rc, 0) << shown;
  for (const char* want :
       {R"(link uroce0/1 state ACTIVE physical_state LINK_UP netdev eth\n)",
        R"(link uroce1/1 state ACTIVE physical_state LINK_UP netdev eth2\n)",
        R"(port net_af_xdp_uroce1,iface=eth2 mtu 1500 programs 0)", R"(gids 10\.79\.0\.2\n)"})
    EXPECT_TRUE(std::regex_search(shown, std::regex(want))) << "no " << want << " in\n" << shown;
  // A name taken, an interface that is not there: refused, nothing added.
  EXPECT_NE(link('b', "add uroce1 netdev eth2", "again").first, 0);
  const auto [none_rc, none] = link('b', "add uroce2 netdev nosuch0", "nosuch");
  EXPECT_NE(none_rc, 0);
  EXPECT_NE(none.find("'nosuch0' is no interface"), std::string::npos) << none;
  // A port string of the caller's (vdev arguments load XDP programs) is
  // the daemon's to choose, and a user who is not root adds nothing.
  const auto [vdev_rc, vdev] =
      link('b', "add uroce2 netdev eth2 port net_af_xdp_x,iface=eth2,xdp_prog=/e.o", "vdev");
  EXPECT_NE(vdev_rc, 0);
  EXPECT_NE(vdev.find("port af_packet, af_xdp or packet only"), std::string::npos) << vdev;
  ASSERT_EQ(test::sh("chmod o+x " + bed_.dir()), 0);
  Child nobody(
      in('b', "setpriv --reuid=65534 --regid=65534 --clear-groups " + std::string(UROCE_BIN_DIR) +
                  "/uroce --socket " + bed_.daemon_socket('b') + " link add uroce2 netdev eth2"),
      bed_.dir() + "/nobody.log");
  EXPECT_NE(nobody.wait(30s), 0);
  EXPECT_NE(nobody.output().find("is root's"), std::string::npos) << nobody.output();

  // Programs find the device and move data over it.
  Pair p = perftest("ib_write_bw", "-n 300", kBwLine);
  p.server = "ib_write_bw -d uroce1 -n 300";
  p.client = "ib_write_bw -d uroce1 -n 300";
  p.server_ip = "10.79.0.2";
  const std::string dir = bed_.dir();
  Child server(program('b', p.server), dir + "/server.log");
  bed_.wait_for_tcp_listener('b', 18515, 30s);
  const auto [busy_rc, busy] = link('b', "delete uroce1", "busy");
  EXPECT_NE(busy_rc, 0);
  EXPECT_NE(busy.find("program(s) attached"), std::string::npos) << busy;
  Child client(program('a', p.client + " " + p.server_ip), dir + "/client.log");
  EXPECT_EQ(client.wait(120s), 0) << client.output() << "\nserver:\n" << server.output();
  EXPECT_EQ(server.wait(60s), 0) << server.output();
  EXPECT_TRUE(std::regex_search(client.output(), std::regex(kBwLine))) << client.output();

  for (char host : {'a', 'b'}) {
    const auto [rc, out] = link(host, "delete uroce1", "delete");
    EXPECT_EQ(rc, 0) << out;
  }
  const auto [after_rc, after] = link('b', "show", "show-after");
  EXPECT_EQ(after.find("uroce1"), std::string::npos) << after;
  Child list(bed_.attached('b', "ibv_devices"), dir + "/devices.log");
  EXPECT_EQ(list.wait(60s), 0);
  EXPECT_EQ(list.output().find("uroce1"), std::string::npos) << list.output();
  // The interface's XDP hook is free again, and the device can come back.
  Child hook(in('b', "ip link show dev eth2"), dir + "/hook.log");
  hook.wait(10s);
  EXPECT_EQ(hook.output().find("prog/xdp"), std::string::npos) << hook.output();
  EXPECT_EQ(link('b', "add uroce1 netdev eth2 port af_xdp", "readd").first, 0);
  EXPECT_NE(link('b', "show uroce1", "show-readd").second.find("link uroce1/1"), std::string::npos);
}

}  // namespace
}  // namespace uroce
