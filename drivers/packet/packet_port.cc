/* SPDX-License-Identifier: BSD-3-Clause */
#include "packet/packet_port.h"

#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "log/log.h"
#include "packet/udp_gso.h"
#include "port/params.h"
#include "wire/ethernet.h"

namespace uroce::packet {

namespace {

// The virtio-net header a PACKET_VNET_HDR socket puts before each frame
// (struct virtio_net_hdr, virtio 1.2 5.1.6, in host byte order on a
// packet socket). Spelt out here: <linux/virtio_net.h> is not valid C++,
// and older headers lack the UDP GSO type (Linux 6.2).
struct VirtioNetHdr {
  std::uint8_t flags;
  std::uint8_t gso_type;
  std::uint16_t hdr_len;
  std::uint16_t gso_size;
  std::uint16_t csum_start;
  std::uint16_t csum_offset;
};
static_assert(sizeof(VirtioNetHdr) == 10);
constexpr std::uint8_t kNeedsCsum = 1;  // kNeedsCsum
constexpr std::uint8_t kGsoNone = 0;    // kGsoNone
constexpr std::uint8_t kGsoUdpL4 = 5;   // kGsoUdpL4
constexpr std::uint8_t kGsoEcn = 0x80;  // VIRTIO_NET_HDR_GSO_ECN

constexpr std::uint32_t kMaxMtu = 9600;
// The send buffer a burst of super-frames needs in flight: 64 of 64 KiB.
constexpr int kSendBuffer = 8 << 20;

static_assert(PacketPort::kRingFrameSize >=
                  kMaxSuperFrame + TPACKET2_HDRLEN + sizeof(VirtioNetHdr) + 64,
              "a super-frame fits one ring slot");
static_assert(PacketPort::kRingBlockSize % PacketPort::kRingFrameSize == 0);
static_assert(PacketPort::kBufferSize >= kMaxMtu + wire::EthHdr::kSize + 4);
static_assert(PacketPort::kBuffers >= port::kPoolSpare + port::kRxBurst + port::kMaxTxBurst,
              "the pool holds what the engine keeps and a burst each way");

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

bool set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof(value)) == 0;
}

bool iface_request(int fd, const std::string& iface, unsigned long request, ifreq* ifr) {
  std::memset(ifr, 0, sizeof(*ifr));
  std::memcpy(ifr->ifr_name, iface.data(), std::min<std::size_t>(iface.size(), IFNAMSIZ - 1));
  return ioctl(fd, request, ifr) == 0;
}

std::uint32_t link_speed(int fd, const std::string& iface) {
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::memcpy(ifr.ifr_name, iface.data(), std::min<std::size_t>(iface.size(), IFNAMSIZ - 1));
  ifr.ifr_data = reinterpret_cast<char*>(&cmd);
  if (ioctl(fd, SIOCETHTOOL, &ifr) != 0) return 0;
  const std::uint32_t speed = ethtool_cmd_speed(&cmd);
  return speed == static_cast<std::uint32_t>(SPEED_UNKNOWN) ? 0 : speed;
}

}  // namespace

bool parse_port(const std::string& port, PacketPortOptions* out, std::string* error) {
  constexpr std::string_view kPrefix = "packet:";
  if (!port.starts_with(kPrefix)) {
    *error = "not a packet port: " + port;
    return false;
  }
  std::string_view rest = std::string_view(port).substr(kPrefix.size());
  const std::size_t comma = rest.find(',');
  out->iface = std::string(rest.substr(0, comma));
  if (out->iface.empty() || out->iface.size() >= IFNAMSIZ) {
    *error = "port \"" + port + "\": packet:<interface> names an interface";
    return false;
  }
  while (comma != std::string_view::npos && !rest.empty()) {
    rest = rest.substr(rest.find(',') + 1);
    const std::string_view opt = rest.substr(0, rest.find(','));
    if (opt == "gso=on") {
      out->gso = true;
    } else if (opt == "gso=off") {
      out->gso = false;
    } else {
      *error = "port \"" + port + "\": unknown option \"" + std::string(opt) +
               "\" (packet:<interface>[,gso=on|off])";
      return false;
    }
    if (rest.find(',') == std::string_view::npos) break;
  }
  return true;
}

