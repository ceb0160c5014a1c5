/* SPDX-License-Identifier: BSD-3-Clause */
// Two packet ports (drivers/packet) in this process, on the two ends of a
// veth pair in a network namespace the test makes: frames the engine
// would build go out as super-frames and arrive as they were built,
// 802.1Q tags included; a super-frame split over several receive bursts
// comes out whole and in order. Runs under the sanitizers too. Needs root.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "packet/packet_port.h"
#include "port/params.h"
#include "support/child.h"
#include "support/wire_samples.h"
#include "wire/ib_headers.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

namespace uroce::packet {
namespace {

using namespace std::chrono_literals;
using Frame = std::vector<std::uint8_t>;

constexpr std::uint8_t kFirst = 0x06;   // RC RDMA WRITE First
constexpr std::uint8_t kMiddle = 0x07;  // RC RDMA WRITE Middle
constexpr std::uint8_t kLast = 0x08;    // RC RDMA WRITE Last

class PacketPortPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = "upp" + std::to_string(getpid());
    ASSERT_EQ(
        test::sh("ip netns add " + ns_ + " && ip netns exec " + ns_ +
                 " sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
                 " && ip -n " +
                 ns_ + " link add va type veth peer name vb && ip -n " + ns_ +
                 " link set va up && ip -n " + ns_ + " link set vb up"),
        0)
        << "needs root: a network namespace and a veth pair";
    // The ports' sockets belong to the namespace they are opened in.
    const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int there = open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(home, 0);
    ASSERT_GE(there, 0);
    ASSERT_EQ(setns(there, CLONE_NEWNET), 0);
    std::string error;
    a_ = PacketPort::open({.iface = "va"}, &error);
    b_ = PacketPort::open({.iface = "vb"}, &error);
    single_ = PacketPort::open({.iface = "va", .gso = false}, &error);
    EXPECT_EQ(setns(home, CLONE_NEWNET), 0);
    close(home);
    close(there);
    ASSERT_TRUE(a_ && b_ && single_) << error;
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!(a_->link_up() && b_->link_up()) && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(a_->link_up() && b_->link_up());
    route_ = test::sample_route(false);
    route_.src_mac = a_->mac();
    route_.dst_mac = b_->mac();
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    single_.reset();
    test::sh("ip netns del " + ns_ + " 2>/dev/null");
  }

  // Builds a frame of `opcode` in one of `port`'s buffers, the engine's
  // way, and keeps a copy of it.
  port::TxFrame build(port::Port& port, const wire::RoceRoute& route, std::uint8_t opcode,
                      std::size_t payload, std::uint32_t psn) {
    wire::Bth bth;
    bth.opcode = opcode;
    bth.dest_qp = 0x10203;
    bth.psn = wire::Psn(psn);
    wire::ExtHeaders ext;
    ext.reth = {0x7000, 0x55, 65536};
    const Frame data(payload, static_cast<std::uint8_t>(psn));
    const wire::ConstBytes seg(data.data(), data.size());
    const std::size_t len = wire::roce_frame_length(route, wire::opcode_info(opcode), payload);
    port::TxFrame f;
    EXPECT_TRUE(port.tx_alloc(static_cast<std::uint32_t>(len), f));
    f.length = static_cast<std::uint32_t>(
        wire::build_roce_frame(f.room, route, bth, ext, std::span(&seg, 1), ++ip_id_, false));
    EXPECT_EQ(f.length, len);
    sent_.emplace_back(f.room.data(), f.room.data() + f.length);
    return f;
  }

  void send(port::Port& port, std::vector<port::TxFrame>& frames) {
    ASSERT_EQ(port.tx_burst(frames.data(), static_cast<std::uint16_t>(frames.size())),
              frames.size());
  }

  // RoCEv2 frames `b_` receives, `burst` at a time, until `n` came or 5 s
  // passed; anything else (the kernel's own frames) is let go.
  std::vector<Frame> receive(std::size_t n, std::uint16_t burst = port::kRxBurst) {
    std::vector<Frame> got;
    const auto end = std::chrono::steady_clock::now() + 5s;
    port::RxFrame rx[port::kRxBurst];
    while (got.size() < n && std::chrono::steady_clock::now() < end) {
      const std::uint16_t k = b_->rx_burst(rx, burst);
      EXPECT_LE(k, burst);
      for (std::uint16_t i = 0; i < k; ++i) {
        wire::RocePacket pkt;
        if (wire::parse_roce_frame(rx[i].data, pkt) == wire::DropReason::kNotIp) continue;
        got.emplace_back(rx[i].data.begin(), rx[i].data.end());
      }
      b_->rx_release(rx, k);
    }
    return got;
  }

  static std::map<std::string, std::uint64_t> stats(const port::Port& p) {
    std::map<std::string, std::uint64_t> m;
    p.for_each_stat([&](std::string_view name, std::uint64_t v) { m[std::string(name)] = v; });
    return m;
  }

