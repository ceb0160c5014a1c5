/* SPDX-License-Identifier: BSD-3-Clause */
#include "dpdk/dpdk_port.h"

#include <net/if.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "dpdk/af_xdp.h"
#include "dpdk/eal.h"
#include "log/log.h"
#include "port/params.h"

namespace uroce::dpdk {

namespace {

// Frames carry Ethernet + 802.1Q + the IP packet; an mbuf holds a whole
// frame so the parser sees it contiguous.
constexpr std::uint32_t kL2Overhead = 14 + 4 + 4;

std::string errstr(const char* what, int rc) {
  return std::string(what) + ": " + std::strerror(rc < 0 ? -rc : rc);
}

// The ethdevs this process's ports have open, and the af_xdp vdevs a
// failed setup left plugged (net_af_xdp cannot set such a port up again,
// nor be closed safely). Another device must not take either.
struct Ports {
  std::mutex mu;
  std::set<std::uint16_t> open;
  std::set<std::string> stuck;
};
Ports& ports() {
  static Ports p;
  return p;
}

// How long a memif client waits for its server.
constexpr auto kMemifServerWait = std::chrono::seconds(10);

// net_memif's role is client unless the device says otherwise.
bool is_memif_client(const std::string& device) {
  return device.starts_with("net_memif") && device.find("role=server") == std::string::npos;
}

// Starts a memif client's port and waits for its link. The client
// connects to its server's socket as it starts and fails if no one
// listens there yet; a server that listens but has not started its own
// port yet (it listens from the moment its device exists) answers "ID
// not found" and drops the connection, which net_memif's client does not
// make again. Either way the link stays down: stop, wait a little, and
// start again, until the link is up or the wait is over. Two programs
// started side by side must meet whichever starts first.
int start_memif_client(const DpdkPort& port, std::uint16_t id, const std::string& device) {
  const auto deadline = std::chrono::steady_clock::now() + kMemifServerWait;
  bool said = false;
  for (;;) {
    int rc = rte_eth_dev_start(id);
    if (rc == 0) {
      // The handshake takes a few messages on net_memif's control thread:
      // milliseconds, but a loaded machine may take longer.
      const auto handshake = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (!port.link_up() && std::chrono::steady_clock::now() < handshake)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (port.link_up() || std::chrono::steady_clock::now() >= deadline) return 0;
      rte_eth_dev_stop(id);
      rc = -ENOTCONN;
    }
    if (std::chrono::steady_clock::now() >= deadline) return rc;
    if (!said) {
      log::get().info("port {}: waiting up to {} s for the memif server ({})", id,
                      kMemifServerWait.count(), device);
      said = true;
    }
    // net_memif logs each failed connect: a few lines a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int start_port(const DpdkPort& port, std::uint16_t id, const std::string& device) {
  return is_memif_client(device) ? start_memif_client(port, id, device) : rte_eth_dev_start(id);
}

}  // namespace

std::unique_ptr<DpdkPort> DpdkPort::open(const std::string& device, const PortOptions& opts,
                                         std::string* error) {
  std::uint16_t id;
  const std::string name = device.substr(0, device.find(','));
  {
    std::lock_guard lock(ports().mu);
    if (ports().stuck.count(name)) {
      *error = "'" + name + "' failed to open before and cannot open again in this process";
      return nullptr;
    }
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
    // EAL probed the devices of the configuration it started with; one
    // added later (uroce link add) is plugged in now.
    if (is_pci_address(device)) {
      *error = "no DPDK port for device '" + device + "'";
      return nullptr;
    }
    const std::string vdev = with_vdev_defaults(device);
    const auto comma = vdev.find(',');
    const std::string args = comma == std::string::npos ? "" : vdev.substr(comma + 1);
    if (int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); rc != 0) {
      *error = errstr(("cannot add DPDK device '" + vdev + "'").c_str(), rc);
      return nullptr;
    }
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
      rte_eal_hotplug_remove("vdev", name.c_str());
      *error = "DPDK device '" + vdev + "' is no ethdev";
      return nullptr;
    }
  }
  {
    std::lock_guard lock(ports().mu);
    if (!ports().open.insert(id).second) {
      *error = "'" + name + "' is another device's port";
      return nullptr;
    }
  }
  std::unique_ptr<DpdkPort> p(new DpdkPort());
  p->port_id_ = id;
  p->owned_ = true;
  p->vdev_ = is_pci_address(device) ? "" : name;
  // Netdev mode: the port's packet sockets, open since EAL probed it,
  // filtered as early as can be.
  if (!opts.netdev.empty()) {
    p->netdev_ = port::NetdevShare::open(opts.netdev, error);
    if (!p->netdev_) return nullptr;
    log::get().info("port {}: shares {} with the kernel ({} packet sockets filtered)", id,
                    opts.netdev, p->netdev_->filtered());
  }
  p->iface_ = kernel_iface(device);
  if (!p->iface_.empty()) p->ioctl_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  rte_eth_dev_info info;
  if (int rc = rte_eth_dev_info_get(id, &info); rc != 0) {
    *error = errstr("rte_eth_dev_info_get", rc);
    return nullptr;
  }
  std::uint16_t mtu = 1500;
  rte_eth_dev_get_mtu(id, &mtu);
  if (opts.mtu != 0) mtu = static_cast<std::uint16_t>(opts.mtu);
  p->mtu_ = mtu;
  p->follow_mtu_ = opts.follow_mtu && !p->iface_.empty();

