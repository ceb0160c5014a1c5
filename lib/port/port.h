/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A network port as its users see it (the engine, the lab switch, the
// fault decorator): bursts of frames in and out, and the link's identity
// and state. drivers/dpdk implements it over an ethdev; tests implement it
// over memory (never bypassing the engine). It sits below every user, so
// that drivers/dpdk and lib/switch need nothing of lib/engine.

#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "wire/bytes.h"
#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::port {

/// A received frame, valid until the port releases it.
struct RxFrame {
  wire::ConstBytes data;
  void* handle = nullptr;  ///< the port's buffer (an mbuf)
};

/// A frame being built for transmission.
struct TxFrame {
  wire::Bytes room;          ///< writable space; the frame starts at room[0]
  std::uint32_t length = 0;  ///< bytes written
  void* handle = nullptr;
  /// The port fills in the IPv4 header checksum (offloads_ipv4_checksum):
  /// the IPv4 header starts at l2_len.
  bool ipv4_checksum_offload = false;
  std::uint8_t l2_len = 14;
};

/// One thread at a time calls a port: the loop of its user.
class Port {
 public:
  virtual ~Port() = default;

  /// Called once by a thread that is about to poll the port, before it
  /// does: a DPDK port registers the thread with EAL here (per-thread
  /// mempool caches).
  virtual void attach_thread() {}

  /// Receives up to `max` frames (at most kRxBurst, port/params.h). Each
  /// must be given back with rx_release.
  /// Whether rx_burst may return fewer frames than asked while more wait
  /// (a decorator that keeps room for what it adds); a plain port's short
  /// burst means its ring is empty.
  virtual bool short_bursts() const { return false; }
  virtual std::uint16_t rx_burst(RxFrame* out, std::uint16_t max) = 0;
  /// Whether the port computes IPv4 header checksums of frames marked
  /// ipv4_checksum_offload (a NIC's offload).
  virtual bool offloads_ipv4_checksum() const { return false; }
  virtual void rx_release(RxFrame* frames, std::uint16_t n) = 0;

  /// A buffer for one frame of up to `size` bytes; false when the pool is
  /// empty.
  virtual bool tx_alloc(std::uint32_t size, TxFrame& out) = 0;
  /// Sends frames (their `length` set); returns how many the port took, at
  /// most kMaxTxBurst (port/params.h). The rest stay the caller's, to
  /// retry or free with tx_free.
  virtual std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) = 0;
  virtual void tx_free(TxFrame& frame) = 0;

  /// The port's queue `q` (1 and up; the port itself is queue 0) as a
  /// Port of its own, for a device whose engine runs on several lcores
  /// (engine/handoff.h): a receive and a transmit queue of its own,
  /// polled by its own thread, on the port's link, MAC and buffers. It
  /// must go before the port does. Null when the port has no queue `q`
  /// (it was opened with fewer; most ports have one).
  virtual std::unique_ptr<Port> open_queue(std::uint16_t q) {
    (void)q;
    return nullptr;
  }

  virtual wire::MacAddr mac() const = 0;
  /// The link MTU (IP packet size), which bounds the IB path MTU.
  virtual std::uint32_t mtu() const = 0;
  virtual bool link_up() const = 0;
  /// Link speed in Mb/s, 0 when unknown.
  virtual std::uint32_t speed_mbps() const = 0;

  /// The port's own statistics by name, counters and gauges (a DPDK
  /// port's mbufs and its ethdev's counters); none by default.
  using StatFn = std::function<void(std::string_view name, std::uint64_t value)>;
  virtual void for_each_stat(const StatFn& fn) const { (void)fn; }

  /// Hands PFC of the priorities in `lossless` to the NIC, which then
  /// pauses its partner at its own buffer's thresholds and honours the
  /// partner's pauses (rte_eth_dev_priority_flow_ctrl_set). Returns 0, or
  /// a negative errno (-ENOTSUP: the NIC has no PFC; uroce does it).
  virtual int enable_hardware_pfc(std::uint8_t lossless, std::uint16_t quanta) {
    (void)lossless;
    (void)quanta;
    return -ENOTSUP;
  }

  /// Whether the port is the device daemon's, shared by the programs of
  /// the host (lib/daemon): the daemon answers ARP, neighbour discovery
  /// and ping for the device, and owns its QPN space; a frame to one of
  /// the device's addresses may be for a QP of another program, which the
  /// daemon delivers.
  virtual bool shared() const { return false; }
  /// A QPN unique on the host, from the daemon of a shared port; 0 when
  /// none can be had (the daemon is gone, or has none left).
  virtual std::uint32_t alloc_qpn() { return 0; }
  virtual void free_qpn(std::uint32_t qpn) { (void)qpn; }
  /// Whether the port is lost for good (its daemon exited): the device is
  /// then in error, as after a NIC's fatal error.
  virtual bool failed() const { return false; }
  /// The ServiceIDs the program's connection manager listens on, for the
  /// daemon of a shared port: it hands each connection request to the
  /// program that listens on its ServiceID (as the kernel's one CM does
  /// for every process of a host).
  virtual void set_cm_services(const std::vector<std::uint64_t>& service_ids) { (void)service_ids; }
  /// A port the program's connection manager binds, for the daemon of a
  /// shared port, which keeps the host's port spaces (the kernel's one
  /// bind list per port): `key` names the binding (an rdma_cm id; binding
  /// it again changes its terms), `service_id` the port space and port,
  /// `ip` the address. 0 when no other program's binding stands in the
  /// way, else EADDRINUSE or EADDRNOTAVAIL as cma_check_port decides. A
  /// port of its own has no other program: always 0.
  enum CmBindFlags : unsigned {
    kCmBindAny = 1,        ///< `ip` is the any (or a loopback) address
    kCmBindReuseAddr = 2,  ///< RDMA_OPTION_ID_REUSEADDR
    kCmBindAfOnly = 4,     ///< RDMA_OPTION_ID_AFONLY
    kCmBindEphemeral = 8,  ///< a port the CM picked: nobody else may hold it
  };
  virtual int bind_cm_port(std::uint32_t key, std::uint64_t service_id, const wire::IpAddr& ip,
                           unsigned flags) {
    (void)key;
    (void)service_id;
    (void)ip;
    (void)flags;
    return 0;
  }
  virtual void unbind_cm_port(std::uint32_t key) { (void)key; }

  /// XRC domains shared between the programs of a host, through the
  /// daemon of a shared port (verbs/xrcd.h). The host's domain of the
  /// file `fd` is open on, opened once more for this program (`oflags`:
  /// O_CREAT, O_EXCL): its number, or 0 when the port shares none (the
  /// domain is then the program's own); -EINVAL as ibv_open_xrcd fails.
  virtual std::int64_t open_xrc_domain(int fd, int oflags) {
    (void)fd;
    (void)oflags;
    return 0;
  }
  virtual void close_xrc_domain(std::uint32_t domain) { (void)domain; }
  /// Requests naming the XRC SRQ `srqn` (a QPN of this program's) of
  /// `domain` come to this program, whichever target QP they are for.
  /// False when the daemon refused (or is gone).
  virtual bool add_xrc_srq(std::uint32_t domain, std::uint32_t srqn) {
    (void)domain;
    (void)srqn;
    return true;
  }
  virtual void remove_xrc_srq(std::uint32_t srqn) { (void)srqn; }
  /// The shared responder block of XRC target QP `qpn` of `domain` (0:
  /// any domain this program has open, written back), made with `create`
  /// for a QPN of this program's: a descriptor to map, or -errno.
  virtual int open_xrc_target(std::uint32_t* domain, std::uint32_t qpn, bool create) {
    (void)domain;
    (void)qpn;
    (void)create;
    return -EOPNOTSUPP;
  }
  /// The target QP this program made is gone.
  virtual void close_xrc_target(std::uint32_t qpn) { (void)qpn; }
};

}  // namespace uroce::port
