/* SPDX-License-Identifier: BSD-3-Clause */
// The packet port (drivers/packet) between two network namespaces, under
// unmodified perftest and ibverbs-utils: RoCE in UDP GSO super-frames
// from one packet port to another (each captured on the veth splits into
// valid RoCEv2 packets), split intact at the far end; and the
// same super-frames segmented by the kernel toward a peer that takes
// single frames (DPDK's net_af_packet, as a NIC or a kernel peer would
// get them), where every segment is RoCEv2 with a correct ICRC that
// tshark decodes. Needs root.

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "support/child.h"
#include "support/icrc_check.h"
#include "support/pcap.h"
#include "support/super_frame.h"
#include "support/testbed_pair.h"
#include "support/tshark.h"
#include "wire/roce_parser.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;

const std::string kBwLine = R"(\n\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]*[1-9][0-9.]*\s+[0-9.]+)";
const std::string kPingpong = R"(\d+ iters in [0-9.]+ seconds)";

class PacketPort : public ::testing::Test {
 protected:
  explicit PacketPort(std::array<std::string, 2> ports = {"packet:rdma", "packet:rdma"})
      : bed_({.tag = "up", .ports = ports, .stats_file = true}) {}
  void SetUp() override { ASSERT_TRUE(bed_.up()) << "cannot build the testbed"; }
  void TearDown() override { bed_.down(); }

  // `program` on b, then on a toward b; both must succeed and a's output
  // match `expect`.
  void run(const std::string& program, const std::string& expect, bool capture = false) {
    const std::string dir = bed_.dir();
    if (capture) bed_.start_captures();
    Child server(bed_.over_uroce('b', program), dir + "/server.log");
    bed_.wait_for_tcp_listener('b', 18515, 30s);
    Child client(bed_.over_uroce('a', program + " 192.168.77.2"), dir + "/client.log");
    const int client_rc = client.wait(120s);
    const int server_rc = server.wait(60s);
    if (capture) bed_.stop_captures();
    EXPECT_EQ(client_rc, 0) << "client:\n" << client.output() << "\nserver:\n" << server.output();
    EXPECT_EQ(server_rc, 0) << "server:\n" << server.output();
    EXPECT_TRUE(std::regex_search(client.output(), std::regex(expect))) << client.output();
  }

  // Nothing the receiving end got was bad or lost in the port.
  void check_received(char host) {
    const test::CounterMap c = bed_.counters(host);
    ASSERT_FALSE(c.empty()) << "no counters from " << host;
    EXPECT_EQ(c.at("drop.bad_icrc"), 0u) << host;
    EXPECT_EQ(c.at("drop.bad_udp_length"), 0u) << host;
    EXPECT_EQ(c.at("drop.bad_ip_checksum"), 0u) << host;
    EXPECT_EQ(c.at("engine.tx_sched_rescued"), 0u) << host;
  }

  // Every RoCEv2 frame the veth carried is a packet, or a super-frame
  // whose packets all are, ICRC included. Returns the super-frames.
  std::size_t super_frames_in(const std::string& pcap) {
    std::size_t super = 0, single = 0;
    for (const auto& frame : test::read_pcap(pcap)) {
      wire::RocePacket pkt;
      const wire::DropReason why = wire::parse_roce_frame(frame, pkt);
      if (why == wire::DropReason::kNotIp || why == wire::DropReason::kNotUdp) continue;
      if (why == wire::DropReason::kNone) {
        ++single;
        continue;
      }
      const auto segments = test::split_super_frame(frame);
      EXPECT_TRUE(segments.has_value())
          << pcap << ": a frame of " << frame.size() << " bytes is neither: " << wire::name(why);
      super += segments.has_value();
    }
    EXPECT_GT(single + super, 0u) << pcap;
    return super;
  }

  test::TestbedPair bed_;
};

