/* SPDX-License-Identifier: BSD-3-Clause */
// RingPort against a daemon's end of the same region: frames received in
// place stay put until released, in whatever order the engine releases
// them; malformed slots are skipped and counted; transmission stops at a
// full ring and at an empty pool.

#include "port/ring_port.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace uroce::port {
namespace {

namespace L = shm_layout;
using Ring = ShmRegion::Ring;

const RingPortInfo kInfo = {{{0x02, 0xAA, 0, 0, 0, 1}}, 4200, 100000};

std::vector<std::uint8_t> frame(std::uint32_t seq, std::size_t len = 128) {
  std::vector<std::uint8_t> f(len, static_cast<std::uint8_t>(seq));
  wire::store_be32(f.data(), seq);
  return f;
}

std::uint32_t seq_of(wire::ConstBytes f) { return wire::load_be32(f.data()); }

bool same(wire::ConstBytes a, const std::vector<std::uint8_t>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size()) == 0;
}

// The daemon's end: its own mapping of the region the port maps.
struct Daemon {
  std::unique_ptr<ShmRegion> region;
  RingProducer out;
  RingConsumer in;
};

struct Setup {
  Daemon daemon;
  std::unique_ptr<RingPort> port;
};

Setup make(std::uint32_t slots, std::uint32_t slot_size = 256) {
  std::string error;
  Setup s;
  s.daemon.region = ShmRegion::create(slots, slot_size, &error);
  EXPECT_NE(s.daemon.region, nullptr) << error;
  s.daemon.out = RingProducer(s.daemon.region->ring(Ring::kToProgram));
  s.daemon.in = RingConsumer(s.daemon.region->ring(Ring::kToDaemon));
  auto mine = ShmRegion::map(dup(s.daemon.region->fd()), &error);
  EXPECT_NE(mine, nullptr) << error;
  s.port = std::make_unique<RingPort>(std::move(mine), kInfo);
  return s;
}

TEST(RingPort, ReceivesFramesInPlaceAndInOrder) {
  auto s = make(8);
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(s.daemon.out.push(frame(i, 60 + i)));
  RxFrame rx[kRxBurst];
  ASSERT_EQ(s.port->rx_burst(rx, 3), 3);
  ASSERT_EQ(s.port->rx_burst(rx + 3, kRxBurst), 2);
  for (std::uint32_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(same(rx[i].data, frame(i, 60 + i)));
    const auto* ring = static_cast<const std::uint8_t*>(s.port->region().ring(Ring::kToProgram));
    EXPECT_GE(rx[i].data.data(), ring + L::data_at(8)) << "zero-copy: in the slot";
  }
  EXPECT_EQ(s.port->rx_burst(rx, kRxBurst), 0);
  s.port->rx_release(rx, 5);
  EXPECT_EQ(s.daemon.out.room(), 8u);
}