std::unique_ptr<PacketPort> PacketPort::open(const PacketPortOptions& opts, std::string* error) {
  std::unique_ptr<PacketPort> p(new PacketPort());
  p->iface_ = opts.iface;
  p->gso_ = opts.gso;
  const unsigned ifindex = if_nametoindex(opts.iface.c_str());
  if (ifindex == 0) {
    *error = "packet port: no interface " + opts.iface + " in this network namespace";
    return nullptr;
  }
  p->ioctl_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  // Protocol 0: nothing is received before bind() names the interface.
  p->fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (p->fd_ < 0 || p->ioctl_fd_ < 0) {
    *error = errno_text("packet port: socket (CAP_NET_RAW is needed)");
    return nullptr;
  }
  // The virtio-net header goes before the ring: the kernel refuses it
  // once a ring is mapped.
  if (!set_int(p->fd_, SOL_PACKET, PACKET_VERSION, TPACKET_V2) ||
      !set_int(p->fd_, SOL_PACKET, PACKET_VNET_HDR, 1)) {
    *error = errno_text("packet port: PACKET_VERSION/PACKET_VNET_HDR");
    return nullptr;
  }
  tpacket_req req{};
  req.tp_block_size = kRingBlockSize;
  req.tp_frame_size = kRingFrameSize;
  req.tp_frame_nr = kRingFrames;
  req.tp_block_nr = kRingFrames / (kRingBlockSize / kRingFrameSize);
  if (setsockopt(p->fd_, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0) {
    *error = errno_text("packet port: PACKET_RX_RING");
    return nullptr;
  }
  p->ring_bytes_ = std::size_t{req.tp_block_size} * req.tp_block_nr;
  void* ring = mmap(nullptr, p->ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd_, 0);
  if (ring == MAP_FAILED) {
    *error = errno_text("packet port: mmap of the receive ring");
    return nullptr;
  }
  p->ring_ = static_cast<std::uint8_t*>(ring);
  // What it sends, the port does not receive back. Frames take the
  // interface's queueing discipline (a veth's is noqueue): unlike
  // net_af_packet's, not PACKET_QDISC_BYPASS, whose direct transmit drops
  // every skb that needs segmenting in software (__dev_direct_xmit), and
  // so every super-frame toward an interface without UDP segmentation.
  if (!set_int(p->fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)) {
    *error = errno_text("packet port: PACKET_IGNORE_OUTGOING");
    return nullptr;
  }
  if (!set_int(p->fd_, SOL_SOCKET, SO_SNDBUFFORCE, kSendBuffer))
    set_int(p->fd_, SOL_SOCKET, SO_SNDBUF, kSendBuffer);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(p->fd_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
    *error = errno_text(("packet port: bind to " + opts.iface).c_str());
    return nullptr;
  }

  // Netdev mode: the socket filter keeps the kernel's own traffic off the
  // ring, and a held UDP 4791 keeps the kernel from answering RoCE.
  if (opts.netdev) {
    p->netdev_ = port::NetdevShare::open(opts.iface, error, {p->fd_});
    if (!p->netdev_) return nullptr;
  }

  ifreq ifr;
  if (!iface_request(p->ioctl_fd_, p->iface_, SIOCGIFHWADDR, &ifr)) {
    *error = errno_text(("packet port: the MAC of " + opts.iface).c_str());
    return nullptr;
  }
  std::memcpy(p->mac_.bytes.data(), ifr.ifr_hwaddr.sa_data, 6);
  if (!iface_request(p->ioctl_fd_, p->iface_, SIOCGIFMTU, &ifr)) {
    *error = errno_text(("packet port: the MTU of " + opts.iface).c_str());
    return nullptr;
  }
  const auto iface_mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
  if (opts.mtu > iface_mtu) {
    *error = "packet port: mtu " + std::to_string(opts.mtu) + " is larger than " + opts.iface +
             "'s " + std::to_string(iface_mtu);
    return nullptr;
  }
  p->follow_mtu_ = opts.mtu == 0;
  p->mtu_ = std::min(opts.mtu != 0 ? opts.mtu : iface_mtu, kMaxMtu);
  p->speed_mbps_ = link_speed(p->ioctl_fd_, p->iface_);

  // The pool: pages are touched as buffers are first used, and the free
  // list is a stack, so that a port moving little keeps few pages warm.
  p->pool_bytes_ = std::size_t{kBuffers} * kBufferSize;
  void* pool = mmap(nullptr, p->pool_bytes_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (pool == MAP_FAILED) {
    *error = errno_text("packet port: the buffer pool");
    return nullptr;
  }
  p->pool_ = static_cast<std::uint8_t*>(pool);
  p->free_.reserve(kBuffers);
  for (std::uint32_t i = kBuffers; i-- > 0;)
    p->free_.push_back(p->pool_ + std::size_t{i} * kBufferSize);
  p->free_count_.store(kBuffers, std::memory_order_relaxed);
  return p;
}

PacketPort::~PacketPort() {
  if (ring_ != nullptr) munmap(ring_, ring_bytes_);
  if (fd_ >= 0) close(fd_);
  if (ioctl_fd_ >= 0) close(ioctl_fd_);
  if (pool_ != nullptr) munmap(pool_, pool_bytes_);
}

std::uint8_t* PacketPort::alloc_buffer() {
  if (free_.empty()) return nullptr;
  std::uint8_t* b = free_.back();
  free_.pop_back();
  free_count_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
  return b;
}

void PacketPort::free_buffer(void* handle) {
  free_.push_back(static_cast<std::uint8_t*>(handle));
  free_count_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
}

std::uint16_t PacketPort::rx_burst(port::RxFrame* out, std::uint16_t max) {
  max = std::min(max, port::kRxBurst);
  std::uint16_t got = 0;
  while (got < max) {
    void* slot = ring_ + std::size_t{rx_head_} * kRingFrameSize;
    auto* h = static_cast<tpacket2_hdr*>(slot);
    if ((__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) == 0) break;
    if (!take_slot(slot, out, max, &got)) break;
    release_slot(slot);
  }
  return got;
}

bool PacketPort::take_slot(void* slot, port::RxFrame* out, std::uint16_t max, std::uint16_t* got) {
  const auto* h = static_cast<const tpacket2_hdr*>(slot);
  const std::uint8_t* frame = static_cast<const std::uint8_t*>(slot) + h->tp_mac;
  const auto* vnet = reinterpret_cast<const VirtioNetHdr*>(frame - sizeof(VirtioNetHdr));
  const std::uint32_t length = h->tp_snaplen;
  if (length != h->tp_len || length < wire::EthHdr::kSize) {
    stats_.rx_dropped.fetch_add(1, std::memory_order_relaxed);  // truncated: larger than a slot
    return true;
  }
  // The kernel hands an 802.1Q tag over beside the frame (the interface's
  // VLAN offload); put it back where it was, as net_af_packet does.
  const bool tagged = (h->tp_status & TP_STATUS_VLAN_VALID) != 0;
  if (vnet->gso_type == kGsoNone) {
    const std::uint32_t size = length + (tagged ? 4 : 0);
    if (size > kBufferSize) {
      stats_.rx_dropped.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    std::uint8_t* b = alloc_buffer();
    if (b == nullptr) {
      stats_.rx_nobuf.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (tagged) {
      std::memcpy(b, frame, 12);
      const std::uint16_t tpid =
          (h->tp_status & TP_STATUS_VLAN_TPID_VALID) != 0 ? h->tp_vlan_tpid : ETH_P_8021Q;
      wire::store_be16(b + 12, tpid);
      wire::store_be16(b + 14, h->tp_vlan_tci);
      std::memcpy(b + 16, frame + 12, length - 12);
    } else {
      std::memcpy(b, frame, length);
    }
    out[(*got)++] = {wire::ConstBytes(b, size), b};
    stats_.rx_frames.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // A super-frame. uroce sends untagged UDP ones only; anything else
  // (a TCP segment of the kernel's, say) is not RoCE.
  const wire::ConstBytes whole(frame, length);
  const UdpFrame at = locate_udp(whole);
  const std::uint16_t gso_size = vnet->gso_size;
  if (tagged || (vnet->gso_type & ~kGsoEcn) != kGsoUdpL4 || !at.valid || gso_size == 0 ||
      at.header_length() + gso_size > kBufferSize) {
    stats_.rx_dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const wire::ConstBytes header = whole.first(at.header_length());
  const wire::ConstBytes payload = whole.subspan(at.header_length(), at.payload);
  const std::uint32_t n = segments(at.payload, gso_size);
  // GSO builds no more (the kernel's UDP_MAX_SEGMENTS, 128 at most); one
  // with a tiny gso_size would make thousands of frames of one slot.
  if (n > 2u * kMaxSegments) {
    stats_.rx_dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  for (; segment_ < n; ++segment_) {
    if (*got == max) return false;
    std::uint8_t* b = alloc_buffer();
    if (b == nullptr) {
      stats_.rx_nobuf.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (segment_ == 0) stats_.rx_super_frames.fetch_add(1, std::memory_order_relaxed);
    const std::size_t len =
        split(header, at, payload, gso_size, segment_, wire::Bytes(b, kBufferSize));
    out[(*got)++] = {wire::ConstBytes(b, len), b};
    stats_.rx_frames.fetch_add(1, std::memory_order_relaxed);
    stats_.rx_segments.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void PacketPort::release_slot(void* slot) {
  __atomic_store_n(&static_cast<tpacket2_hdr*>(slot)->tp_status, TP_STATUS_KERNEL,
                   __ATOMIC_RELEASE);
  rx_head_ = rx_head_ + 1 == kRingFrames ? 0 : rx_head_ + 1;
  segment_ = 0;
}

void PacketPort::rx_release(port::RxFrame* frames, std::uint16_t n) {
  for (std::uint16_t i = 0; i < n; ++i) free_buffer(frames[i].handle);
}

bool PacketPort::tx_alloc(std::uint32_t size, port::TxFrame& out) {
  if (size > kBufferSize) return false;
  std::uint8_t* b = alloc_buffer();
  if (b == nullptr) return false;
  out.room = wire::Bytes(b, kBufferSize);
  out.length = 0;
  out.handle = b;
  out.ipv4_checksum_offload = false;
  return true;
}

void PacketPort::tx_free(port::TxFrame& frame) { free_buffer(frame.handle); }

std::uint16_t PacketPort::tx_burst(port::TxFrame* frames, std::uint16_t n) {
  n = std::min(n, port::kMaxTxBurst);
  if (n == 0) return 0;
  // One message per super-frame or single frame: its virtio-net header,
  // then the super-frame's headers and each packet's UDP payload, or the
  // frame whole.
  wire::ConstBytes views[port::kMaxTxBurst];
  for (std::uint16_t i = 0; i < n; ++i)
    views[i] = wire::ConstBytes(frames[i].room.data(), frames[i].length);
  mmsghdr msgs[port::kMaxTxBurst];
  VirtioNetHdr vnet[port::kMaxTxBurst];
  std::uint8_t headers[port::kMaxTxBurst][64];
  iovec iov[3 * port::kMaxTxBurst];
  std::uint16_t count[port::kMaxTxBurst];
  std::uint16_t m = 0;
  std::size_t v = 0;
  for (std::uint16_t i = 0; i < n; ++m) {
    const UdpFrame first = gso_ ? locate_udp(views[i]) : UdpFrame{};
    const std::uint16_t run =
        gso_ ? coalescible(std::span(views + i, n - i), first) : std::uint16_t{1};
    std::memset(&vnet[m], 0, sizeof(vnet[m]));
    std::memset(&msgs[m], 0, sizeof(msgs[m]));
    msgs[m].msg_hdr.msg_iov = &iov[v];
    const std::size_t v0 = v;
    iov[v++] = {&vnet[m], sizeof(vnet[m])};
    if (run >= 2) {
      const std::uint32_t hdr = first.header_length();
      std::uint32_t total = 0;
      for (std::uint16_t j = i; j < i + run; ++j) {
        const auto payload =
            static_cast<std::uint32_t>(wire::load_be16(views[j].data() + first.l4 + 4) - 8u);
        iov[v + 1 + (j - i)] = {const_cast<std::uint8_t*>(views[j].data()) + hdr, payload};
        total += payload;
      }
      write_super_header(views[i], first, total, headers[m]);
      iov[v] = {headers[m], hdr};
      v += 1 + run;
      vnet[m].flags = kNeedsCsum;
      vnet[m].gso_type = kGsoUdpL4;
      vnet[m].hdr_len = static_cast<std::uint16_t>(hdr);
      vnet[m].gso_size = static_cast<std::uint16_t>(first.payload);
      vnet[m].csum_start = first.l4;
      vnet[m].csum_offset = 6;
    } else {
      iov[v++] = {const_cast<std::uint8_t*>(views[i].data()), views[i].size()};
    }
    msgs[m].msg_hdr.msg_iovlen = v - v0;
    count[m] = run;
    i = static_cast<std::uint16_t>(i + run);
  }

  std::uint16_t k = 0;  // messages done with: sent, or lost on the way
  while (k < m) {
    const int r = sendmmsg(fd_, msgs + k, m - k, MSG_DONTWAIT);
    if (r > 0) {
      for (int j = 0; j < r; ++j) {
        if (count[k + j] >= 2) {
          stats_.tx_super_frames.fetch_add(1, std::memory_order_relaxed);
          stats_.tx_segments.fetch_add(count[k + j], std::memory_order_relaxed);
        }
      }
      k = static_cast<std::uint16_t>(k + r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The socket's send buffer is full: the rest stays the engine's.
      stats_.tx_busy.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    if ((errno == EINVAL || errno == EOPNOTSUPP) && count[k] >= 2) {
      // A kernel without UDP GSO on packet sockets (before Linux 6.2)
      // refuses every super-frame: send single frames from now on; these
      // stay the engine's, to be sent again so.
      log::get().warn(
          "packet port on {}: the kernel refuses UDP GSO super-frames ({}); "
          "sending single frames",
          iface_, std::strerror(errno));
      gso_ = false;
      stats_.tx_gso_refused.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    // ENOBUFS: the interface dropped it (a veth whose peer's backlog is
    // full), as a congested link drops; any other error loses the frame
    // too rather than have it retried for ever.
    stats_.tx_dropped.fetch_add(count[k], std::memory_order_relaxed);
    ++k;
  }
  std::uint16_t taken = 0;
  for (std::uint16_t j = 0; j < k; ++j) taken = static_cast<std::uint16_t>(taken + count[j]);
  for (std::uint16_t j = 0; j < taken; ++j) free_buffer(frames[j].handle);
  stats_.tx_frames.fetch_add(taken, std::memory_order_relaxed);
  return taken;
}

bool PacketPort::link_up() const {
  ifreq ifr;
  if (follow_mtu_ && iface_request(ioctl_fd_, iface_, SIOCGIFMTU, &ifr) && ifr.ifr_mtu > 0)
    mtu_.store(std::min(static_cast<std::uint32_t>(ifr.ifr_mtu), kMaxMtu),
               std::memory_order_relaxed);
  if (!iface_request(ioctl_fd_, iface_, SIOCGIFFLAGS, &ifr)) return false;
  return (ifr.ifr_flags & IFF_UP) != 0 && (ifr.ifr_flags & IFF_RUNNING) != 0;
}

void PacketPort::for_each_stat(const StatFn& fn) const {
  // The kernel's count of frames the ring had no room for (it resets as
  // it is read).
  tpacket_stats ks{};
  socklen_t len = sizeof(ks);
  if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &ks, &len) == 0)
    stats_.ring_drops.fetch_add(ks.tp_drops, std::memory_order_relaxed);
  const auto get = [](const std::atomic<std::uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  fn("buffers", kBuffers);
  fn("buffers_free", free_count_.load(std::memory_order_relaxed));
  fn("rx_frames", get(stats_.rx_frames));
  fn("rx_super_frames", get(stats_.rx_super_frames));
  fn("rx_segments", get(stats_.rx_segments));
  fn("rx_dropped", get(stats_.rx_dropped));
  fn("rx_nobuf", get(stats_.rx_nobuf));
  fn("rx_ring_dropped", get(stats_.ring_drops));
  fn("tx_frames", get(stats_.tx_frames));
  fn("tx_super_frames", get(stats_.tx_super_frames));
  fn("tx_segments", get(stats_.tx_segments));
  fn("tx_busy", get(stats_.tx_busy));
  fn("tx_gso_refused", get(stats_.tx_gso_refused));
  fn("tx_dropped", get(stats_.tx_dropped));
}

}  // namespace uroce::packet
