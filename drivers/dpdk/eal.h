/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// DPDK's Environment Abstraction Layer, initialised once per process.
// rte_eal_init pins the calling thread to the main lcore; uroce lives in
// other people's programs, so it calls it from a thread of its own and the
// program's threads keep their CPU affinity.

#include <cstdint>
#include <string>
#include <vector>

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

/// Makes the calling thread known to EAL (rte_thread_register) for as
/// long as the returned object lives, so that it gets an lcore id and with
/// it a per-thread mempool cache: without one, every mbuf taken or given
/// back is an atomic operation on the pool's shared ring. A thread EAL
/// cannot take (no free lcore id) runs on unregistered, as before.
class ThreadRegistration {
 public:
  ThreadRegistration();
  ~ThreadRegistration();
  ThreadRegistration(const ThreadRegistration&) = delete;
  ThreadRegistration& operator=(const ThreadRegistration&) = delete;
  bool registered() const { return registered_; }

 private:
  bool registered_ = false;
};

/// The argument vector eal_init passes to rte_eal_init (for logs and tests).
std::vector<std::string> eal_arguments(const EalOptions& opts);

/// True for a PCI address such as 0000:03:00.0 or 03:00.0.
bool is_pci_address(const std::string& device);

/// A vdev string with uroce's defaults added for options it leaves unset:
/// for net_af_packet, a 4096-frame ring, and on a jumbo-frame link frames
/// and blocks that hold its largest frame; for net_af_xdp, one queue and
/// uroce's XDP program (af_xdp.h).
std::string with_vdev_defaults(const std::string& vdev);

/// The kernel interface a net_af_packet or net_af_xdp vdev string names
/// (iface=), or "" for another device or a name the kernel could not have.
std::string kernel_iface(const std::string& vdev);

/// The MTU of the kernel interface a net_af_packet or net_af_xdp vdev
/// string names (iface=), or 0 when it names none or it cannot be read.
/// Both PMDs report 1500 whatever the interface's MTU.
std::uint32_t kernel_iface_mtu(const std::string& vdev);

}  // namespace uroce::dpdk
