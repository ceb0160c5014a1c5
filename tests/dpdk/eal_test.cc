/* SPDX-License-Identifier: BSD-3-Clause */
#include "dpdk/eal.h"

#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <latch>
#include <thread>
#include <vector>

#include "dpdk/af_xdp.h"

namespace uroce::dpdk {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Eal, RecognisesPciAddresses) {
  EXPECT_TRUE(is_pci_address("0000:03:00.0"));
  EXPECT_TRUE(is_pci_address("03:00.7"));
  EXPECT_TRUE(is_pci_address("abcd:ef:1f.1"));
  EXPECT_FALSE(is_pci_address("03:00.8"));
  EXPECT_FALSE(is_pci_address("net_af_packet0,iface=veth1"));
  EXPECT_FALSE(is_pci_address("0000:03:00"));
  EXPECT_FALSE(is_pci_address(""));
}

TEST(Eal, ArgumentsKeepTheProgramUnpinnedAndPrivate) {
  EalOptions o;
  o.devices = {"net_af_packet0,iface=veth1"};
  const auto a = eal_arguments(o);
  // lcore 0 may float over every CPU; a private instance without hugepages
  // unless asked; vdevs as --vdev, and no PCI scan without a PCI device.
  const auto lc = std::find(a.begin(), a.end(), "--lcores");
  ASSERT_NE(lc, a.end());
  EXPECT_EQ(lc[1].rfind("0@", 0), 0u);
  EXPECT_TRUE(has(a, "--no-huge"));
  EXPECT_TRUE(has(a, "--no-shconf"));
  EXPECT_TRUE(has(a, "--file-prefix"));
  EXPECT_TRUE(has(a, "--no-pci"));
  EXPECT_TRUE(has(a, "net_af_packet0,iface=veth1,framecnt=4096"))
      << "af_packet gets a ring deep enough for RDMA bursts";
  EXPECT_EQ(with_vdev_defaults("net_af_packet1,iface=x,framecnt=512"),
            "net_af_packet1,iface=x,framecnt=512")
      << "a ring size the user gave stays";
  EXPECT_EQ(with_vdev_defaults("net_ring0"), "net_ring0");
  // memif: buffers that hold a whole jumbo frame, unless the user said.
  EXPECT_EQ(with_vdev_defaults("net_memif0,role=server"), "net_memif0,role=server,bsize=10240");
  EXPECT_EQ(with_vdev_defaults("net_memif0,bsize=16384"), "net_memif0,bsize=16384");
  EXPECT_EQ(memif_buffer_size("net_memif0,role=client,bsize=4096"), 4096u);
  EXPECT_EQ(memif_buffer_size("net_memif0"), 2048u) << "DPDK's default";
  EXPECT_EQ(memif_buffer_size("net_ring0"), 0u);
  // On a link with large frames (lo: 65536), frames hold the largest
  // frame and blocks hold whole frames.
  EXPECT_EQ(kernel_iface_mtu("net_af_packet0,iface=lo"), 65536u);
  EXPECT_EQ(with_vdev_defaults("net_af_packet0,iface=lo"),
            "net_af_packet0,iface=lo,framecnt=4096,framesz=66560,blocksz=266240");
  EXPECT_EQ(kernel_iface_mtu("net_af_packet0,iface=no-such-link"), 0u);
  // af_xdp: one queue and uroce's XDP program, unless the user said.
  EXPECT_EQ(with_vdev_defaults("net_af_xdp0,iface=eth0"),
            "net_af_xdp0,iface=eth0,start_queue=0,queue_count=1,xdp_prog=" + af_xdp_program());
  EXPECT_EQ(with_vdev_defaults("net_af_xdp0,iface=eth0,queue_count=1,start_queue=2,xdp_prog=/p.o"),
            "net_af_xdp0,iface=eth0,queue_count=1,start_queue=2,xdp_prog=/p.o");
  EXPECT_EQ(kernel_iface("net_af_xdp0,iface=lo"), "lo");
  EXPECT_EQ(kernel_iface_mtu("net_af_xdp0,iface=lo"), 65536u);

  o.devices = {"0000:03:00.0"};
  o.hugepages = true;
  const auto b = eal_arguments(o);
  EXPECT_FALSE(has(b, "--no-pci"));
  EXPECT_FALSE(has(b, "--no-huge"));
  EXPECT_TRUE(has(b, "-a"));
}

// A program's thread that uses a port gets an lcore id and with it a cache
// in the port's pool; when it ends, what its cache holds goes back.
TEST(Eal, AProgramThreadGetsACacheAndGivesItBackWhenItEnds) {
  ASSERT_EQ(eal_init(EalOptions{}), "");
  constexpr unsigned kPool = 4096;
  rte_mempool* mp = rte_pktmbuf_pool_create("eal_test_cache", kPool, kMbufCache, 0,
                                            RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(mp, nullptr) << rte_strerror(rte_errno);
  track_pool(mp);  // as a port does with its pool

  unsigned lcore = LCORE_ID_ANY;
  std::thread([&] {
    const ThreadRegistration r(ThreadRegistration::Owner::kProgram);
    ASSERT_TRUE(r.registered());
    lcore = rte_lcore_id();
    ASSERT_NE(lcore, LCORE_ID_ANY);
    std::vector<rte_mbuf*> m(100);
    for (auto& b : m) ASSERT_NE(b = rte_pktmbuf_alloc(mp), nullptr);
    for (auto* b : m) rte_pktmbuf_free(b);
    // Given back into this thread's cache, not the pool's ring.
    EXPECT_GT(rte_mempool_default_cache(mp, lcore)->len, 0u);
    EXPECT_EQ(rte_mempool_avail_count(mp), kPool);
  }).join();
  ASSERT_NE(lcore, LCORE_ID_ANY);
  EXPECT_EQ(rte_mempool_default_cache(mp, lcore)->len, 0u) << "the cache went back to the pool";
  EXPECT_EQ(rte_mempool_avail_count(mp), kPool);
  untrack_pool(mp);
  rte_mempool_free(mp);
}

// Each cache holds back buffers its pool must have room for: only so many
// program threads get one at once; the next runs without, and one may
// have it again when another ends.
TEST(Eal, OnlySoManyProgramThreadsHaveACacheAtOnce) {
  ASSERT_EQ(eal_init(EalOptions{}), "");
  std::latch registered(kCachedProgramThreads), done(1);
  std::vector<std::thread> holders;
  std::atomic<unsigned> with_cache{0};
  for (unsigned i = 0; i < kCachedProgramThreads; ++i) {
    holders.emplace_back([&] {
      const ThreadRegistration r(ThreadRegistration::Owner::kProgram);
      if (r.registered()) with_cache.fetch_add(1);
      registered.count_down();
      done.wait();
    });
  }
  registered.wait();
  EXPECT_EQ(with_cache.load(), kCachedProgramThreads);
  std::thread([] {
    const ThreadRegistration r(ThreadRegistration::Owner::kProgram);
    EXPECT_FALSE(r.registered());
    EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY);
  }).join();
  std::thread([] {
    const ThreadRegistration r(ThreadRegistration::Owner::kUroce);
    EXPECT_TRUE(r.registered()) << "uroce's own threads are not counted";
  }).join();
  done.count_down();
  for (auto& t : holders) t.join();
  std::thread([] {
    const ThreadRegistration r(ThreadRegistration::Owner::kProgram);
    EXPECT_TRUE(r.registered());
  }).join();
}

}  // namespace
}  // namespace uroce::dpdk
