/* SPDX-License-Identifier: BSD-3-Clause */
// `uroce-run --sysfs`: the program's own /sys/class/infiniband, as the
// kernel presents an RDMA device, for the tools that read sysfs rather
// than libibverbs. Unmodified Debian binaries in a testbed namespace:
// ibstat (libibumad reads the tree alone) shows what ibv_devinfo (the
// verbs) shows; the tree's GID table is ibv_query_gid's, entry by entry;
// and nothing of it is seen outside the program's namespace. Needs root.

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
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

TEST_F(Sysfs, TheTreeIsTheProgramsAlone) {
  // Inside: there. Without --sysfs, and in the namespace around it once
  // it ended: not.
  EXPECT_NE(run("ls /sys/class/infiniband\n").find("uroce0"), std::string::npos);
  EXPECT_EQ(run("ls /sys/class/infiniband 2>&1; true\n", false).find("uroce0"), std::string::npos);
  EXPECT_NE(test::sh("ip netns exec " + bed_.ns('a') + " test -e /sys/class/infiniband/uroce0"), 0);
  // The classes the tree was laid over are all still there.
  EXPECT_NE(run("ls /sys/class/net\n").find("rdma"), std::string::npos);
}

}  // namespace
}  // namespace uroce
