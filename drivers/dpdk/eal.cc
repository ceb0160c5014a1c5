/* SPDX-License-Identifier: BSD-3-Clause */
#include "dpdk/eal.h"

#include <net/if.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "dpdk/af_xdp.h"
#include "log/log.h"

namespace uroce::dpdk {

bool is_pci_address(const std::string& device) {
  // [DDDD:]BB:DD.F, hexadecimal, function 0-7.
  auto hex = [&](std::size_t from, std::size_t n) {
    if (from + n > device.size()) return false;
    for (std::size_t i = from; i < from + n; ++i) {
      if (!std::isxdigit(static_cast<unsigned char>(device[i]))) return false;
    }
    return true;
  };
  std::size_t p = 0;
  if (device.size() == 12) {
    if (!hex(0, 4) || device[4] != ':') return false;
    p = 5;
  } else if (device.size() != 7) {
    return false;
  }
  return hex(p, 2) && device[p + 2] == ':' && hex(p + 3, 2) && device[p + 5] == '.' &&
         device[p + 6] >= '0' && device[p + 6] <= '7';
}

std::vector<std::string> eal_arguments(const EalOptions& opts) {
  std::vector<std::string> a = {"uroce"};
  // lcore 0 may run on any CPU: uroce's poll thread must not be nailed to
  // one core of a small machine.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  a.push_back("--lcores");
  a.push_back(cpus > 1 ? "0@(0-" + std::to_string(cpus - 1) + ")" : "0@0");
  // A private, file-less instance per process: several uroce programs run
  // side by side without sharing DPDK state.
  a.push_back("--file-prefix");
  a.push_back("uroce-" + std::to_string(getpid()));
  if (opts.hugepages) {
    a.push_back("--in-memory");
  } else {
    a.push_back("--no-huge");
    a.push_back("--no-shconf");
  }
  a.push_back("-m");
  a.push_back(std::to_string(opts.memory_mb));
  a.push_back("--no-telemetry");
  a.push_back("--log-level=" + opts.log_level);
  bool pci = false;
  for (const std::string& d : opts.devices) {
    if (is_pci_address(d)) {
      a.push_back("-a");
      pci = true;
      a.push_back(d);
    } else {
      a.push_back("--vdev");
      a.push_back(with_vdev_defaults(d));
    }
  }
  if (!pci) a.push_back("--no-pci");
  a.insert(a.end(), opts.args.begin(), opts.args.end());
  return a;
}

std::string kernel_iface(const std::string& vdev) {
  if (!vdev.starts_with("net_af_packet") && !is_af_xdp(vdev)) return {};
  const auto at = vdev.find("iface=");
  if (at == std::string::npos) return {};
  const auto end = vdev.find(',', at);
  std::string iface = vdev.substr(at + 6, end == std::string::npos ? end : end - at - 6);
  return iface.size() < IFNAMSIZ ? iface : std::string();
}

std::uint32_t kernel_iface_mtu(const std::string& vdev) {
  const std::string iface = kernel_iface(vdev);
  if (iface.empty()) return 0;
  // Asked through a socket rather than sysfs, which shows the network
  // namespace it was mounted in, not necessarily ours.
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.data(), iface.size());
  const int rc = ioctl(fd, SIOCGIFMTU, &ifr);
  close(fd);
  return rc == 0 && ifr.ifr_mtu > 0 ? static_cast<std::uint32_t>(ifr.ifr_mtu) : 0;
}

std::uint32_t memif_buffer_size(const std::string& vdev) {
  if (!vdev.starts_with("net_memif")) return 0;
  const auto at = vdev.find(",bsize=");
  if (at == std::string::npos) return kMemifDefaultBufferSize;
  return static_cast<std::uint32_t>(std::strtoul(vdev.c_str() + at + 7, nullptr, 10));
}

