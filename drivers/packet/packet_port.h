/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A uroce Port on a Linux packet socket of its own, for a veth or any
// kernel interface uroce has to itself: port = "packet:<iface>".
//
// Why not DPDK's net_af_packet: it pays the kernel's per-frame cost (an
// skb, veth_xmit, the peer's netif_rx and tpacket_rcv) for every RoCE
// packet, where kernel TCP hands a veth 64 KiB segments. This port asks
// for virtio-net headers on its socket (PACKET_VNET_HDR) and sends each
// run of a flow's packets as one UDP GSO super-frame (udp_gso.h), one skb
// for up to 64 packets; it splits the super-frames it receives. The
// kernel segments super-frames for a peer that needs single frames (a
// NIC without USO, a bridge to one, the IP stack of a kernel peer such as
// rxe), but nothing segments them on a veth: a peer on the other end of a
// veth must be this port too (or the kernel), not a DPDK port. `gso =
// false` (packet:<iface>,gso=off) sends single frames only.
//
// Receive: a TPACKET_V2 ring of 64 KiB slots (a super-frame fits one),
// each frame copied out into a buffer of the port's pool, as
// net_af_packet copies into an mbuf, so that the ring turns over while
// the engine holds frames. Send: sendmmsg from the pool's buffers (the
// kernel copies them into the skbs), one message per super-frame or
// frame, through the interface's queueing discipline.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "port/netdev_share.h"
#include "port/port.h"

namespace uroce::packet {

struct PacketPortOptions {
  std::string iface;
  bool gso = true;
  /// The MTU this port works with; 0: the interface's, followed while the
  /// port runs (read in link_up()).
  std::uint32_t mtu = 0;
  /// Netdev mode: the interface is the kernel's too (port/netdev_share.h).
  bool netdev = false;
};

/// Parses "packet:<iface>[,gso=on|off]"; false with *error naming what is
/// wrong.
bool parse_port(const std::string& port, PacketPortOptions* out, std::string* error);

class PacketPort : public port::Port {
 public:
  static std::unique_ptr<PacketPort> open(const PacketPortOptions& opts, std::string* error);
  ~PacketPort() override;
  PacketPort(const PacketPort&) = delete;
  PacketPort& operator=(const PacketPort&) = delete;

  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override;
  void rx_release(port::RxFrame* frames, std::uint16_t n) override;
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override;
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override;
  void tx_free(port::TxFrame& frame) override;

  wire::MacAddr mac() const override { return mac_; }
  std::uint32_t mtu() const override { return mtu_.load(std::memory_order_relaxed); }
  /// The interface's carrier (IFF_RUNNING); its MTU is read again here
  /// unless the configuration set one.
  bool link_up() const override;
  std::uint32_t speed_mbps() const override { return speed_mbps_; }
  /// buffers and buffers_free (the pool), rx/tx frames and super-frames,
  /// segments, drops (see docs/counters.md).
  void for_each_stat(const StatFn& fn) const override;

  /// Buffers in the pool: what the engine holds at most (port::kPoolSpare)
  /// and a receive burst.
  static constexpr std::uint32_t kBuffers = 8192;
  /// A buffer: the largest frame of the largest MTU uroce takes (9600),
  /// with an 802.1Q tag.
  static constexpr std::uint32_t kBufferSize = 9728;
  /// The receive ring: 512 slots of 64 KiB, two to a 128 KiB block.
  static constexpr std::uint32_t kRingFrameSize = 1u << 16;
  static constexpr std::uint32_t kRingBlockSize = 1u << 17;
  static constexpr std::uint32_t kRingFrames = 512;

 private:
  PacketPort() = default;
  std::uint8_t* alloc_buffer();
  void free_buffer(void* handle);
  /// Copies the ring slot's frame, split if a super-frame, into `out`;
  /// false when the pool or `out` ran out first (segment_ says where to
  /// go on).
  bool take_slot(void* slot, port::RxFrame* out, std::uint16_t max, std::uint16_t* got);
  void release_slot(void* slot);

  int fd_ = -1;
  int ioctl_fd_ = -1;
  std::string iface_;
  bool gso_ = true;
  bool follow_mtu_ = false;
  wire::MacAddr mac_;
  std::uint32_t speed_mbps_ = 0;
  mutable std::atomic<std::uint32_t> mtu_{1500};

  std::unique_ptr<port::NetdevShare> netdev_;

  std::uint8_t* ring_ = nullptr;
  std::size_t ring_bytes_ = 0;
  std::uint32_t rx_head_ = 0;
  std::uint32_t segment_ = 0;  ///< next segment of a super-frame split partway

  std::uint8_t* pool_ = nullptr;
  std::size_t pool_bytes_ = 0;
  std::vector<std::uint8_t*> free_;
  std::atomic<std::uint32_t> free_count_{0};

  struct Stats {
    std::atomic<std::uint64_t> rx_frames{0};
    std::atomic<std::uint64_t> rx_super_frames{0};
    std::atomic<std::uint64_t> rx_segments{0};
    std::atomic<std::uint64_t> rx_dropped{0};
    std::atomic<std::uint64_t> rx_nobuf{0};
    std::atomic<std::uint64_t> tx_frames{0};
    std::atomic<std::uint64_t> tx_super_frames{0};
    std::atomic<std::uint64_t> tx_segments{0};
    std::atomic<std::uint64_t> tx_busy{0};
    std::atomic<std::uint64_t> tx_gso_refused{0};
    std::atomic<std::uint64_t> tx_dropped{0};
    mutable std::atomic<std::uint64_t> ring_drops{0};
  };
  Stats stats_;
};

}  // namespace uroce::packet
