/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// DPDK's Environment Abstraction Layer, initialised once per process.
// rte_eal_init pins the calling thread to the main lcore; uroce lives in
// other people's programs, so it calls it from a thread of its own and the
// program's threads keep their CPU affinity.

#include <cstdint>
#include <string>
#include <vector>

struct rte_mempool;

namespace uroce::dpdk {

struct EalOptions {
  /// Extra EAL arguments from the configuration, appended last.
  std::vector<std::string> args;
  /// Devices to probe: vdev strings ("net_af_packet0,iface=veth1") or PCI
  /// addresses ("0000:03:00.0").
  std::vector<std::string> devices;
  /// Back memory with hugepages (net_memif needs them); else --no-huge.
  bool hugepages = false;
  /// Memory for EAL in MB (mempools come from it).
  unsigned memory_mb = 512;
  std::string log_level = "error";
};

/// Initialises EAL with `opts` unless it already is. Returns an empty
/// string on success, else what went wrong. Thread-safe.
std::string eal_init(const EalOptions& opts);

/// Program threads that may hold an lcore id, and with it a mempool cache
/// in each pool they touch, at once. Beyond them a program's threads run
/// unregistered (every mbuf an operation on the pool's ring): each cache
/// holds back buffers its pool must have room for.
inline constexpr unsigned kCachedProgramThreads = 4;

/// Each pool's per-thread cache (rte_pktmbuf_pool_create's cache_size),
/// and the most one holds: DPDK flushes a cache past 1.5 times its size
/// (RTE_MEMPOOL_CACHE_FLUSHTHRESH_MULTIPLIER).
inline constexpr unsigned kMbufCache = 256;
inline constexpr unsigned kMbufCacheHold = kMbufCache * 3 / 2;

/// Buffers a pool has beyond its rings and its users' frames: a full cache
/// for each thread that may have one (the port's poll thread, or the
/// daemon's, and the program's cached threads).
inline constexpr unsigned kMbufsInCaches = (kCachedProgramThreads + 1) * kMbufCacheHold;

/// The pools a thread that ends gives its caches back to: a port tracks
/// its pool from when it makes it until just before it frees it.
void track_pool(rte_mempool* mp);
void untrack_pool(rte_mempool* mp);

/// Makes the calling thread known to EAL (rte_thread_register) for as
/// long as the returned object lives, so that it gets an lcore id and with
/// it a per-thread mempool cache: without one, every mbuf taken or given
/// back is an atomic operation on the pool's shared ring. A thread EAL
/// cannot take (no free lcore id), and a program's thread beyond
/// kCachedProgramThreads, runs on unregistered, as before. When the thread
/// ends its caches go back to their pools, so that none holds buffers for
/// a thread that is gone.
class ThreadRegistration {
 public:
  enum class Owner { kUroce, kProgram };
  explicit ThreadRegistration(Owner owner);
  ~ThreadRegistration();
  ThreadRegistration(const ThreadRegistration&) = delete;
  ThreadRegistration& operator=(const ThreadRegistration&) = delete;
  bool registered() const { return registered_; }

 private:
  bool registered_ = false;
  Owner owner_;
  /// The process that registered: a child of fork() shares the parent's
  /// pools (hugepage memory is a shared mapping) and must leave them be.
  int pid_ = 0;
};

/// The argument vector eal_init passes to rte_eal_init (for logs and tests).
std::vector<std::string> eal_arguments(const EalOptions& opts);

/// True for a PCI address such as 0000:03:00.0 or 03:00.0.
bool is_pci_address(const std::string& device);

/// A vdev string with uroce's defaults added for options it leaves unset:
/// for net_af_packet, a 4096-frame ring, and on a jumbo-frame link frames
/// and blocks that hold its largest frame; for net_memif, buffers of
/// kMemifBufferSize; for net_af_xdp, one queue and uroce's XDP program
/// (af_xdp.h).
std::string with_vdev_defaults(const std::string& vdev);

/// net_memif's buffer size (bsize=) unless the device string sets one:
/// a whole frame of a 9000-byte MTU in one buffer. net_memif in DPDK 22.11
/// sends a frame longer than its buffers across several descriptors, and
/// that path writes one descriptor past the free ones when the ring is
/// nearly full: the peer then reads frames that were overwritten or sent
/// twice. A frame in one buffer takes the path that checks. The shared
/// memory this takes is 20 MiB a link (at net_memif's default of 1024
/// descriptors, one queue each way).
inline constexpr std::uint32_t kMemifBufferSize = 10240;

/// DPDK's own default: what a memif peer other than uroce likely has.
inline constexpr std::uint32_t kMemifDefaultBufferSize = 2048;

/// The buffer size of a net_memif vdev string (its bsize=, else DPDK's
/// default), or 0 for another device.
std::uint32_t memif_buffer_size(const std::string& vdev);

/// The kernel interface a net_af_packet or net_af_xdp vdev string names
/// (iface=), or "" for another device or a name the kernel could not have.
std::string kernel_iface(const std::string& vdev);

/// The MTU of the kernel interface a net_af_packet or net_af_xdp vdev
/// string names (iface=), or 0 when it names none or it cannot be read.
/// Both PMDs report 1500 whatever the interface's MTU.
std::uint32_t kernel_iface_mtu(const std::string& vdev);

}  // namespace uroce::dpdk
