/* SPDX-License-Identifier: BSD-3-Clause */
// net_memif with jumbo frames, the receiver's ring left unread until the
// sender (memif_sender, a process of its own as a memif peer is) can send
// no more: the frames that filled the ring come out whole, in order, and
// as many as went in. With DPDK's default buffers of 2048 bytes, net_memif
// in 22.11 wrote such a frame's last buffer over one the receiver had not
// read yet, and the receiver then read frames torn or twice (eal.h,
// kMemifBufferSize). Needs root (hugepages).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "port/params.h"
#include "support/child.h"
#include "support/hugepages.h"

namespace uroce::dpdk {
namespace {

using namespace std::chrono_literals;

// A 4 KiB RoCE payload with its headers: three of DPDK's default buffers.
constexpr std::uint32_t kFrame = 4166;
constexpr std::uint32_t kMtu = 9000;

class Memif : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    huge_ = new test::Hugepages(256);
    char dir[] = "/tmp/uroce-memif-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    EalOptions eal;
    eal.hugepages = true;
    eal.memory_mb = 192;
    ASSERT_EQ(eal_init(eal), "");
  }
  static void TearDownTestSuite() {
    // unlink and rmdir, not a directory walk: its descriptor may take the
    // number of a socket that EAL's interrupt thread has just let go,
    // which TSan takes for a race between the two.
    for (const char* f : {"/link.sock", "/small.sock", "/sender.log"}) unlink((dir_ + f).c_str());
    rmdir(dir_.c_str());
    delete huge_;
  }

  static inline test::Hugepages* huge_ = nullptr;
  static inline std::string dir_;
};

TEST_F(Memif, JumboFramesThatFillTheRingArriveWholeAndOnce) {
  ASSERT_GE(huge_->pages(), 256) << "could not allocate hugepages for net_memif";
  PortOptions po;
  po.mtu = kMtu;
  std::string err;
  const std::string sock = dir_ + "/link.sock";
  auto server =
      DpdkPort::open("net_memif0,role=server,socket=" + sock + ",socket-abstract=no", po, &err);
  ASSERT_NE(server, nullptr) << err;
  server->attach_thread();
  test::Child sender(std::string(UROCE_MEMIF_SENDER) + " " + sock + " " + std::to_string(kMtu) +
                         " " + std::to_string(kFrame),
                     dir_ + "/sender.log");
  // Its line, wherever it comes among what EAL logs; or it ended without.
  unsigned sent = 0;
  for (int i = 0; i < 600; ++i) {
    const std::string out = sender.output();
    const auto at = out.find("sent ");
    if (at != std::string::npos && std::sscanf(out.c_str() + at, "sent %u", &sent) == 1) break;
    if (sender.exited_within(0s)) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GT(sent, 100u) << sender.output();

  unsigned got = 0;
  std::vector<port::RxFrame> frames(port::kRxBurst);
  for (int idle = 0; idle < 50; ++idle) {
    const std::uint16_t n = server->rx_burst(frames.data(), port::kRxBurst);
    if (n != 0) idle = 0;
    for (std::uint16_t k = 0; k < n; ++k, ++got) {
      const wire::ConstBytes d = frames[k].data;
      ASSERT_EQ(d.size(), kFrame) << "frame " << got;
      for (std::uint32_t i = 0; i < kFrame; ++i)
        ASSERT_EQ(d[i], static_cast<std::uint8_t>(got * 7 + i)) << "frame " << got << " byte " << i;
    }
    server->rx_release(frames.data(), n);
    if (n == 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(got, sent);
  std::uint64_t dropped = ~0ull;
  server->for_each_stat([&](std::string_view name, std::uint64_t v) {
    if (name == "rx_chained_dropped") dropped = v;
  });
  EXPECT_EQ(dropped, 0u);
  sender.interrupt();
  sender.wait(10s);
}

// Buffers smaller than the port's frames are refused by name.
TEST_F(Memif, BuffersThatCannotHoldAFrameAreRefusedByName) {
  PortOptions po;
  po.mtu = kMtu;
  std::string err;
  auto p = DpdkPort::open(
      "net_memif1,role=server,bsize=4096,socket=" + dir_ + "/small.sock,socket-abstract=no", po,
      &err);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(err.find("bsize=4096"), std::string::npos) << err;
  EXPECT_NE(err.find("9022"), std::string::npos) << err;
}

}  // namespace
}  // namespace uroce::dpdk
