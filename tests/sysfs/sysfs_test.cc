/* SPDX-License-Identifier: BSD-3-Clause */
// `uroce-run --sysfs`: the program's own /sys/class/infiniband, as the
// kernel presents an RDMA device, for the tools that read sysfs rather
// than libibverbs. Unmodified Debian binaries in a testbed namespace:
// ibstat (libibumad reads the tree alone) shows what ibv_devinfo (the
// verbs) shows; the tree's GID table is ibv_query_gid's, entry by entry;
// nothing of it is seen outside the program's namespace; and a user other
// than root gets it too (in a user namespace). Needs root to build the
// testbed.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "support/child.h"
#include "support/testbed_pair.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;

class Sysfs : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override { bed_.down(); }

  // `script` (sh) on host a under uroce-run, with --sysfs or without.
  std::string run(const std::string& script, bool sysfs = true) {
    const std::string path = bed_.dir() + "/script.sh";
    {
      std::FILE* f = std::fopen(path.c_str(), "w");
      std::fputs(script.c_str(), f);
      std::fclose(f);
    }
    std::string cmd = bed_.over_uroce('a', "sh " + path);
    if (sysfs) cmd.replace(cmd.find(" -- sh "), 7, " --sysfs -- sh ");
    Child c(cmd, bed_.dir() + "/run.log");
    EXPECT_EQ(c.wait(60s), 0) << c.output();
    return c.output();
  }

  // A GID in either text form, as 16 bytes.
  static std::string gid_bytes(const std::string& text) {
    in6_addr a{};
    if (inet_pton(AF_INET6, text.c_str(), &a) != 1) return "bad:" + text;
    return std::string(reinterpret_cast<const char*>(a.s6_addr), 16);
  }

  test::TestbedPair bed_{{.tag = "sy", .ipv6 = true}};
};

TEST_F(Sysfs, IbstatShowsTheDeviceAsTheVerbsDo) {
  const std::string out = run("ibstat\necho ===\nibv_devinfo -v\n");
  EXPECT_NE(out.find("CA 'uroce0'"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("State: Active"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("Physical state: LinkUp"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("Link layer: Ethernet"))) << out;
  // ibstat's Node GUID (0x...) is ibv_devinfo's node_guid (xxxx:xxxx:...).
  std::smatch ibstat, devinfo;
  ASSERT_TRUE(std::regex_search(out, ibstat, std::regex("Node GUID: 0x([0-9a-f]{16})"))) << out;
  ASSERT_TRUE(std::regex_search(
      out, devinfo,
      std::regex("node_guid:\\s+([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4})")))
      << out;
  EXPECT_EQ(ibstat[1].str(),
            devinfo[1].str() + devinfo[2].str() + devinfo[3].str() + devinfo[4].str());
}

TEST_F(Sysfs, TheTreesGidTableIsTheVerbsOne) {
  const std::string out = run(
      "p=/sys/class/infiniband/uroce0/ports/1\n"
      "for i in $(seq 0 15); do\n"
      "  echo \"tree $i $(cat $p/gids/$i) $(cat $p/gid_attrs/types/$i 2>/dev/null | tr ' ' _)\"\n"
      "done\n"
      "echo \"state $(cat $p/state | tr ' ' _) $(cat $p/link_layer)\"\n"
      "ibv_devinfo -v\n");
  // GID[  i]: address, RoCE v2 (ibv_devinfo lists the entries that are set).
  std::map<int, std::string> verbs;
  const std::regex gid_line("GID\\[\\s*(\\d+)\\]:\\s+([0-9a-f:.]+), RoCE v2");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), gid_line);
       it != std::sregex_iterator(); ++it)
    verbs[std::stoi((*it)[1])] = gid_bytes((*it)[2]);
  ASSERT_GE(verbs.size(), 3u) << "fe80::, 10.77.0.1 and fd77::1:\n" << out;
  std::istringstream lines(out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string tag, gid, type;
    int i = -1;
    if (!(w >> tag) || tag != "tree" || !(w >> i >> gid)) continue;
    w >> type;
    ++rows;
    if (verbs.count(i)) {
      EXPECT_EQ(gid_bytes(gid), verbs[i]) << "GID " << i << ":\n" << out;
      EXPECT_EQ(type, "RoCE_v2") << "GID " << i;
    } else {
      EXPECT_EQ(gid_bytes(gid), std::string(16, '\0')) << "GID " << i << " is not set";
      EXPECT_EQ(type, "") << "an unset GID " << i << " has no type";
    }
  }
  EXPECT_EQ(rows, 16) << out;
  EXPECT_NE(out.find("state 4:_ACTIVE Ethernet"), std::string::npos) << out;
}

