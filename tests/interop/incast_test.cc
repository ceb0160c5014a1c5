/* SPDX-License-Identifier: BSD-3-Clause */
// The incast of the testbed (scripts/scenario.sh incast): four hosts run
// unmodified ib_write_bw over uroce into a fifth through uroce-switch,
// whose port toward the receiver is a 100 Mb/s bottleneck that marks ECN
// like a RED queue. Run once with DCQCN and once without. Whatever the
// load: with DCQCN every flow finishes and reports, each mark the switch
// made and each CNP the receivers sent reaches the next hop; without it
// no CNP is sent. How fairly the flows share the bottleneck, and how much
// less DCQCN drops and retransmits, depend on the machine's load (a Jain
// index of 0.879 was seen in a ctest -j2 run): bench/incast.sh measures
// them against their targets, and DcqcnFabric's test
// (tests/engine/dcqcn_fabric_test.cc) asserts fair shares and a bounded
// queue on virtual time. Needs root.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "support/child.h"
#include "support/stats_lines.h"
#include "support/tshark.h"

namespace uroce {
namespace {

using test::Child;
using test::CounterMap;
using test::slurp;
using test::stats_lines;
using test::sum_matching;

constexpr int kSenders = 4;

struct Incast {
  int status = -1;
  std::string summary;
  std::vector<double> gbps;  ///< per flow, ib_write_bw's own average
  unsigned long long cnp_sent = 0, cnp_handled = 0, go_back_n = 0, ce_seen = 0;
  unsigned long long drops = 0, marked = 0;
};

// ib_write_bw's "BW average[Gb/sec]": the 4th field of the line after
// the "#bytes" header; 0 if the flow did not report.
double perftest_gbps(const std::string& log) {
  const auto at = log.find("#bytes");
  if (at == std::string::npos) return 0;
  std::istringstream in(log.substr(at));
  std::string header, line;
  std::getline(in, header);
  std::getline(in, line);
  std::istringstream w(line);
  double bytes, iters, peak, avg;
  return (w >> bytes >> iters >> peak >> avg) ? avg : 0;
}

double jain(const std::vector<double>& x) {
  const double s = std::accumulate(x.begin(), x.end(), 0.0);
  double q = 0;
  for (double v : x) q += v * v;
  return q > 0 ? s * s / (static_cast<double>(x.size()) * q) : 0;
}

class IncastTest : public ::testing::Test {
 protected:
  void TearDown() override {
    test::sh(std::string(UROCE_SCRIPTS_DIR) + "/fabric.sh down " + prefix_);
  }

  Incast run(const std::string& flags, const std::string& tag) {
    const std::string out = tmp_.path() + "/" + tag;
    Child c("env UROCE_BIN_DIR=" + std::string(UROCE_BIN_DIR) + " UROCE_FABRIC_PREFIX=" + prefix_ +
                " " + UROCE_SCRIPTS_DIR + "/scenario.sh incast --senders " +
                std::to_string(kSenders) + " --seconds 10 " + flags + " --out " + out,
            tmp_.path() + "/" + tag + ".log");
    Incast r;
    r.status = c.wait(std::chrono::seconds(240));
    r.summary = slurp(out + "/summary.txt");
    for (int i = 1; i <= kSenders; ++i) {
      const std::string n = std::to_string(i);
      r.gbps.push_back(perftest_gbps(slurp(out + "/sender" + n + ".log")));
      const CounterMap tx = stats_lines(slurp(out + "/sender" + n + ".stats"), "uroce0");
      const CounterMap rx = stats_lines(slurp(out + "/server" + n + ".stats"), "uroce0");
      r.cnp_handled += sum_matching(tx, "port.rp_cnp_handled");
      r.go_back_n += sum_matching(tx, "port.completer_retry_err");
      r.cnp_sent += sum_matching(rx, "port.np_cnp_sent");
      r.ce_seen += sum_matching(rx, "port.np_ecn_marked_roce_packets");
    }
    const CounterMap sw = stats_lines(slurp(out + "/switch.log"), "switch");
    r.drops = sum_matching(sw, ".drop_");
    r.marked = sum_matching(sw, "ecn_marked");
    std::printf("%s\n%s", tag.c_str(), r.summary.c_str());
    return r;
  }

  std::string prefix_ = "ui" + std::to_string(getpid() % 100000) + "-";
  test::TempDir tmp_;
};

TEST_F(IncastTest, FourSendersFinishWithDcqcnAndSendNoCnpWithout) {
  const Incast on = run("--dcqcn", "dcqcn-on");
  ASSERT_EQ(on.status, 0) << "every flow completes with DCQCN\n" << on.summary;
  for (int i = 0; i < kSenders; ++i) EXPECT_GT(on.gbps[i], 0) << "flow " << i + 1;
  EXPECT_LE(on.ce_seen, on.marked) << "the receivers saw no CE the switch did not set";
  if (on.marked > 0) {
    EXPECT_GT(on.ce_seen, 0u) << "the receivers saw the marks";
  }
  if (on.ce_seen > 0) {
    EXPECT_GT(on.cnp_sent, 0u) << "the receivers answered with CNPs";
  }
  EXPECT_LE(on.cnp_sent, on.ce_seen) << "at most one CNP per mark";
  if (on.cnp_sent > 0) {
    EXPECT_GT(on.cnp_handled, 0u) << "the senders cut their rates";
  }
  EXPECT_LE(on.cnp_handled, on.cnp_sent);

  // The same incast without DCQCN. A flow may fail here (its retries run
  // out behind a full queue); nobody may send a CNP.
  const Incast off = run("", "dcqcn-off");
  EXPECT_EQ(off.cnp_sent, 0u);
  EXPECT_EQ(off.cnp_handled, 0u);
  std::printf(
      "incast, 4 senders into 100 Mb/s: DCQCN on: Jain %.3f, %.1f Mb/s in all, %llu drops, "
      "%llu go-back-N, %llu CNPs; off: Jain %.3f, %.1f Mb/s, %llu drops, %llu go-back-N\n",
      jain(on.gbps), std::accumulate(on.gbps.begin(), on.gbps.end(), 0.0) * 1000, on.drops,
      on.go_back_n, on.cnp_sent, jain(off.gbps),
      std::accumulate(off.gbps.begin(), off.gbps.end(), 0.0) * 1000, off.drops, off.go_back_n);
}

}  // namespace
}  // namespace uroce