  p->af_xdp_ = is_af_xdp(device);
  std::uint16_t rxd = opts.rx_desc, txd = opts.tx_desc;
  // Each queue's rings and users (an lcore each, with its poll thread's
  // mempool cache) as much as one's.
  const std::uint16_t nq = std::max<std::uint16_t>(opts.queues, 1);
  const unsigned in_caches = kMbufsInCaches + (nq - 1u) * kMbufCacheHold;
  const std::string pool_name = "uroce_pool" + std::to_string(id);
  if (p->af_xdp_) {
    // The XDP program passes ARP and ND to the kernel, which answers for
    // the interface's addresses: only a netdev device has those.
    if (opts.netdev.empty()) {
      *error = "net_af_xdp is the port of a netdev device (netdev = \"" + p->iface_ +
               "\", port = \"af_xdp\"): its XDP program leaves ARP and ND to the kernel";
      return nullptr;
    }
    p->xdp_claim_ = XdpClaim::take(p->iface_, error);
    if (!p->xdp_claim_) return nullptr;
    // The kernel places each frame in one page-sized UMEM chunk: a larger
    // MTU than fits is not the port's (af_xdp.h).
    if (mtu + kL2Overhead > kAfXdpMaxFrame) {
      log::get().warn("port {}: af_xdp takes frames of at most {} bytes: MTU {}, not {}", id,
                      kAfXdpMaxFrame, kAfXdpMaxFrame - kL2Overhead, mtu);
      p->mtu_ = kAfXdpMaxFrame - kL2Overhead;
    }
    rxd = txd = kAfXdpDesc;
    const unsigned n = nq * std::max(kAfXdpMbufs, 2u * kAfXdpDesc + port::kPoolSpare) + in_caches;
    p->pool_ = af_xdp_pool(pool_name, n, static_cast<int>(rte_eth_dev_socket_id(id)), error);
    if (!p->pool_) {
      *error = "cannot create the af_xdp mbuf pool: " + *error;
      return nullptr;
    }
  } else {
    // Whole frames plus a kilobyte: net_af_packet wants room for its own
    // frame header beside the largest frame (framesz=9216 on a 9000 MTU).
    std::uint32_t room = std::max<std::uint32_t>(RTE_MBUF_DEFAULT_DATAROOM,
                                                 ((mtu + kL2Overhead + 1023) / 1024 + 1) * 1024);
    // net_memif sends a frame in one of its buffers only if an mbuf holds
    // no more than one (eal.h, kMemifBufferSize).
    if (const std::uint32_t bsize = memif_buffer_size(with_vdev_defaults(device)); bsize != 0) {
      if (mtu + kL2Overhead > bsize) {
        *error = "net_memif's bsize=" + std::to_string(bsize) + " cannot hold a frame of MTU " +
                 std::to_string(mtu) + ": set bsize to at least " +
                 std::to_string(mtu + kL2Overhead);
        return nullptr;
      }
      room = std::min(room, bsize);
      // The client's buffers carry both directions, and a server sends a
      // frame into one whole, trusting it to be as large as its own. Said
      // at info level: the client is most often uroce, whose buffers are.
      if (!is_memif_client(device) && mtu + kL2Overhead > kMemifDefaultBufferSize) {
        log::get().info(
            "port {}: a memif server at MTU {} sends frames of up to {} bytes into its "
            "client's buffers, which must hold them (bsize={} or more, as uroce's do; "
            "DPDK's and VPP's default of {} does not)",
            id, mtu, mtu + kL2Overhead, bsize, kMemifDefaultBufferSize);
      }
    }
    // Beyond its rings, the pool has a buffer for every frame its users
    // may hold (port/params.h) and what the threads' caches may hold.
    const unsigned n = nq * (opts.rx_desc + opts.tx_desc + port::kPoolSpare) + in_caches;
    p->pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), n, kMbufCache, 0,
                                       static_cast<std::uint16_t>(room + RTE_PKTMBUF_HEADROOM),
                                       static_cast<int>(rte_eth_dev_socket_id(id)));
    if (!p->pool_) {
      *error = "cannot create the mbuf pool (" + std::to_string(n) + " mbufs of " +
               std::to_string(room) + " bytes): " + rte_strerror(rte_errno);
      return nullptr;
    }
  }
  track_pool(p->pool_);
  // Tell the port the MTU only if it can take it: net_af_packet in DPDK
  // 22.11 claims 1518-byte frames whatever its framesz allows, yet passes
  // jumbo frames once the mbufs are large enough. net_af_xdp would set
  // the kernel interface's MTU, which is the kernel's.
  const bool port_takes_mtu = !p->af_xdp_ && opts.mtu != 0 && opts.mtu + 18 <= info.max_rx_pktlen;
  rte_eth_conf conf{};
  if (port_takes_mtu) conf.rxmode.mtu = opts.mtu;
  // IPv4 header checksums in the NIC when it offers to: one header sum
  // less per packet.
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    p->ipv4_checksum_offload_ = true;
  }
  if (nq > info.max_rx_queues || nq > info.max_tx_queues) {
    *error = "lcores = " + std::to_string(nq) + ": " + device + " has " +
             std::to_string(std::min(info.max_rx_queues, info.max_tx_queues)) +
             " queue(s) (net_af_packet: qpairs=; net_af_xdp: queue_count=)";
    return nullptr;
  }
  if (nq > 1 && (info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP)) != 0) {
    // The NIC spreads flows over the queues by their addresses and UDP
    // ports: a RoCE flow's source port is its QP's, so each QP's packets
    // keep to one queue. Without RSS (memif, af_packet) the peer or the
    // kernel spreads them.
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf =
        info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
  }
  if (int rc = rte_eth_dev_configure(id, nq, nq, &conf); rc != 0) {
    *error = errstr("rte_eth_dev_configure", rc);
    return nullptr;
  }
  p->queues_ = nq;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
  const int socket = rte_eth_dev_socket_id(id);
  if (p->xdp_claim_) p->xdp_claim_->setting_up();
  int rx_rc = 0;
  for (std::uint16_t q = 0; q < nq && rx_rc == 0; ++q)
    rx_rc = rte_eth_rx_queue_setup(id, q, rxd, socket, nullptr, p->pool_);
  // What the setup attached and opened, even when it failed halfway: the
  // claim gives it back with the port.
  if (p->xdp_claim_) p->xdp_claim_->attached();
  if (rx_rc != 0) {
    *error = errstr("rte_eth_rx_queue_setup", rx_rc);
    return nullptr;
  }
  p->rx_queue_ready_ = true;
  for (std::uint16_t q = 0; q < nq; ++q) {
    if (int rc = rte_eth_tx_queue_setup(id, q, txd, socket, nullptr); rc != 0) {
      *error = errstr("rte_eth_tx_queue_setup", rc);
      return nullptr;
    }
  }
  if (port_takes_mtu) rte_eth_dev_set_mtu(id, static_cast<std::uint16_t>(opts.mtu));
  if (int rc = start_port(*p, id, device); rc != 0) {
    *error = errstr("rte_eth_dev_start", rc);
    return nullptr;
  }
  if (p->netdev_) {
    // What the sockets took before their filter was on is the kernel's
    // traffic (a RoCE frame among it is resent by its sender).
    rte_mbuf* m[32];
    for (std::uint16_t q = 0; q < nq; ++q) {
      for (std::uint16_t n; (n = rte_eth_rx_burst(id, q, m, 32)) != 0;) rte_pktmbuf_free_bulk(m, n);
    }
  }
  // Multicast groups come and go with the QPs' attachments; the NIC lets
  // every group's frames in and the engine keeps those of groups its QPs
  // joined (engine/mcast_groups.h). Ports without the filter (af_packet,
  // memif, ring) pass every frame anyway.
  if (int rc = rte_eth_allmulticast_enable(id); rc != 0 && rc != -ENOTSUP)
    log::get().warn("port {}: rte_eth_allmulticast_enable: {}", id, rte_strerror(-rc));
  p->max_mtu_ = p->mtu_;
  rte_ether_addr mac;
  rte_eth_macaddr_get(id, &mac);
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), p->mac_.bytes.begin());
  log::get().info("port {} ({}): MAC {}, MTU {}, {} Mb/s, link {}, IPv4 checksum {}", id, device,
                  p->mac_.to_string(), p->mtu(), p->speed_mbps(), p->link_up() ? "up" : "down",
                  p->ipv4_checksum_offload_ ? "offloaded" : "in software");
  return p;
}