// 64 KiB WRITEs at path MTU 1024: a sends runs of packets as super-frames,
// b receives them whole and splits them.
TEST_F(PacketPort, WritesTravelAsSuperFramesAndArriveSplit) {
  run("ib_write_bw -d uroce0 -s 65536 -n 300", kBwLine, true);
  EXPECT_GT(super_frames_in(bed_.dir() + "/b.pcap"), 0u) << "no super-frame on the veth";
  super_frames_in(bed_.dir() + "/a.pcap");
  const test::CounterMap a = bed_.counters('a'), b = bed_.counters('b');
  ASSERT_FALSE(a.empty() || b.empty());
  EXPECT_GT(a.at("nic.tx_super_frames"), 0u);
  // Each of 300 WRITEs is 64 packets: FIRST, and at least one super-frame
  // for the rest.
  EXPECT_GE(a.at("nic.tx_segments"), 300u * 32);
  EXPECT_GT(b.at("nic.rx_super_frames"), 0u);
  EXPECT_EQ(b.at("nic.rx_segments"), a.at("nic.tx_segments")) << "segments lost on the way";
  EXPECT_EQ(b.at("nic.rx_dropped"), 0u);
  EXPECT_GE(b.at("engine.rx_roce"), 300u * 64);
  check_received('b');
  EXPECT_EQ(a.at("port.local_ack_timeout_err"), 0u);
}

// SENDs of 64 KiB both ways, the data checked by the program (-c).
TEST_F(PacketPort, RcPingpongChecksItsDataAcrossSuperFrames) {
  run("ibv_rc_pingpong -d uroce0 -g 1 -c -s 65536 -n 200", kPingpong);
  for (char host : {'a', 'b'}) {
    const test::CounterMap c = bed_.counters(host);
    ASSERT_FALSE(c.empty());
    EXPECT_GT(c.at("nic.tx_super_frames"), 0u) << host;
    EXPECT_GT(c.at("nic.rx_super_frames"), 0u) << host;
    check_received(host);
  }
}

// a's veth segments nothing (tx-udp-segmentation off): the kernel cuts
// a's super-frames into single frames before they reach the link, as for
// a NIC without USO. b is DPDK's net_af_packet, which takes single frames
// only: it must get every segment as a valid RoCEv2 packet.
class PacketPortSegmented : public PacketPort {
 protected:
  PacketPortSegmented() : PacketPort({"packet:rdma", ""}) {}
};

TEST_F(PacketPortSegmented, EverySegmentTheKernelCutsIsRoceV2WithACorrectIcrc) {
  ASSERT_EQ(test::sh("ip netns exec " + bed_.ns('a') +
                     " ethtool -K rdma tx-udp-segmentation off >/dev/null"),
            0);
  run("ibv_rc_pingpong -d uroce0 -g 1 -c -s 65536 -n 200", kPingpong, true);
  const test::CounterMap a = bed_.counters('a');
  ASSERT_FALSE(a.empty());
  EXPECT_GT(a.at("nic.tx_super_frames"), 0u);
  EXPECT_EQ(a.at("nic.tx_dropped"), 0u) << "the kernel refused super-frames";
  check_received('b');

  const std::string pcap = bed_.dir() + "/b.pcap";
  std::size_t roce = 0;
  for (const auto& frame : test::read_pcap(pcap)) {
    wire::RocePacket pkt;
    const wire::DropReason why = wire::parse_roce_frame(frame, pkt);
    if (why == wire::DropReason::kNotIp || why == wire::DropReason::kNotUdp) continue;
    ++roce;
    EXPECT_EQ(why, wire::DropReason::kNone) << wire::name(why);
    EXPECT_LE(frame.size(), 1500u + 14) << "a super-frame reached the link whole";
  }
  // 200 messages of 64 packets, a's and b's.
  EXPECT_GE(roce, 200u * 64);
  const auto icrc = test::independent_icrc_check(pcap);
  EXPECT_EQ(icrc.roce, roce) << icrc.output;
  EXPECT_EQ(icrc.bad, 0u) << icrc.output;
  for (const auto& d : test::tshark_decode(pcap, {"frame.number", "_ws.malformed"},
                                           {"infiniband.identify_payload:FALSE"}))
    EXPECT_EQ(d.at("_ws.malformed"), "") << "frame " << d.at("frame.number");
}

// gso=off: single frames only, which net_af_packet takes over a veth.
class PacketPortWithoutGso : public PacketPort {
 protected:
  PacketPortWithoutGso() : PacketPort({"packet:rdma,gso=off", ""}) {}
};

TEST_F(PacketPortWithoutGso, TalksToNetAfPacketInSingleFrames) {
  run("ib_write_bw -d uroce0 -s 65536 -n 100", kBwLine);
  const test::CounterMap a = bed_.counters('a');
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.at("nic.tx_super_frames"), 0u);
  EXPECT_GE(a.at("nic.tx_frames"), 100u * 64);
  check_received('b');
}

}  // namespace
}  // namespace uroce
