/* SPDX-License-Identifier: BSD-3-Clause */
// Open MPI 4.1 from Debian's packages (openmpi-bin), unmodified, over UCX
// over uroce between two hosts: the network namespaces of
// scripts/testbed.sh. mpirun starts in host a and reaches host b through
// its launch agent (ip netns exec in place of ssh); its own traffic
// (the launch, the runtime's wire-up) goes over TCP on the ctl link, the
// job's messages through pml ucx over uroce, as the devices' counters
// show. mpi_check (tests/mpi/mpi_check.c) checks every byte of a
// ping-pong between ranks of different hosts and every sum of an
// allreduce. Needs root.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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

constexpr int kIters = 200;

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bed_.up()) << "cannot build the testbed";
    // mpirun's launch agent, called as `agent HOST ORTED-COMMAND...` with
    // the command quoted for a remote shell, as ssh would be.
    agent_ = dir() + "/agent.sh";
    std::ofstream f(agent_);
    f << "#!/bin/sh\nhost=$1\nshift\ncase $host in\n  192.168.77.2) ns=" << bed_.ns('b')
      << " ;;\n  *) ns=" << bed_.ns('a') << " ;;\nesac\nexec ip netns exec $ns sh -c \"$*\"\n";
    f.close();
    test::sh("chmod +x " + agent_);
  }
  void TearDown() override {
    for (auto& d : daemons_)
      EXPECT_TRUE(test::TestbedPair::stop_daemon(d)) << "uroced did not stop cleanly";
    bed_.down();
  }

  std::string dir() const { return bed_.dir(); }

  // mpirun in host a with `ranks` ranks on each host, each host's ranks
  // running `a_cmd` and `b_cmd` (an MPMD job: one app context per host).
  // pml ucx, which Debian's openmpi-mca-params.conf leaves out; the
  // runtime's TCP on ctl, the only link with kernel addresses.
  std::string mpirun(int ranks, const std::string& a_cmd, const std::string& b_cmd,
                     const std::string& options = "--mca pml ucx") {
    const std::string n = std::to_string(ranks);
    Child job("ip netns exec " + bed_.ns('a') + " mpirun --allow-run-as-root --mca plm_rsh_agent " +
                  agent_ + " --mca oob_tcp_if_include ctl --mca btl_tcp_if_include ctl " + options +
                  " -np " + n + " --host 192.168.77.1:" + n + " " + a_cmd + " : -np " + n +
                  " --host 192.168.77.2:" + n + " " + b_cmd,
              dir() + "/mpirun.log");
    const int rc = job.wait(180s);
    const std::string out = job.output();
    EXPECT_EQ(rc, 0) << out;
    const int total = 2 * ranks;
    EXPECT_TRUE(std::regex_search(
        out, std::regex("pingpong 0<->" + std::to_string(total - 1) +
                        " 8 B: " + std::to_string(kIters) + " round trips intact")))
        << out;
    EXPECT_TRUE(std::regex_search(out, std::regex("pingpong 0<->" + std::to_string(total - 1) +
                                                  " 1 MiB: \\d+ round trips intact")))
        << out;
    EXPECT_TRUE(
        std::regex_search(out, std::regex("allreduce of 4096 longs over " + std::to_string(total) +
                                          " ranks: \\d+ rounds right")))
        << out;
    std::printf("%s", out.c_str());
    return out;
  }

  std::string check() const {
    return std::string(UROCE_BIN_DIR) + "/mpi_check " + std::to_string(kIters);
  }

  // The 1 MiB ping-pong crossed the hosts through uroce: each device
  // sent and received its packets (kIters / 10 + 1 round trips of 1 MiB
  // in packets of at most 4 KiB).
  void expect_traffic() const {
    const unsigned long long packets = (kIters / 10 + 1) * 256ull;
    for (char host : {'a', 'b'}) {
      const auto c = bed_.counters(host);
      EXPECT_GE(test::sum_matching(c, "sent_pkts"), packets) << slurp(bed_.stats_path(host));
      EXPECT_GE(test::sum_matching(c, "rcvd_pkts"), packets) << slurp(bed_.stats_path(host));
    }
  }

  test::TestbedPair bed_{{.tag = "mp", .ipv6 = false, .stats_file = true}};
  std::string agent_;
  std::unique_ptr<Child> daemons_[2];
};

// One rank per host, each with the device in its own process (uroce-run).
TEST_F(Mpi, OneRankPerHostOverUcx) {
  mpirun(1, bed_.uroce_run('a', check()), bed_.uroce_run('b', check()));
  expect_traffic();
}

// pml ucx takes a device at its full priority only when the device's
// driver in sysfs matches pml_ucx_devices (mlx* by default): with the
// ranks' /sys/class/infiniband (uroce-run --sysfs) and uroce* named, it
// does, rather than at the priority of a transport it merely can use.
TEST_F(Mpi, WithTheSysfsTreePmlUcxTakesTheDeviceAtFullPriority) {
  auto with_sysfs = [](std::string cmd) {
    return cmd.replace(cmd.find("/uroce-run "), 11, "/uroce-run --sysfs ");
  };
  const std::string out =
      mpirun(1, with_sysfs(bed_.uroce_run('a', check())), with_sysfs(bed_.uroce_run('b', check())),
             "--mca pml ucx --mca pml_ucx_devices 'uroce*' "
             "--mca pml_base_verbose 10");
  // Each rank's pml ucx: "init returned priority 51" (the device
  // matched), not 19 (transports only).
  std::size_t full = 0;
  for (std::size_t at = 0; (at = out.find("init returned priority 51", at)) != std::string::npos;
       ++at)
    ++full;
  EXPECT_EQ(full, 2u) << out;
  EXPECT_EQ(out.find("init returned priority 19"), std::string::npos) << out;
  expect_traffic();
}

// Two ranks per host sharing the host's device through uroced: the
// ping-pong crosses the hosts, the allreduce also runs between the two
// ranks of one host.
TEST_F(Mpi, TwoRanksPerHostShareEachHostsDevice) {
  ASSERT_EQ(bed_.start_daemons(daemons_), "");
  mpirun(2, bed_.attached_run('a', check()), bed_.attached_run('b', check()));
  expect_traffic();
}

}  // namespace
}  // namespace uroce