DpdkPort::~DpdkPort() {
  if (ioctl_fd_ >= 0) close(ioctl_fd_);
  if (!owned_) return;
  // net_af_xdp's close takes whatever program is on the interface off
  // it: without the claim, or when its queue setup failed (another
  // program may have taken the hook meanwhile), that may be another's. A
  // failed setup also leaves the PMD's queue pointing at memory it freed,
  // which its close would touch. Such a port is left as it is (the claim
  // takes uroce's own program off by its id).
  const bool close = !af_xdp_ || (xdp_claim_ && rx_queue_ready_);
  if (close) {
    rte_eth_dev_stop(port_id_);
    rte_eth_dev_close(port_id_);
    // The vdev too, so that a device of the same name may open again
    // (uroce link delete, then add).
    if (!vdev_.empty()) rte_eal_hotplug_remove("vdev", vdev_.c_str());
  }
  // The program off the interface before its memory goes.
  xdp_claim_.reset();
  if (pool_) {
    untrack_pool(pool_);
    rte_mempool_free(pool_);
  }
  std::lock_guard lock(ports().mu);
  ports().open.erase(port_id_);
  if (!close) ports().stuck.insert(vdev_);
}

void DpdkPort::attach_thread() {
  // The registration lasts as long as the thread: an lcore id, and with it
  // per-thread mempool caches for every mbuf the port takes and gives back.
  static thread_local const ThreadRegistration lcore(ThreadRegistration::Owner::kUroce);
}

