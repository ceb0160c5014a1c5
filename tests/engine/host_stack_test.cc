/* SPDX-License-Identifier: BSD-3-Clause */
// The engine's host stack over ports joined in memory: ARP and IPv6
// neighbour discovery answered and learnt from, peers resolved, VLANs
// kept apart, ping answered.

#include "engine/host_stack.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/hosts.h"
#include "wire/arp.h"
#include "wire/icmp.h"

namespace uroce::engine {
namespace {

TEST(HostStack, AnswersArpForItsAddressesOnlyAndLearnsTheAsker) {
  Host a(kMacA, kIpA);
  a.port.keep_sent = true;
  std::vector<std::uint8_t> req(60);
  wire::build_arp_request(req, kMacB, kIpB.v4(), kIpA.v4());
  a.port.inject(req);
  std::vector<std::uint8_t> other(60);
  wire::build_arp_request(other, kMacB, kIpB.v4(), 0x0A090063);  // not ours
  a.port.inject(other);
  a.engine.poll(now_ns());
  // Expect: one reply, to the asker, saying 10.9.0.1 is at our MAC.
  ASSERT_EQ(a.port.sent.size(), 1u);
  wire::ArpPacket rep;
  ASSERT_TRUE(wire::parse_arp_frame(a.port.sent[0], rep));
  EXPECT_EQ(rep.op, wire::ArpOp::kReply);
  EXPECT_EQ(rep.sender_mac, kMacA);
  EXPECT_EQ(rep.sender_ip, kIpA.v4());
  EXPECT_EQ(rep.target_mac, kMacB);
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kRxArp), 2u);
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kTxArpReply), 1u);
  // The asker was learnt: resolving it needs no request.
  EXPECT_EQ(a.engine.resolve(kIpB, std::chrono::milliseconds(0)), kMacB);
}

// A device on VLAN 100 answers ARP on VLAN 100 only, tagged.
TEST(HostStack, OnAVlanOnlyItsFramesAreOursAndRepliesAreTagged) {
  EngineConfig cfg;
  cfg.addresses = {kIpA};
  cfg.vlan_id = 100;
  Host a(kMacA, cfg);
  a.port.keep_sent = true;
  std::vector<std::uint8_t> untagged(60);
  wire::build_arp_request(untagged, kMacB, kIpB.v4(), kIpA.v4());
  // The same request on VLAN 100, and on VLAN 200.
  auto tagged = [&](std::uint16_t vid) {
    std::vector<std::uint8_t> f(64);
    std::copy(untagged.begin(), untagged.begin() + 12, f.begin());
    wire::store_be16(f.data() + 12, wire::ether_type::kVlan);
    wire::VlanTag{0, false, vid, wire::ether_type::kArp}.write(f.data() + 14);
    std::copy(untagged.begin() + 14, untagged.end(), f.begin() + 18);
    return f;
  };
  a.port.inject(untagged);
  a.port.inject(tagged(200));
  a.engine.poll(now_ns());
  EXPECT_TRUE(a.port.sent.empty()) << "not our VLAN";
  EXPECT_EQ(a.engine.counters().get(EngineCounter::kRxOther), 2u);
  a.port.inject(tagged(100));
  a.engine.poll(now_ns());
  ASSERT_EQ(a.port.sent.size(), 1u);
  const auto& reply = a.port.sent[0];
  ASSERT_GE(reply.size(), 18u + 28u);
  EXPECT_EQ(wire::load_be16(reply.data() + 12), wire::ether_type::kVlan);
  const wire::VlanTag tag = wire::VlanTag::parse(reply.data() + 14);
  EXPECT_EQ(tag.vid, 100);
  EXPECT_EQ(tag.ether_type, wire::ether_type::kArp);
  wire::ArpPacket rep;
  ASSERT_TRUE(wire::parse_arp_frame(reply, rep));
  EXPECT_EQ(rep.op, wire::ArpOp::kReply);
  EXPECT_EQ(rep.sender_ip, kIpA.v4());
}

TEST(HostStack, ResolvesAPeerWithArpAndTimesOutOnAnAbsentOne) {
  Host a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop) b.engine.poll(now_ns());
  });
  EXPECT_EQ(a.engine.resolve(kIpB, std::chrono::seconds(5)), kMacB);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.engine.resolve(*wire::IpAddr::parse("10.9.0.77"), std::chrono::milliseconds(300)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  stop = true;
  poller.join();
  EXPECT_GE(a.engine.counters().get(EngineCounter::kTxArpRequest), 2u);
}

TEST(HostStack, ResolvesAnIpv6PeerWithNeighbourDiscovery) {
  const wire::IpAddr v6a = *wire::IpAddr::parse("fd09::1");
  const wire::IpAddr v6b = *wire::IpAddr::parse("fd09::2");
  Host a(kMacA, v6a), b(kMacB, v6b);
  test::PipePort::join(a.port, b.port);
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop) b.engine.poll(now_ns());
  });
  EXPECT_EQ(a.engine.resolve(v6b, std::chrono::seconds(5)), kMacB);
  EXPECT_FALSE(a.engine.resolve(*wire::IpAddr::parse("fd09::77"), std::chrono::milliseconds(300)))
      << "nobody has that address";
  stop = true;
  poller.join();
  EXPECT_GE(a.engine.counters().get(EngineCounter::kTxNeighborSolicit), 2u);
  EXPECT_EQ(b.engine.counters().get(EngineCounter::kTxNeighborAdvert), 1u)
      << "b answers for its address only";
  // b learnt a from its solicitation.
  EXPECT_EQ(b.engine.resolve(v6a, std::chrono::milliseconds(0)), kMacA);
}

TEST(HostStack, AnswersPingToItsAddress) {
  Host a(kMacA, kIpA);
  a.port.keep_sent = true;
  std::vector<std::uint8_t> f(14 + 20 + 8 + 16);
  wire::EthHdr{kMacA, kMacB, wire::ether_type::kIpv4}.write(f.data());
  wire::Ipv4Hdr ip;
  ip.total_length = 44;
  ip.protocol = wire::ip_proto::kIcmp;
  ip.src = kIpB.v4();
  ip.dst = kIpA.v4();
  ip.write(f.data() + 14);
  f[34] = 8;  // echo request
  wire::store_be16(f.data() + 36, wire::inet_checksum(f.data() + 34, 24));
  a.port.inject(f);
  a.engine.poll(now_ns());
  ASSERT_EQ(a.port.sent.size(), 1u);
  EXPECT_EQ(a.port.sent[0][34], 0) << "echo reply";
  EXPECT_EQ(wire::load_be32(a.port.sent[0].data() + 30), kIpB.v4());
}

}  // namespace
}  // namespace uroce::engine
