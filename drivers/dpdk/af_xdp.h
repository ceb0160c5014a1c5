/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What a port on net_af_xdp needs beyond any ethdev's setup: DPDK 22.11's
// PMD hands the kernel the mbuf pool itself as the socket's UMEM, so the
// pool's geometry is the kernel's business (docs/netdev-mode.md).
//
// - The PMD registers populated_size x object size bytes from the pool's
//   first object, as if the objects lay back to back (fixed in 24.07). A
//   pktmbuf pool on 4 KiB pages (--no-huge) keeps each object inside one
//   page instead, and the pool's top sixth then lies outside the UMEM:
//   the kernel drops every frame sent from there and every fill entry
//   pointing there, and traffic stalls after about a thousand frames.
//   The pool here packs its objects in one chunk (no IOVA contiguity is
//   asked for: the kernel copies on a veth and maps the UMEM itself).
// - A UMEM chunk is at most a page: an object (header, mbuf, headroom and
//   data room) of 4032 bytes, 63 cache lines, with room for the kernel's
//   own 256-byte XDP headroom before each received frame.

#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace uroce::dpdk {

/// Whether `device` is a net_af_xdp vdev.
bool is_af_xdp(const std::string& device);

/// The mbufs' data room (RTE_PKTMBUF_HEADROOM included): an object of
/// 4032 bytes.
inline constexpr std::uint16_t kAfXdpDataRoom = 3840;
/// The largest frame the kernel can place in one (XDP_PACKET_HEADROOM
/// before it): 3456 bytes, so a link MTU of at most 3434 with a VLAN tag.
inline constexpr std::uint32_t kAfXdpMaxFrame = kAfXdpDataRoom - RTE_PKTMBUF_HEADROOM - 256;
/// Descriptors of each ring: the PMD puts 2048 buffers in the fill ring
/// whatever is asked, and a burst of a window's frames lands in the RX
/// ring before uroce's thread runs (on a veth the sender's send() runs
/// the receiver's XDP program).
inline constexpr std::uint16_t kAfXdpDesc = 2048;
/// Mbufs: the PMD's fill, RX, TX and completion rings hold up to 8192.
inline constexpr unsigned kAfXdpMbufs = 16384;

/// A pktmbuf pool of `n` mbufs whose objects the PMD's UMEM covers; null
/// with *error when it cannot be made so.
rte_mempool* af_xdp_pool(const std::string& name, unsigned n, int socket, std::string* error);

/// `vdev` with what net_af_xdp needs and the user left out: one queue
/// (start_queue=0, queue_count=1; a veth has one) and uroce's XDP program
/// (xdp_prog=, roce_xdp.bpf.c), which takes only RoCE and MAC control
/// frames off the interface.
std::string af_xdp_vdev_defaults(const std::string& vdev);

/// Where uroce's XDP program is: in the build tree, else installed.
std::string af_xdp_program();

/// This process's hold on an interface's XDP hook. net_af_xdp attaches
/// the program through netlink, where it outlives the process: a program
/// that exits without closing its port, or dies, leaves it behind, and
/// the next one could not attach its own. So the hook is claimed with an
/// abstract Unix socket name (@uroce-xdp-<ifindex>, of the network
/// namespace) that the kernel lets go when the process ends: uroce's
/// program on an unclaimed interface is a dead process's, and is taken
/// off; the claim takes its own off when the port closes or the process
/// exits.
class XdpClaim {
 public:
  /// Claims the XDP hook of `iface` (in this network namespace) for a
  /// port about to open on it; null with *error when another live uroce
  /// program holds it or another program is attached.
  static std::unique_ptr<XdpClaim> take(const std::string& iface, std::string* error);
  /// Takes uroce's program off the interface, if it is still the one
  /// attached, and lets the claim go.
  ~XdpClaim();
  XdpClaim(const XdpClaim&) = delete;
  XdpClaim& operator=(const XdpClaim&) = delete;

  /// Called before net_af_xdp's queue setup, which makes the socket.
  void setting_up();
  /// Remembers the program net_af_xdp attached and the AF_XDP sockets it
  /// opened (after its queue setup).
  void attached();

 private:
  XdpClaim(int lock_fd, int ifindex, std::string path);
  void detach();
  friend void detach_claims_at_exit();

  int lock_fd_;
  int ifindex_;
  int owner_;         ///< the pid that claimed: a forked child detaches nothing
  std::string path_;  ///< the abstract name held
  std::uint32_t prog_id_ = 0;
  /// The AF_XDP sockets (descriptor, inode) the queue setup opened: with
  /// DPDK 22.11 and libxdp 1.3 the UMEM's own socket outlives the port's
  /// close, keeping the queue bound (a port opened on it again gets
  /// EBUSY), so the claim closes what is left of them.
  std::vector<std::pair<int, unsigned long>> sockets_before_, sockets_;
};

}  // namespace uroce::dpdk
