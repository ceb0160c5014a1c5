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
#include <thread>

#include "support/child.h"
#include "support/stats_lines.h"
#include "support/tshark.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::sh;
using test::slurp;

constexpr int kIters = 1000;

class Ucx : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = "uu" + std::to_string(getpid() % 100000) + "-";
    ASSERT_EQ(sh(std::string(UROCE_SCRIPTS_DIR) + "/testbed.sh up " + prefix_), 0)
        << "cannot build the testbed";
  }
  void TearDown() override { sh(std::string(UROCE_SCRIPTS_DIR) + "/testbed.sh down " + prefix_); }

  std::string dir() const { return tmp_.path(); }
  std::string ns(char host) const { return prefix_ + host; }

  // The program under uroce-run on `host` (10.77.0.1 on a, .2 on b), its
  // counters to <dir>/<host>.stats at exit.
  std::string over_uroce(char host, const std::string& program, const std::string& env = "") const {
    const std::string h(1, host);
    return "ip netns exec " + ns(host) + " env " + env + " UROCE_STATS_FILE=" + dir() + "/" + h +
           ".stats " + std::string(UROCE_BIN_DIR) +
           "/uroce-run --port net_af_packet0,iface=rdma --ip " +
           (host == 'a' ? "10.77.0.1/24" : "10.77.0.2/24") + " -- " + program;
  }

  test::CounterMap counters(char host) const {
    return test::stats_lines(slurp(dir() + "/" + std::string(1, host) + ".stats"), "uroce0");
  }

  // ucx_perftest's server on b until it listens on its TCP port, then its
  // client on a (connecting over ctl); both must succeed. Returns the
  // client's output.
  std::string perftest(const std::string& args, const std::string& env = "") {
    Child server(over_uroce('b', "ucx_perftest " + args, env), dir() + "/server.log");
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (sh("ip netns exec " + ns('b') + " ss -ltnH 'sport = :13337' | grep -q LISTEN") != 0 &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(50ms);
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

  std::string prefix_;
  test::TempDir tmp_;
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

}  // namespace
}  // namespace uroce
