/* SPDX-License-Identifier: BSD-3-Clause */
#include "dpdk/af_xdp.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "dpdk/eal.h"
#include "log/log.h"

namespace uroce::dpdk {

namespace {

// The name the kernel gives uroce's program: its function's
// (roce_xdp.bpf.c), at most 15 characters.
constexpr char kProgramName[] = "uroce_steer";

std::mutex& claims_mu() {
  static std::mutex mu;
  return mu;
}
// The claims alive, for the exit handler.
std::set<XdpClaim*>& claims() {
  static std::set<XdpClaim*> set;
  return set;
}

// The id of the program on the interface's XDP hook (0: none) and
// whether it is uroce's; false when the kernel cannot say.
bool attached_program(int ifindex, std::uint32_t* id, bool* ours) {
  *id = 0;
  *ours = false;
  if (bpf_xdp_query_id(ifindex, 0, id) != 0) return false;
  if (*id == 0) return true;
  const int fd = bpf_prog_get_fd_by_id(*id);
  if (fd < 0) {
    // ENOENT: gone meanwhile. EPERM (no CAP_SYS_ADMIN): unknown, and an
    // unknown program is not taken for none.
    if (errno != ENOENT) return false;
    *id = 0;
    return true;
  }
  bpf_prog_info info{};
  std::uint32_t len = sizeof(info);
  const int rc = bpf_obj_get_info_by_fd(fd, &info, &len);
  close(fd);
  *ours = rc == 0 && std::strcmp(info.name, kProgramName) == 0;
  return true;
}

// Takes program `id` off the hook if it is still the one there.
bool detach_program(int ifindex, std::uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return false;
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = fd);
  const int rc = bpf_xdp_detach(ifindex, XDP_FLAGS_REPLACE, &opts);
  close(fd);
  return rc == 0;
}

// When this process last let each interface's hook go (by lock path):
// the kernel unbinds the queue from the released socket's memory in a
// deferred work item, and a socket bound before that finds the queue busy
// (net_af_xdp then fails its queue setup). A port opened again on the
// interface waits for it.
constexpr std::chrono::milliseconds kQueueRelease{250};
std::map<std::string, std::chrono::steady_clock::time_point>& released_at() {
  static std::map<std::string, std::chrono::steady_clock::time_point> map;
  return map;
}

// This process's AF_XDP sockets, each with its inode (a descriptor may be
// reused for something else).
std::vector<std::pair<int, unsigned long>> xdp_sockets() {
  std::vector<std::pair<int, unsigned long>> out;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return out;
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    int domain = 0;
    socklen_t len = sizeof(domain);
    struct stat st {};
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_XDP &&
        fstat(fd, &st) == 0)
      out.emplace_back(fd, static_cast<unsigned long>(st.st_ino));
  }
  closedir(dir);
  return out;
}

}  // namespace

void detach_claims_at_exit() {
  std::lock_guard lock(claims_mu());
  for (XdpClaim* c : claims()) c->detach();
}

bool is_af_xdp(const std::string& device) { return device.starts_with("net_af_xdp"); }

rte_mempool* af_xdp_pool(const std::string& name, unsigned n, int socket, std::string* error) {
  const unsigned elt = sizeof(rte_mbuf) + kAfXdpDataRoom;
  rte_mempool* mp =
      rte_mempool_create_empty(name.c_str(), n, elt, kMbufCache, sizeof(rte_pktmbuf_pool_private),
                               socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
  if (!mp) {
    *error = std::string("rte_mempool_create_empty: ") + rte_strerror(rte_errno);
    return nullptr;
  }
  auto fail = [&](const std::string& why) {
    *error = why;
    rte_mempool_free(mp);
    return nullptr;
  };
  if (int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); rc != 0)
    return fail(std::string("rte_mempool_set_ops_byname: ") + rte_strerror(-rc));
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = kAfXdpDataRoom;
  rte_pktmbuf_pool_init(mp, &priv);
  if (int rc = rte_mempool_populate_default(mp); rc < 0)
    return fail(std::string("rte_mempool_populate_default: ") + rte_strerror(-rc));
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  // What the PMD registers must be what the pool spans: one chunk of
  // objects back to back, each within a UMEM chunk.
  const std::size_t obj = mp->header_size + mp->elt_size + mp->trailer_size;
  const rte_mempool_memhdr* mem = STAILQ_FIRST(&mp->mem_list);
  if (mp->nb_mem_chunks != 1 || mem->len < obj * mp->populated_size)
    return fail("the pool's " + std::to_string(mp->populated_size) +
                " mbufs are not in one piece of memory (" + std::to_string(mp->nb_mem_chunks) +
                " chunks): give EAL more memory");
  if (obj > static_cast<std::size_t>(getpagesize()))
    return fail("an mbuf of " + std::to_string(obj) + " bytes is larger than a page");
  return mp;
}