void DpdkPort::attach_program_thread() {
  // A program's thread that drives the engine (its post_send and poll_cq)
  // takes and gives back as many mbufs as the poll thread: without a cache
  // each is a compare-and-swap on the pool's ring, 13 % of two streaming
  // perftest processes' time over net_memif. A thread already registered
  // (the poll thread, EAL's own) is left as it is; one refused because
  // every slot was taken tries again on its next burst, as threads end.
  static thread_local std::optional<ThreadRegistration> lcore;
  if (lcore && lcore->registered()) return;
  if (rte_lcore_id() != LCORE_ID_ANY) return;
  lcore.emplace(ThreadRegistration::Owner::kProgram);
}

namespace {

// Queue q of a DpdkPort, as lcore q of a device sees it: the queue's own
// bursts, the rest the port's.
class DpdkQueue final : public port::Port {
 public:
  DpdkQueue(DpdkPort& port, std::uint16_t q) : port_(port), q_(q) {}
  void attach_thread() override { port_.attach_thread(); }
  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override {
    return port_.rx_on(q_, idle_reaps_, out, max);
  }
  void rx_release(port::RxFrame* frames, std::uint16_t n) override { port_.rx_release(frames, n); }
  bool offloads_ipv4_checksum() const override { return port_.offloads_ipv4_checksum(); }
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override {
    return port_.tx_alloc(size, out);
  }
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override {
    return port_.tx_on(q_, idle_reaps_, frames, n);
  }
  void tx_free(port::TxFrame& frame) override { port_.tx_free(frame); }
  wire::MacAddr mac() const override { return port_.mac(); }
  std::uint32_t mtu() const override { return port_.mtu(); }
  bool link_up() const override { return port_.link_up(); }
  std::uint32_t speed_mbps() const override { return port_.speed_mbps(); }

