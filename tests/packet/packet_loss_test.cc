/* SPDX-License-Identifier: BSD-3-Clause */
// Two verbs devices of this process on the packet port (drivers/packet),
// the two ends of a veth pair in a network namespace the test makes, the
// receiving one losing one received frame in twenty on purpose: the
// frames it loses are segments of super-frames, as a switch behind a
// NIC's segmentation would drop one. Go-back-N resends from the lost
// segment on, and every byte arrives intact. Runs under the sanitizers
// too. Needs root.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "support/child.h"
#include "verbs_host.h"

namespace uroce::test {
namespace {

// The sum of every counter whose name holds `part` (one per QP, say).
std::uint64_t sum_of(const Counters& m, const std::string& part) {
  std::uint64_t sum = 0;
  for (const auto& [name, v] : m)
    if (name.find(part) != std::string::npos) sum += v;
  return sum;
}

class PacketLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = "upl" + std::to_string(getpid());
    // No IPv6 on the link: its neighbour discovery would take draws of
    // the receiver's losses.
    ASSERT_EQ(sh("ip netns add " + ns_ + " && ip netns exec " + ns_ +
                 " sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
                 " && ip -n " +
                 ns_ + " link add va type veth peer name vb && ip -n " + ns_ +
                 " link set va up && ip -n " + ns_ + " link set vb up"),
              0)
        << "needs root: a network namespace and a veth pair";
    // The ports' sockets belong to the namespace they are opened in.
    const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int there = open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
    const bool entered = home >= 0 && there >= 0 && setns(there, CLONE_NEWNET) == 0;
    if (entered) {
      a_ = std::make_unique<Host>(device("a", "packet:va", "10.0.0.1"), Config{});
      Config lossy;
      lossy.fault.rx_drop = 0.05;
      lossy.fault.seed = 21;
      b_ = std::make_unique<Host>(device("b", "packet:vb", "10.0.0.2"), lossy);
      EXPECT_EQ(setns(home, CLONE_NEWNET), 0);
    }
    if (home >= 0) close(home);
    if (there >= 0) close(there);
    ASSERT_TRUE(entered) << "cannot enter " << ns_;
    ASSERT_TRUE(a_->dev && b_->dev);
    ASSERT_TRUE(eventually([&] {
      return a_->dev->port_attr().state == verbs::PortState::kActive &&
             b_->dev->port_attr().state == verbs::PortState::kActive;
    }));
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    sh("ip netns del " + ns_ + " 2>/dev/null");
  }

  static DeviceConfig device(const std::string& name, const std::string& port,
                             const std::string& ip) {
    DeviceConfig dc;
    dc.name = name;
    dc.port = port;
    dc.ip = {IpPrefix{ip, 24}};
    return dc;
  }

  std::string ns_;
  std::unique_ptr<Host> a_, b_;
};

TEST_F(PacketLoss, ALostSegmentOfASuperFrameIsResentAndTheBytesArriveIntact) {
  // Each round: SENDs both ways, a 20-packet WRITE and a READ of it back,
  // every byte checked (exchange_rc). Twenty rounds: some 600 frames for
  // b to lose from.
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    ASSERT_NO_FATAL_FAILURE(exchange_rc(*a_, *b_));
  }
  const Counters a = a_->counters();
  const Counters b = b_->counters();
  // Expect: the WRITEs left a as super-frames and b split them; b lost
  // some of what it received, and a resent for it.
  EXPECT_GT(a.at("nic.tx_super_frames"), 0u);
  EXPECT_GT(b.at("nic.rx_super_frames"), 0u);
  EXPECT_GT(b.at("engine.fault_dropped"), 0u);
  EXPECT_GT(b.at("port.out_of_seq_request"), 0u) << "b saw the gap a lost segment left";
  EXPECT_GT(a.at("port.completer_retry_err"), 0u) << "a resent";
  EXPECT_EQ(sum_of(a, "retry_exceeded_err") + sum_of(b, "retry_exceeded_err"), 0u);
}

}  // namespace
}  // namespace uroce::test
