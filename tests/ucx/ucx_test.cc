/* SPDX-License-Identifier: BSD-3-Clause */
// UCX 1.13, unmodified, from Debian's packages (ucx-utils) over uroce
// between two hosts: the network namespaces of scripts/testbed.sh, uroce
// on the "rdma" veth through net_af_packet. No UCX variable is set: UCX
// must find uroce0 by itself (its /dev/infiniband node, its port) and
// its UD transport must accept uroce's datagrams (wc.sl as mlx5 gives
// it). ucx_perftest exchanges its setup over TCP on the ctl link; the
// data goes over uroce, as the device's counters show. Needs root.

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "support/child.h"
#include "support/stats_lines.h"
#include "support/testbed_pair.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::slurp;

constexpr int kIters = 1000;

class Ucx : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override { bed_.down(); }

  std::string dir() const { return bed_.dir(); }

  // The program under uroce-run on `host` (10.77.0.1 on a, .2 on b), its
  // counters to <dir>/<host>.stats at exit.
  std::string over_uroce(char host, const std::string& program, const std::string& env = "") const {
    return bed_.over_uroce(host, program, env);
  }

  test::CounterMap counters(char host) const { return bed_.counters(host); }

  // ucx_perftest's server on b until it listens on its TCP port, then its
  // client on a (connecting over ctl); both must succeed. Returns the
  // client's output.
  std::string perftest(const std::string& args, const std::string& env = "") {
    Child server(over_uroce('b', "ucx_perftest " + args, env), dir() + "/server.log");
    bed_.wait_for_tcp_listener('b', 13337, 20s);
    Child client(over_uroce('a', "ucx_perftest 192.168.77.2 " + args, env), dir() + "/client.log");
    const int client_rc = client.wait(60s);
    const int server_rc = server.wait(20s);
    const std::string out = client.output();
    EXPECT_EQ(client_rc, 0) << "client:\n" << out << "\nserver:\n" << server.output();
    EXPECT_EQ(server_rc, 0) << "server:\n" << server.output();
    // The final line: "Final: <iterations> <latency...>".
    EXPECT_TRUE(std::regex_search(out, std::regex("Final:\\s+" + std::to_string(kIters) + "\\s")))
        << "not " << kIters << " iterations:\n"
        << out;
    return out;
  }

  // Both devices moved at least `packets` RoCE packets each way.
  void expect_traffic(unsigned long long packets) {
    const auto a = counters('a');
    const auto b = counters('b');
    EXPECT_GE(test::sum_matching(a, "sent_pkts"), packets) << slurp(dir() + "/a.stats");
    EXPECT_GE(test::sum_matching(b, "sent_pkts"), packets) << slurp(dir() + "/b.stats");
    EXPECT_GE(test::sum_matching(a, "rcvd_pkts"), packets) << slurp(dir() + "/a.stats");
    EXPECT_GE(test::sum_matching(b, "rcvd_pkts"), packets) << slurp(dir() + "/b.stats");
  }

  test::TestbedPair bed_{{.tag = "uu", .ipv6 = false, .stats_file = true}};
};

TEST_F(Ucx, InfoListsUroce0WithRcAndUdVerbsOnItsPort) {
  Child info(over_uroce('a', "ucx_info -d"), dir() + "/info.log");
  ASSERT_EQ(info.wait(60s), 0) << info.output();
  const std::string out = info.output();
  EXPECT_TRUE(std::regex_search(out, std::regex("Memory domain: uroce0\\b"))) << out;
  for (const char* tl : {"rc_verbs", "ud_verbs"}) {
    EXPECT_TRUE(std::regex_search(
        out, std::regex(std::string("Transport: ") + tl + "\\s+#\\s+Device: uroce0:1\\b")))
        << tl << " on uroce0:1:\n"
        << out;
  }
}

TEST_F(Ucx, PerftestActiveMessageLatencyOverUdVerbs) {
  perftest("-t am_lat -x ud_verbs -d uroce0:1 -n " + std::to_string(kIters) + " -w 100");
  expect_traffic(kIters);
}

TEST_F(Ucx, PerftestPutBandwidthOverRcVerbs) {
  perftest("-t put_bw -x rc_verbs -d uroce0:1 -D zcopy -s 65536 -n " + std::to_string(kIters) +
           " -w 100");
  // 64 KiB in MTU-sized packets (1024 on a 1500 veth): each put is 64 of them.
  const auto a = counters('a');
  EXPECT_GE(test::sum_matching(a, "sent_pkts"), 64ull * kIters) << slurp(dir() + "/a.stats");
  EXPECT_GE(test::sum_matching(counters('b'), "rcvd_pkts"), 64ull * kIters);
}

// UCP over RC with UD as its wireup transport, as an MPI would use it.
TEST_F(Ucx, PerftestUcpTagLatencyOverRcAndUdVerbs) {
  perftest("-t tag_lat -n " + std::to_string(kIters) + " -w 100", "UCX_TLS=rc_verbs,ud_verbs,self");
  expect_traffic(kIters);
}

TEST_F(Ucx, PerftestUcpTagBandwidthOverRcAndUdVerbs) {
  perftest("-t tag_bw -s 65536 -n " + std::to_string(kIters) + " -w 100",
           "UCX_TLS=rc_verbs,ud_verbs,self");
  // 64 KiB messages, eager or rendezvous (the receiver READs them): either
  // way the sender's device sends each in 64 packets of 1024 bytes.
  EXPECT_GE(test::sum_matching(counters('a'), "sent_pkts"), 64ull * kIters)
      << slurp(dir() + "/a.stats");
  EXPECT_GE(test::sum_matching(counters('b'), "rcvd_pkts"), 64ull * kIters)
      << slurp(dir() + "/b.stats");
}

}  // namespace
}  // namespace uroce