 private:
  DpdkPort& port_;
  const std::uint16_t q_;
  std::uint16_t idle_reaps_ = 0;
};

}  // namespace

std::unique_ptr<port::Port> DpdkPort::open_queue(std::uint16_t q) {
  if (q == 0 || q >= queues_) return nullptr;
  return std::make_unique<DpdkQueue>(*this, q);
}

std::uint16_t DpdkPort::rx_on(std::uint16_t q, std::uint16_t& idle_reaps, port::RxFrame* out,
                              std::uint16_t max) {
  attach_program_thread();
  rte_mbuf* m[port::kRxBurst];
  const std::uint16_t n = rte_eth_rx_burst(port_id_, q, m, std::min(max, port::kRxBurst));
  if (n == 0 && af_xdp_ && idle_reaps != 0) {
    // net_af_xdp takes back sent mbufs from the completion ring only in
    // tx_burst: when the sending stops, empty bursts reap them (a NIC may
    // complete a while after the send), or they stay in the ring.
    if (--idle_reaps % 8 == 0) rte_eth_tx_burst(port_id_, q, nullptr, 0);
  }
  std::uint16_t k = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (m[i]->nb_segs != 1) {
      // Chained mbufs: the pool is sized for whole frames, so only a
      // frame too long for its buffers (longer than the MTU) gets here.
      rx_chained_.fetch_add(1, std::memory_order_relaxed);
      rte_pktmbuf_free(m[i]);
      continue;
    }
    out[k].data = wire::ConstBytes(rte_pktmbuf_mtod(m[i], const std::uint8_t*), m[i]->data_len);
    out[k].handle = m[i];
    ++k;
  }
  return k;
}

void DpdkPort::rx_release(port::RxFrame* frames, std::uint16_t n) {
  rte_mbuf* m[port::kRxBurst];
  for (std::uint16_t done = 0; done < n;) {
    const auto k = std::min<std::uint16_t>(n - done, port::kRxBurst);
    for (std::uint16_t i = 0; i < k; ++i) m[i] = static_cast<rte_mbuf*>(frames[done + i].handle);
    rte_pktmbuf_free_bulk(m, k);
    done += k;
  }
}

bool DpdkPort::tx_alloc(std::uint32_t size, port::TxFrame& out) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) return false;
  if (size > rte_pktmbuf_tailroom(m)) {
    rte_pktmbuf_free(m);
    return false;
  }
  out.room = wire::Bytes(rte_pktmbuf_mtod(m, std::uint8_t*), rte_pktmbuf_tailroom(m));
  out.length = 0;
  out.handle = m;
  return true;
}