TEST(RingPort, HeldFramesKeepTheirSlotsUntilReleasedInAnyOrder) {
  auto s = make(8);
  for (std::uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(s.daemon.out.push(frame(i)));
  RxFrame rx[8];
  ASSERT_EQ(s.port->rx_burst(rx, 8), 8);

  // Released out of order, frame 1 held: only frame 0's slot goes back.
  RxFrame early[] = {rx[5], rx[0], rx[2]};
  s.port->rx_release(early, 3);
  EXPECT_EQ(s.daemon.out.room(), 1u);

  // The daemon refills what it can; the held frames are untouched.
  std::uint32_t seq = 8;
  while (s.daemon.out.push(frame(seq))) ++seq;
  EXPECT_EQ(seq, 9u);
  for (std::uint32_t i : {1u, 3u, 4u, 6u, 7u}) EXPECT_TRUE(same(rx[i].data, frame(i))) << i;

  // A later burst hands out only the new frame, not the held ones again.
  RxFrame more[8];
  ASSERT_EQ(s.port->rx_burst(more, 8), 1);
  EXPECT_EQ(seq_of(more[0].data), 8u);

  // Frame 1 goes: it and the released 2 leave, 3 and 4 are held.
  s.port->rx_release(&rx[1], 1);
  EXPECT_EQ(s.daemon.out.room(), 2u);
  while (s.daemon.out.push(frame(seq))) ++seq;
  EXPECT_EQ(seq, 11u);
  for (std::uint32_t i : {3u, 4u, 6u, 7u}) EXPECT_TRUE(same(rx[i].data, frame(i))) << i;
  EXPECT_EQ(seq_of(more[0].data), 8u);

  // Releasing twice is harmless.
  s.port->rx_release(&rx[1], 1);
  EXPECT_EQ(s.daemon.out.room(), 0u);

  ASSERT_EQ(s.port->rx_burst(more + 1, 7), 2);
  EXPECT_EQ(seq_of(more[1].data), 9u);
  EXPECT_EQ(seq_of(more[2].data), 10u);
  RxFrame rest[] = {more[2], rx[7], more[0], rx[3], rx[6], more[1], rx[4]};
  s.port->rx_release(rest, 7);
  EXPECT_EQ(s.daemon.out.room(), 8u);
}

TEST(RingPort, MalformedSlotsAreSkippedAndCounted) {
  auto s = make(8);
  for (std::uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(s.daemon.out.push(frame(i)));
  auto* ring = static_cast<std::uint8_t*>(s.daemon.region->ring(Ring::kToProgram));
  auto* lengths = reinterpret_cast<std::uint32_t*>(ring + L::kLengthsAt);
  lengths[0] = 0;
  lengths[2] = 100000;
  RxFrame rx[kRxBurst];
  ASSERT_EQ(s.port->rx_burst(rx, kRxBurst), 2);
  EXPECT_EQ(seq_of(rx[0].data), 1u);
  EXPECT_EQ(seq_of(rx[1].data), 3u);
  EXPECT_EQ(s.port->rx_malformed(), 2u);
  EXPECT_EQ(s.daemon.out.room(), 5u) << "the leading bad slot went back at once";
  s.port->rx_release(rx, 2);
  EXPECT_EQ(s.daemon.out.room(), 8u);
}

TEST(RingPort, AResynchronisedRingIgnoresReleasesOfFramesFromBefore) {
  auto s = make(8);
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(s.daemon.out.push(frame(i)));
  RxFrame old[3];
  ASSERT_EQ(s.port->rx_burst(old, 3), 3);
  auto* ring = static_cast<std::uint8_t*>(s.daemon.region->ring(Ring::kToProgram));
  auto& head = *reinterpret_cast<std::uint32_t*>(ring + L::kHeadAt);
  head = 500;  // garbage: more than a ring ahead
  RxFrame rx[kRxBurst];
  EXPECT_EQ(s.port->rx_burst(rx, kRxBurst), 0);
  EXPECT_EQ(s.port->rx_corrupt(), 1u);
  // A frame from the producer at the new position arrives; the old
  // handles do not release it.
  auto* lengths = reinterpret_cast<std::uint32_t*>(ring + L::kLengthsAt);
  const auto f = frame(77);
  std::memcpy(ring + L::data_at(8) + (500 & 7) * 256, f.data(), f.size());
  lengths[500 & 7] = static_cast<std::uint32_t>(f.size());
  head = 501;
  ASSERT_EQ(s.port->rx_burst(rx, kRxBurst), 1);
  EXPECT_TRUE(same(rx[0].data, f));
  s.port->rx_release(old, 3);
  auto& tail = *reinterpret_cast<std::uint32_t*>(ring + L::kTailAt);
  EXPECT_EQ(tail, 500u);
  s.port->rx_release(rx, 1);
  EXPECT_EQ(tail, 501u);
}

TEST(RingPort, TxBurstStopsAtAFullRingAndReturnsTheCount) {
  auto s = make(4);
  TxFrame tx[6];
  for (std::uint32_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(s.port->tx_alloc(200, tx[i]));
    ASSERT_GE(tx[i].room.size(), 200u);
    const auto f = frame(i, 100 + i);
    std::memcpy(tx[i].room.data(), f.data(), f.size());
    tx[i].length = static_cast<std::uint32_t>(f.size());
  }
  EXPECT_EQ(s.port->tx_burst(tx, 6), 4);
  ASSERT_EQ(s.daemon.in.available(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(same(s.daemon.in.peek(i), frame(i, 100 + i)));
  s.daemon.in.pop(4);
  // The rest stayed the caller's, intact, to retry.
  EXPECT_EQ(s.port->tx_burst(tx + 4, 2), 2);
  ASSERT_EQ(s.daemon.in.available(), 2u);
  EXPECT_TRUE(same(s.daemon.in.peek(0), frame(4, 104)));
  EXPECT_TRUE(same(s.daemon.in.peek(1), frame(5, 105)));
}

TEST(RingPort, TxAllocFailsWhenThePoolIsEmptyOrTheFrameExceedsASlot) {
  auto s = make(4, 256);
  TxFrame f;
  EXPECT_FALSE(s.port->tx_alloc(257, f));
  std::vector<TxFrame> held(kRingTxBuffers);
  for (auto& t : held) ASSERT_TRUE(s.port->tx_alloc(256, t));
  EXPECT_FALSE(s.port->tx_alloc(64, f));
  s.port->tx_free(held[10]);
  s.port->tx_free(held[10]);  // twice: the second is ignored
  EXPECT_TRUE(s.port->tx_alloc(64, f));
  EXPECT_FALSE(s.port->tx_alloc(64, f));
  // A frame sent gives its buffer back.
  held[0].length = 64;
  EXPECT_EQ(s.port->tx_burst(&held[0], 1), 1);
  EXPECT_TRUE(s.port->tx_alloc(64, f));
}

TEST(RingPort, AFrameOfNoLengthIsTakenAndDropped) {
  auto s = make(4);
  TxFrame tx[2];
  ASSERT_TRUE(s.port->tx_alloc(64, tx[0]));
  ASSERT_TRUE(s.port->tx_alloc(64, tx[1]));
  tx[1].length = 64;
  EXPECT_EQ(s.port->tx_burst(tx, 2), 2);
  EXPECT_EQ(s.port->tx_invalid(), 1u);
  EXPECT_EQ(s.daemon.in.available(), 1u);
}

TEST(RingPort, ReportsTheDaemonsLinkIdentityAndState) {
  auto s = make(4);
  EXPECT_EQ(s.port->mac(), kInfo.mac);
  EXPECT_EQ(s.port->mtu(), 4200u);
  EXPECT_EQ(s.port->speed_mbps(), 100000u);
  EXPECT_FALSE(s.port->offloads_ipv4_checksum());
  EXPECT_TRUE(s.port->link_up());
  s.port->set_link(false);
  EXPECT_FALSE(s.port->link_up());
  s.port->set_link(true);
  EXPECT_TRUE(s.port->link_up());
}

}  // namespace
}  // namespace uroce::port