std::string af_xdp_program() {
  // The build tree's first: a program built there runs with the object
  // built with it, even where an older uroce is installed.
  if (access(UROCE_XDP_PROG_BUILT, R_OK) == 0) return UROCE_XDP_PROG_BUILT;
  return UROCE_XDP_PROG_INSTALLED;
}

std::string af_xdp_vdev_defaults(const std::string& vdev) {
  std::string out = vdev;
  auto has = [&](const char* key) { return vdev.find(key) != std::string::npos; };
  if (!has("start_queue=")) out += ",start_queue=0";
  if (!has("queue_count=")) out += ",queue_count=1";
  if (!has("xdp_prog=")) out += ",xdp_prog=" + af_xdp_program();
  return out;
}

XdpClaim::XdpClaim(int lock_fd, int ifindex, std::string path)
    : lock_fd_(lock_fd),
      ifindex_(ifindex),
      owner_(static_cast<int>(getpid())),
      path_(std::move(path)) {}

std::unique_ptr<XdpClaim> XdpClaim::take(const std::string& iface, std::string* error) {
  const int ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  if (ifindex == 0) {
    *error = "no interface '" + iface + "'";
    return nullptr;
  }
  // The hold: an abstract Unix socket name, which belongs to the network
  // namespace (as interface indices do), whatever the mount namespace,
  // and which the kernel lets go when the process ends.
  const std::string path = "uroce-xdp-" + std::to_string(ifindex);
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, path.data(), path.size());  // sun_path[0] = 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + path.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    *error = errno == EADDRINUSE ? "another uroce program has an af_xdp port on " + iface +
                                       " (one device per interface; share it through uroced)"
                                 : "@" + path + ": " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  {
    std::unique_lock lock(claims_mu());
    const auto it = released_at().find(path);
    if (it != released_at().end()) {
      const auto ready = it->second + kQueueRelease;
      lock.unlock();
      std::this_thread::sleep_until(ready);
    }
  }
  std::uint32_t id;
  bool ours;
  if (!attached_program(ifindex, &id, &ours)) {
    *error = "cannot ask the kernel about " + iface + "'s XDP program (" + std::strerror(errno) +
             "; the af_xdp port needs CAP_SYS_ADMIN)";
    close(fd);
    return nullptr;
  }
  if (id != 0 && !ours) {
    *error = iface + " has an XDP program already (id " + std::to_string(id) +
             ", not uroce's): the af_xdp port needs the interface's XDP hook";
    close(fd);
    return nullptr;
  }
  if (id != 0) {
    // Nobody holds the interface: a uroce program that is gone left it.
    if (!detach_program(ifindex, id)) {
      *error = "cannot take off " + iface + "'s XDP program " + std::to_string(id) +
               ", left by a uroce program that has exited";
      close(fd);
      return nullptr;
    }
    log::get().info("{}: took off XDP program {}, left by a uroce program that has exited", iface,
                    id);
  }
  std::unique_ptr<XdpClaim> claim(new XdpClaim(fd, ifindex, path));
  std::lock_guard lock(claims_mu());
  // The set first: exit destroys it after the handler registered later.
  std::set<XdpClaim*>& live = claims();
  static const bool at_exit = std::atexit(detach_claims_at_exit) == 0;
  (void)at_exit;
  live.insert(claim.get());
  return claim;
}

void XdpClaim::setting_up() { sockets_before_ = xdp_sockets(); }

void XdpClaim::attached() {
  bool ours;
  if (!attached_program(ifindex_, &prog_id_, &ours) || !ours) prog_id_ = 0;
  for (const auto& s : xdp_sockets())
    if (std::find(sockets_before_.begin(), sockets_before_.end(), s) == sockets_before_.end())
      sockets_.push_back(s);
}

void XdpClaim::detach() {
  if (prog_id_ != 0 && owner_ == static_cast<int>(getpid())) {
    std::uint32_t id;
    bool ours;
    // net_af_xdp's close takes it off first, when the port closes.
    if (attached_program(ifindex_, &id, &ours) && id == prog_id_) detach_program(ifindex_, id);
  }
  prog_id_ = 0;
}

XdpClaim::~XdpClaim() {
  {
    std::lock_guard lock(claims_mu());
    claims().erase(this);
  }
  detach();
  // The port has closed (DpdkPort's members go after its close): what is
  // still open of its sockets is the UMEM's, which the PMD left.
  const auto now = xdp_sockets();
  for (const auto& s : sockets_)
    if (std::find(now.begin(), now.end(), s) != now.end()) close(s.first);
  std::lock_guard lock(claims_mu());
  released_at()[path_] = std::chrono::steady_clock::now();
  close(lock_fd_);
}

}  // namespace uroce::dpdk