std::uint16_t DpdkPort::tx_on(std::uint16_t q, std::uint16_t& idle_reaps, port::TxFrame* frames,
                              std::uint16_t n) {
  attach_program_thread();
  rte_mbuf* m[port::kMaxTxBurst];
  n = std::min(n, port::kMaxTxBurst);
  for (std::uint16_t i = 0; i < n; ++i) {
    m[i] = static_cast<rte_mbuf*>(frames[i].handle);
    m[i]->data_len = static_cast<std::uint16_t>(frames[i].length);
    m[i]->pkt_len = frames[i].length;
    if (frames[i].ipv4_checksum_offload) {
      m[i]->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
      m[i]->l2_len = frames[i].l2_len;
      m[i]->l3_len = 20;
    }
  }
  const std::uint16_t sent = rte_eth_tx_burst(port_id_, q, m, n);
  if (sent != 0) idle_reaps = kIdleReaps;
  return sent;
}

void DpdkPort::tx_free(port::TxFrame& frame) {
  rte_pktmbuf_free(static_cast<rte_mbuf*>(frame.handle));
  frame.handle = nullptr;
}

bool DpdkPort::link_up() const {
  if (ioctl_fd_ >= 0 && iface_.size() < IFNAMSIZ) {
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, iface_.data(), iface_.size());
    if (follow_mtu_ && ioctl(ioctl_fd_, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) {
      // As rxe follows its netdev (NETDEV_CHANGEMTU): QPs made from now on
      // get a path MTU that fits. Larger than the port opened with, its
      // buffers cannot hold the frames: reopen the device for that.
      const auto want = std::min<std::uint32_t>(static_cast<std::uint32_t>(ifr.ifr_mtu), max_mtu_);
      if (const auto was = mtu_.exchange(want, std::memory_order_relaxed); was != want) {
        log::get().info("port {}: {}'s MTU is {}, the port's {}", port_id_, iface_, ifr.ifr_mtu,
                        want);
        if (want < static_cast<std::uint32_t>(ifr.ifr_mtu))
          log::get().warn(
              "port {}: frames of {}'s MTU {} do not fit the port's buffers (made "
              "for {}); reopen the device for it",
              port_id_, iface_, ifr.ifr_mtu, max_mtu_);
      }
    }
    if (ioctl(ioctl_fd_, SIOCGIFFLAGS, &ifr) == 0) return (ifr.ifr_flags & IFF_RUNNING) != 0;
  }
  rte_eth_link link{};
  rte_eth_link_get_nowait(port_id_, &link);
  return link.link_status == RTE_ETH_LINK_UP;
}

std::uint32_t DpdkPort::speed_mbps() const {
  rte_eth_link link{};
  rte_eth_link_get_nowait(port_id_, &link);
  return link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
}

void DpdkPort::for_each_stat(const StatFn& fn) const {
  fn("mbufs", pool_->size);
  fn("mbufs_free", rte_mempool_avail_count(pool_));
  rte_eth_stats st{};
  if (rte_eth_stats_get(port_id_, &st) != 0) return;
  fn("ipackets", st.ipackets);
  fn("opackets", st.opackets);
  fn("imissed", st.imissed);  // the ring was full (af_xdp: the kernel's drops too)
  fn("ierrors", st.ierrors);
  fn("oerrors", st.oerrors);  // frames the port took and could not send
  fn("rx_nombuf", st.rx_nombuf);
  fn("rx_chained_dropped", rx_chained_.load(std::memory_order_relaxed));
}

int DpdkPort::enable_hardware_pfc(std::uint8_t lossless, std::uint16_t quanta) {
  // Few PMDs implement PFC (in 22.11: i40e, ixgbe, hns3, axgbe, enic,
  // txgbe; not mlx5, not the virtual ones); the rest say -ENOTSUP and
  // uroce runs PFC itself. The NIC's own buffer thresholds apply: 0
  // water marks leave them at the PMD's defaults.
  for (unsigned p = 0; p < 8; ++p) {
    if (!(lossless & (1u << p))) continue;
    rte_eth_pfc_conf conf{};
    conf.fc.mode = RTE_ETH_FC_FULL;
    conf.fc.pause_time = quanta;
    conf.fc.send_xon = 1;
    conf.priority = static_cast<std::uint8_t>(p);
    if (const int rc = rte_eth_dev_priority_flow_ctrl_set(port_id_, &conf); rc != 0) return rc;
  }
  return 0;
}

}  // namespace uroce::dpdk