std::string with_vdev_defaults(const std::string& vdev) {
  if (is_af_xdp(vdev)) return af_xdp_vdev_defaults(vdev);
  if (vdev.starts_with("net_memif")) {
    if (vdev.find(",bsize=") != std::string::npos) return vdev;
    return vdev + ",bsize=" + std::to_string(kMemifBufferSize);
  }
  if (vdev.rfind("net_af_packet", 0) != 0) return vdev;
  std::string out = vdev;
  // The default ring of 256 frames overflows under a burst of RDMA
  // traffic, and for UC and UD a dropped packet is a lost message.
  if (vdev.find("framecnt=") == std::string::npos) out += ",framecnt=4096";
  // Frames must hold the link's largest frame and its TPACKET header, and
  // a block must hold whole frames (the PMD sizes the ring as framecnt *
  // framesz / blocksz blocks): framesz in kilobytes, blocksz the least
  // multiple of both it and the page.
  const std::uint32_t mtu = kernel_iface_mtu(vdev);
  if (mtu > 1500 && vdev.find("framesz=") == std::string::npos &&
      vdev.find("blocksz=") == std::string::npos) {
    const std::uint32_t framesz = (mtu + 18 + 64 + 1023) / 1024 * 1024;
    const std::uint32_t blocksz = std::lcm(framesz, 4096u);
    out += ",framesz=" + std::to_string(framesz) + ",blocksz=" + std::to_string(blocksz);
  }
  return out;
}

std::string eal_init(const EalOptions& opts) {
  static std::mutex mu;
  static bool done = false;
  std::lock_guard lock(mu);
  if (done) return {};
  std::vector<std::string> args = eal_arguments(opts);
  log::get().info("starting DPDK EAL: {}", std::accumulate(args.begin(), args.end(), std::string(),
                                                           [](std::string a, const std::string& b) {
                                                             return a.empty() ? b : a + " " + b;
                                                           }));
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  int ret = 0;
  int err = 0;
  std::thread t([&] {
    ret = rte_eal_init(static_cast<int>(argv.size()), argv.data());
    err = rte_errno;
  });
  t.join();
  if (ret < 0) return std::string("rte_eal_init failed: ") + rte_strerror(err);
  done = true;
  return {};
}

namespace {

/// Program threads registered now (kCachedProgramThreads at most).
std::atomic<unsigned> program_threads{0};

bool take_program_slot() {
  unsigned n = program_threads.load(std::memory_order_relaxed);
  do {
    if (n >= kCachedProgramThreads) return false;
  } while (!program_threads.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  return true;
}

/// The ports' pools, for a thread that ends to give its caches back to.
/// rte_mempool_walk would not do: rte_mempool_free frees a pool without
/// the lock the walk holds, so a port closed while a thread ends could
/// have its ring flushed into after it is gone.
struct Pools {
  std::mutex mu;
  std::set<rte_mempool*> live;
};
Pools& pools() {
  static auto* p = new Pools;  // immortal: threads end during exit too
  return *p;
}

}  // namespace

void track_pool(rte_mempool* mp) {
  std::lock_guard lock(pools().mu);
  pools().live.insert(mp);
}

void untrack_pool(rte_mempool* mp) {
  std::lock_guard lock(pools().mu);
  pools().live.erase(mp);
}

ThreadRegistration::ThreadRegistration(Owner owner) : owner_(owner) {
  if (rte_lcore_id() != LCORE_ID_ANY) return;
  if (owner == Owner::kProgram && !take_program_slot()) return;
  registered_ = rte_thread_register() == 0;
  if (registered_)
    pid_ = getpid();
  else if (owner == Owner::kProgram)
    program_threads.fetch_sub(1);
}

ThreadRegistration::~ThreadRegistration() {
  if (!registered_ || getpid() != pid_) return;
  // What this thread's caches hold back to their pools: the next thread
  // with this lcore id may never touch them.
  {
    std::lock_guard lock(pools().mu);
    for (rte_mempool* mp : pools().live) {
      if (rte_mempool_cache* c = rte_mempool_default_cache(mp, rte_lcore_id()))
        rte_mempool_cache_flush(c, mp);
    }
  }
  rte_thread_unregister();
  if (owner_ == Owner::kProgram) program_threads.fetch_sub(1);
}

}  // namespace uroce::dpdk