  std::string ns_;
  std::unique_ptr<PacketPort> a_, b_, single_;
  wire::RoceRoute route_;
  std::uint16_t ip_id_ = 0xFFF0;  // wraps during the test
  std::vector<Frame> sent_;
};

// Expect: a 16-packet WRITE leaves in two super-frames (FIRST with the
// shorter MIDDLE after it, then the rest) and arrives as it was built.
TEST_F(PacketPortPair, AWritesPacketsArriveAsTheEngineBuiltThem) {
  std::vector<port::TxFrame> frames;
  frames.push_back(build(*a_, route_, kFirst, 1024, 1));
  for (std::uint32_t i = 0; i < 14; ++i) frames.push_back(build(*a_, route_, kMiddle, 1024, 2 + i));
  frames.push_back(build(*a_, route_, kLast, 100, 16));
  send(*a_, frames);
  const std::vector<Frame> got = receive(sent_.size());
  EXPECT_EQ(got, sent_);
  EXPECT_EQ(stats(*a_)["tx_super_frames"], 2u);
  EXPECT_EQ(stats(*a_)["tx_segments"], 16u);
  EXPECT_EQ(stats(*b_)["rx_super_frames"], 2u);
  EXPECT_EQ(stats(*b_)["rx_segments"], 16u);
  EXPECT_EQ(stats(*b_)["rx_dropped"], 0u);
  EXPECT_EQ(stats(*a_)["buffers_free"], PacketPort::kBuffers) << "sent buffers came back";
  EXPECT_EQ(stats(*b_)["buffers_free"], PacketPort::kBuffers) << "received buffers came back";
}

// Expect: 20 packets in one super-frame, taken 3 at a time: all of them,
// in order, and the super-frame counted once.
TEST_F(PacketPortPair, ASuperFrameSplitOverSeveralBurstsComesOutWhole) {
  std::vector<port::TxFrame> frames;
  for (std::uint32_t i = 0; i < 20; ++i)
    frames.push_back(build(*a_, route_, kMiddle, 512, 100 + i));
  send(*a_, frames);
  EXPECT_EQ(receive(sent_.size(), 3), sent_);
  EXPECT_EQ(stats(*b_)["rx_super_frames"], 1u);
}

// Expect: tagged frames go one by one and arrive with their tag, which
// the kernel took off into the ring's metadata.
TEST_F(PacketPortPair, TaggedFramesArriveWithTheirTag) {
  wire::RoceRoute tagged = route_;
  tagged.vlan = true;
  tagged.vid = 100;
  tagged.pcp = 3;
  std::vector<port::TxFrame> frames;
  for (std::uint32_t i = 0; i < 4; ++i) frames.push_back(build(*a_, tagged, kMiddle, 256, i));
  send(*a_, frames);
  EXPECT_EQ(receive(sent_.size()), sent_);
  EXPECT_EQ(stats(*a_)["tx_super_frames"], 0u);
}

// Expect: with gso off, a run that would coalesce goes out frame by frame.
TEST_F(PacketPortPair, WithoutGsoEveryFrameGoesAlone) {
  std::vector<port::TxFrame> frames;
  for (std::uint32_t i = 0; i < 8; ++i) frames.push_back(build(*single_, route_, kMiddle, 1024, i));
  send(*single_, frames);
  EXPECT_EQ(receive(sent_.size()), sent_);
  EXPECT_EQ(stats(*single_)["tx_super_frames"], 0u);
  EXPECT_EQ(stats(*b_)["rx_super_frames"], 0u);
  EXPECT_EQ(stats(*b_)["rx_frames"], 8u);
}

TEST(PacketPortOptions, ThePortStringNamesTheInterfaceAndGso) {
  PacketPortOptions o;
  std::string error;
  ASSERT_TRUE(parse_port("packet:veth1", &o, &error)) << error;
  EXPECT_EQ(o.iface, "veth1");
  EXPECT_TRUE(o.gso);
  ASSERT_TRUE(parse_port("packet:veth1,gso=off", &o, &error)) << error;
  EXPECT_FALSE(o.gso);
  EXPECT_FALSE(parse_port("packet:", &o, &error));
  EXPECT_NE(error.find("names an interface"), std::string::npos) << error;
  EXPECT_FALSE(parse_port("packet:veth1,mtu=9000", &o, &error));
  EXPECT_NE(error.find("unknown option \"mtu=9000\""), std::string::npos) << error;
  EXPECT_FALSE(parse_port("packet:a-name-longer-than-ifnamsiz", &o, &error));
  std::string missing;
  EXPECT_EQ(PacketPort::open({.iface = "no-such-if0"}, &missing), nullptr);
  EXPECT_NE(missing.find("no interface no-such-if0"), std::string::npos) << missing;
}

}  // namespace
}  // namespace uroce::packet