// The tree's counters are what the program did: 200 pingpong iterations
// of 4 KiB (4 packets at MTU 1024) each way. hw_counters/ has the
// transport's under rxe's names, counters/ the port's as a PMA reports
// them, and Prometheus' node_exporter (its infiniband collector, run in
// the program's namespace) exports both the port counters and the device
// (ibv_devinfo -v shows the board id it reports).
TEST_F(Sysfs, TheTreesCountersAreWhatTheProgramDid) {
  Child server(bed_.over_uroce('b', "ibv_rc_pingpong -d uroce0 -g 1 -n 200"),
               bed_.dir() + "/server.log");
  bed_.wait_for_tcp_listener('b', 18515, 30s);
  const std::string metrics = bed_.dir() + "/metrics";
  const std::string out =
      run("ibv_rc_pingpong -d uroce0 -g 1 -n 200 192.168.77.2 || exit 1\n"
          "p=/sys/class/infiniband/uroce0/ports/1\n"
          "for f in hw_counters/sent_pkts hw_counters/rcvd_pkts hw_counters/rdma_sends "
          "hw_counters/rdma_recvs hw_counters/retry_exceeded_err hw_counters/lifespan "
          "counters/port_xmit_data counters/port_rcv_packets counters/symbol_error; do\n"
          "  echo \"counter $f $(cat $p/$f)\"\n"
          "done\n"
          "ibv_devinfo -v | grep board_id\n"
          "prometheus-node-exporter --web.listen-address=127.0.0.1:9100 "
          "--collector.disable-defaults --collector.infiniband >/dev/null 2>&1 &\n"
          "/usr/bin/python3 -c \"\n"
          "import time, urllib.request\n"
          "for _ in range(100):\n"
          "    try:\n"
          "        open('" +
          metrics +
          "', 'wb').write(\n"
          "            urllib.request.urlopen('http://127.0.0.1:9100/metrics').read())\n"
          "        break\n"
          "    except OSError:\n"
          "        time.sleep(0.1)\n"
          "\"\n"
          "kill $!\n");
  EXPECT_EQ(server.wait(30s), 0) << server.output();
  std::map<std::string, long> c;
  const std::regex line("counter ([\\w/]+) (\\d+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it)
    c[(*it)[1]] = std::stol((*it)[2]);
  ASSERT_EQ(c.size(), 9u) << out;
  EXPECT_GE(c["hw_counters/rdma_sends"], 200) << out;
  EXPECT_GE(c["hw_counters/rdma_recvs"], 200) << out;
  EXPECT_GE(c["hw_counters/sent_pkts"], 800) << out;
  EXPECT_GE(c["hw_counters/rcvd_pkts"], 800) << out;
  EXPECT_EQ(c["hw_counters/retry_exceeded_err"], 0) << out;
  EXPECT_EQ(c["hw_counters/lifespan"], 10) << out;
  EXPECT_GE(c["counters/port_xmit_data"], 200 * 4096 / 4) << out;  // 32-bit words
  EXPECT_GE(c["counters/port_rcv_packets"], 800) << out;
  EXPECT_EQ(c["counters/symbol_error"], 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("board_id:\\s+uroce-"))) << out;

  std::ifstream f(metrics);
  const std::string m((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(m.find("node_scrape_collector_success{collector=\"infiniband\"} 1"), std::string::npos)
      << m;
  EXPECT_TRUE(std::regex_search(m, std::regex("node_infiniband_info\\{board_id=\"uroce-[^\"]+\","
                                              "device=\"uroce0\",firmware_version=\"uroce ")))
      << m;
  std::smatch bytes;
  ASSERT_TRUE(std::regex_search(
      m, bytes,
      std::regex("node_infiniband_port_data_transmitted_bytes_total\\{device=\"uroce0\","
                 "port=\"1\"\\} (\\d+)")))
      << m;
  EXPECT_EQ(std::stol(bytes[1]), 4 * c["counters/port_xmit_data"]) << m;
}

TEST_F(Sysfs, TheTreeIsTheProgramsAlone) {
  // Inside: there. Without --sysfs, and in the namespace around it once
  // it ended: not.
  EXPECT_NE(run("ls /sys/class/infiniband\n").find("uroce0"), std::string::npos);
  EXPECT_EQ(run("ls /sys/class/infiniband 2>&1; true\n", false).find("uroce0"), std::string::npos);
  EXPECT_NE(test::sh("ip netns exec " + bed_.ns('a') + " test -e /sys/class/infiniband/uroce0"), 0);
  // The classes the tree was laid over are all still there.
  EXPECT_NE(run("ls /sys/class/net\n").find("rdma"), std::string::npos);
}

// A program that forks while a thread of it opens and closes its device
// (each close rewrites the counters' files), and children that open the
// device themselves, as Python's multiprocessing does in rdma-core's
// tests: no child may inherit a lock taken and hang on it. A device
// daemon's child attaches anew and uses the device; the child of a
// program with an in-process device is refused it at once (ENODEV): the
// port and the engine are the parent's.
TEST_F(Sysfs, AChildOfAProgramWithItsOwnDeviceIsRefusedItAtOnce) {
  const std::string out = run(std::string(UROCE_FORK_WITH_DEVICE) + " uroce0 200 refused\n");
  EXPECT_NE(out.find("ok\n"), std::string::npos) << out;
  EXPECT_NE(out.find("uroce0 is the parent process's"), std::string::npos) << out;
}

TEST_F(Sysfs, ADaemonsProgramThatForksWithItsDeviceBusyHasChildrenThatUseIt) {
  std::unique_ptr<Child> daemon = bed_.start_daemon('a');
  ASSERT_TRUE(daemon) << "uroced did not come up";
  std::string cmd = bed_.attached_run('a', std::string(UROCE_FORK_WITH_DEVICE) + " uroce0 50");
  cmd.replace(cmd.find(" -- "), 4, " --sysfs -- ");
  Child c("ip netns exec " + bed_.ns('a') + " " + cmd, bed_.dir() + "/fork.log");
  EXPECT_EQ(c.wait(120s), 0) << c.output();
  EXPECT_NE(c.output().find("ok\n"), std::string::npos) << c.output();
  EXPECT_TRUE(test::TestbedPair::stop_daemon(daemon));
}

TEST_F(Sysfs, AUserOtherThanRootGetsTheTreeToo) {
  // The device is root's daemon's; the program runs as user 4242 (not the
  // kernel's overflow id, which an unmapped user would read as), whom the
  // kernel refuses a mount namespace alone, so uroce-run makes it a user
  // namespace around one.
  std::unique_ptr<Child> daemon = bed_.start_daemon('a');
  ASSERT_TRUE(daemon) << "uroced did not come up";
  ASSERT_EQ(chmod(bed_.dir().c_str(), 0777), 0);
  const std::string script = bed_.dir() + "/nobody.sh";
  {
    std::ofstream f(script);
    f << "id -u; id -g\ngrep CapEff /proc/self/status\nibstat\necho ===\n"
         "cat /sys/class/infiniband/uroce0/ports/1/gid_attrs/types/0\n"
         "ibv_devinfo -d uroce0 | grep -c PORT_ACTIVE\n";
  }
  std::string cmd = bed_.attached_run('a', "sh " + script);
  cmd.replace(cmd.find(" -- sh "), 7, " --sysfs -- sh ");
  Child c(
      "ip netns exec " + bed_.ns('a') + " setpriv --reuid=4242 --regid=4242 --clear-groups " + cmd,
      bed_.dir() + "/nobody.log");
  ASSERT_EQ(c.wait(60s), 0) << c.output();
  const std::string out = c.output();
  // Expect: still user 4242, with no capability left to the program, and
  // the device in the tree as root's programs see it.
  EXPECT_EQ(out.rfind("4242\n4242\n", 0), 0u) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("CA 'uroce0'"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("State: Active"))) << out;
  EXPECT_NE(out.find("===\nRoCE v2\n1\n"), std::string::npos) << out;
  EXPECT_TRUE(test::TestbedPair::stop_daemon(daemon));
}

}  // namespace
}  // namespace uroce
