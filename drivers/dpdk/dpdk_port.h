/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A uroce Port on a DPDK ethdev: net_af_packet on a veth, net_af_xdp on a
// kernel interface, net_memif, net_ring, net_tap or a PCI NIC.

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "dpdk/af_xdp.h"
#include "port/netdev_share.h"
#include "port/port.h"

namespace uroce::dpdk {

struct PortOptions {
  std::uint16_t rx_desc = 1024;
  std::uint16_t tx_desc = 1024;
  std::uint32_t mtu = 0;  ///< 0: keep the device's
  /// The MTU is the kernel interface's (iface= of net_af_packet or
  /// net_af_xdp), followed while the port runs, up to what it opened with.
  bool follow_mtu = false;
  /// Netdev mode: the kernel interface the port shares with the kernel
  /// (port/netdev_share.h). Empty: the link is uroce's alone.
  std::string netdev;
  /// Receive and transmit queues: one per lcore of a device on several
  /// (open_queue), received frames spread over them by the NIC's RSS
  /// where it has it.
  std::uint16_t queues = 1;
};

class DpdkPort : public port::Port {
 public:
  /// Opens the ethdev EAL probed for `device` (see EalOptions::devices).
  /// On failure returns null with the reason in *error.
  static std::unique_ptr<DpdkPort> open(const std::string& device, const PortOptions& opts,
                                        std::string* error);
  ~DpdkPort() override;

  /// Registers the polling thread with EAL (dpdk::ThreadRegistration).
  void attach_thread() override;

  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override {
    return rx_on(0, idle_reaps_, out, max);
  }
  void rx_release(port::RxFrame* frames, std::uint16_t n) override;
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override;
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override {
    return tx_on(0, idle_reaps_, frames, n);
  }
  /// Queue q of the port (1 to PortOptions::queues - 1).
  std::unique_ptr<port::Port> open_queue(std::uint16_t q) override;
  void tx_free(port::TxFrame& frame) override;
  wire::MacAddr mac() const override { return mac_; }
  std::uint32_t mtu() const override { return mtu_.load(std::memory_order_relaxed); }
  /// For a port on a kernel interface, its carrier; and with follow_mtu
  /// its MTU is read again here (the device asks every 100 ms).
  bool link_up() const override;
  bool offloads_ipv4_checksum() const override { return ipv4_checksum_offload_; }
  std::uint32_t speed_mbps() const override;
  int enable_hardware_pfc(std::uint8_t lossless, std::uint16_t quanta) override;
  /// mbufs (the pool's size), mbufs_free (in it now: with the port idle,
  /// its rings' share only), the ethdev's counters, and rx_chained_dropped
  /// (frames too long for the pool's buffers, dropped).
  void for_each_stat(const StatFn& fn) const override;

  std::uint16_t port_id() const { return port_id_; }

  /// A burst on queue `q`, whose empty polls after a send count down
  /// `idle_reaps` (each queue its own).
  std::uint16_t rx_on(std::uint16_t q, std::uint16_t& idle_reaps, port::RxFrame* out,
                      std::uint16_t max);
  std::uint16_t tx_on(std::uint16_t q, std::uint16_t& idle_reaps, port::TxFrame* frames,
                      std::uint16_t n);

 private:
  DpdkPort() = default;
  /// Registers a program's thread that uses the port, if it may have a
  /// cache (dpdk::kCachedProgramThreads); a thread-local check after that.
  static void attach_program_thread();
  std::uint16_t port_id_ = 0;
  bool owned_ = false;  ///< the ethdev is this port's (no other device's): it closes it
  std::string vdev_;    ///< the vdev's name, removed with the port; "" for a PCI device
  bool ipv4_checksum_offload_ = false;
  /// net_af_xdp: its pool is the kernel's UMEM (af_xdp.h), and what it
  /// sent comes back only through tx_burst.
  bool af_xdp_ = false;
  bool rx_queue_ready_ = false;
  std::uint16_t queues_ = 1;
  /// Empty polls after a send that still reap completions (every 8th).
  static constexpr std::uint16_t kIdleReaps = 1024;
  std::uint16_t idle_reaps_ = 0;
  std::unique_ptr<XdpClaim> xdp_claim_;
  /// net_af_packet keeps its link up whatever the interface does: for it
  /// the interface's carrier (IFF_RUNNING) is the link state, asked of the
  /// kernel through a socket opened in the port's network namespace.
  std::string iface_;
  int ioctl_fd_ = -1;
  std::unique_ptr<port::NetdevShare> netdev_;
  rte_mempool* pool_ = nullptr;
  wire::MacAddr mac_;
  /// The link's MTU now, and the largest the port's buffers and rings
  /// were made for (the MTU it opened with).
  mutable std::atomic<std::uint32_t> mtu_{1500};
  std::uint32_t max_mtu_ = 1500;
  bool follow_mtu_ = false;
  /// Frames that came in more than one mbuf: too long for its buffers.
  std::atomic<std::uint64_t> rx_chained_{0};
};

}  // namespace uroce::dpdk
