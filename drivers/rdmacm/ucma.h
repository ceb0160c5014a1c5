/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The rdma_cm command channel (the kernel's drivers/infiniband/core/ucma.c,
// ABI 4) inside the process, over the connection manager of the device's
// QP 1 (verbs/gsi.h). librdmacm runs unchanged on top: it opens
// /dev/infiniband/rdma_cm, and gets an eventfd that stands for it
// (interpose.cc); each of its commands is one write() of a struct
// rdma_ucm_cmd_hdr and a command struct of <rdma/rdma_user_cm.h>, whose
// response pointer the command fills, as the kernel's copy_to_user does.
//
// A descriptor is a ucma file: the ids made through it, and one event
// channel of the CM whose count of waiting events its eventfd holds, so
// that it polls readable while events wait. GET_EVENT takes them,
// blocking in write() unless the descriptor is O_NONBLOCK. As in ucma.c,
// each id keeps the program's uid and counts the events it reported (for
// DESTROY_ID and MIGRATE_ID), an id a CONNECT_REQUEST made is handed out
// with that event, and events of an id whose uid is not set yet (a new
// connection not accepted) are dropped.
//
// State: the ids and the channels of the descriptors live under the CM
// lock (everything runs inside Gsi::run or Gsi::wait); the descriptor
// table under its own mutex, taken after the CM lock when both are.
// Files: channel.cc (descriptors, GET_EVENT, events), commands.cc (the
// other commands), multicast.cc (JOIN_IP_MCAST, JOIN_MCAST, LEAVE_MCAST),
// abi.cc (the UAPI structs), interpose.cc (libc).

#include <rdma/rdma_user_cm.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "cm/cma.h"
#include "verbs/gsi.h"

namespace uroce::rdmacm {

/// The path librdmacm opens (util/open_cdev.c, RDMA_CDEV_DIR "/rdma_cm").
inline constexpr char kCmPath[] = "/dev/infiniband/rdma_cm";

/// Descriptors the emulation can hand out: one bit each, tested on every
/// write() and close() of the process.
inline constexpr int kMaxFds = 1 << 16;
extern std::atomic<std::uint64_t> cm_fds[kMaxFds / 64];
inline bool is_cm_fd(int fd) {
  const auto u = static_cast<unsigned>(fd);
  return u < static_cast<unsigned>(kMaxFds) &&
         (cm_fds[u >> 6].load(std::memory_order_relaxed) >> (u & 63) & 1) != 0;
}

/// libc's own functions (the definitions after this library), for the
/// descriptors that are not ours and for the eventfds themselves.
struct Libc {
  ssize_t (*write)(int, const void*, std::size_t);
  ssize_t (*read)(int, void*, std::size_t);
  int (*close)(int);
  int (*fcntl)(int, int, ...);
};
const Libc& libc();

class Ucma final : private verbs::Gsi::Observer {
 public:
  /// The process's one channel emulation (never destroyed: descriptors
  /// may be used until the process ends).
  static Ucma& get();
  /// Whether the process has a uroce device to serve the CM: without one
  /// /dev/infiniband/rdma_cm is the kernel's.
  static bool serves();

  /// open("/dev/infiniband/rdma_cm", flags): a new descriptor, or -1 and
  /// errno.
  int open(int flags);
  /// write() on one of its descriptors: `len`, or -1 and errno.
  ssize_t write(int fd, const void* buf, std::size_t len);
  /// close() of one of its descriptors: destroys its ids; the descriptor
  /// lingers, dead, for a while (channel.cc says why), then closes.
  int close(int fd);

 private:
  struct File {
    int fd = -1;  ///< the eventfd, and the program's descriptor
    std::uint32_t channel = 0;
    std::uint64_t signaled = 0;  ///< the eventfd's count: events waiting, as last told
    std::atomic<bool> closed{false};
    /// GET_EVENTs begun and ended, and the thread the last one served:
    /// close() uses them to let a looping event thread get back into
    /// GET_EVENT first (see close).
    std::atomic<std::uint64_t> gets_begun{0};
    std::atomic<std::uint64_t> gets_ended{0};
    std::atomic<pid_t> last_reader{0};
  };
  struct Ctx {
    std::uint32_t handle = 0;  ///< ucma's id, the program's handle
    std::uint32_t cma = 0;     ///< the CM's id; 0 for an id of a port space uroce lacks
    std::uint64_t uid = 0;     ///< the program's own (its cma_id_private)
    std::uint32_t events_reported = 0;
    File* file = nullptr;
    cm::QpType qp_type = cm::QpType::kRc;
  };
  /// A multicast join (ucma's ucma_multicast): its own handle, the
  /// program's uid for its events, and what it reported.
  struct Mc {
    std::uint32_t id = 0;
    std::uint32_t ctx = 0;  ///< the id's handle
    std::uint64_t uid = 0;
    wire::IpAddr group;
    std::uint32_t events_reported = 0;
  };
  using FilePtr = std::shared_ptr<File>;

  Ucma() = default;
  // channel.cc
  void cm_changed(cm::Cma& cma) override;
  verbs::Gsi* gsi();
  static void at_exit();
  FilePtr file(int fd);
  int get_event(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  bool take_event(File& f, cm::Cma& cma, const cm::CmaEvent& e, rdma_ucm_event_resp& r,
                  cm::Nanos now);
  Ctx* find(std::uint32_t handle, const File& f, int* err);
  std::uint32_t add_ctx(File& f, std::uint32_t cma_id, std::uint64_t uid, cm::QpType type);
  void erase_ctx(std::uint32_t handle);
  /// ucma's ids are small numbers, the lowest free first, as the kernel's
  /// idr gives them: librdmacm indexes a table by them.
  std::uint32_t alloc_handle();
  void free_handle(std::uint32_t handle);
  bool is_stub(std::uint32_t handle);
  // commands.cc
  int command(File& f, std::uint32_t cmd, const void* in, std::size_t in_len, std::size_t out_len);
  int create_id(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int destroy_id(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int bind(File& f, std::uint32_t handle, const void* addr, std::size_t size);
  int resolve(File& f, std::uint32_t handle, const void* src, std::size_t src_size, const void* dst,
              std::size_t dst_size, std::uint32_t timeout_ms);
  int query_route(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int query(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int connect(File& f, const void* in, std::size_t in_len);
  int accept(File& f, const void* in, std::size_t in_len);
  int reject(File& f, const void* in, std::size_t in_len);
  int init_qp_attr(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int set_option(File& f, const void* in, std::size_t in_len);
  int migrate_id(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  // multicast.cc
  int join_ip_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int join_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  int join(File& f, std::uint32_t handle, std::uint64_t uid, const void* addr, std::size_t size,
           std::uint16_t join_flags, std::uint64_t response, std::size_t out_len);
  int leave_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len);
  /// Runs fn(ctx, cma, now) on the id `handle` of `f` under the CM lock;
  /// ENOENT / EINVAL as ucma_get_ctx, EINVAL for an id of a port space
  /// uroce lacks.
  template <typename F>
  int with_ctx(File& f, std::uint32_t handle, F&& fn);

  std::mutex gsi_mu_;
  verbs::Gsi* gsi_ = nullptr;
  bool shut_ = false;
  std::uint64_t device_guid_ = 0;  ///< network order, as ibv_get_device_guid gives it

  std::mutex files_mu_;  ///< the descriptor table; after the CM lock
  std::unordered_map<int, FilePtr> files_;
  std::deque<int> dead_;  ///< closed descriptors lingering, oldest first
  std::uint32_t next_channel_ = 1;
  static constexpr std::size_t kLingering = 32;
  /// How long close() waits for an event thread to be back in GET_EVENT.
  static constexpr std::chrono::milliseconds kReaderGrace{100};

  // Under the CM lock.
  std::unordered_map<std::uint32_t, Ctx> ctxs_;              ///< by handle
  std::unordered_map<std::uint32_t, std::uint32_t> by_cma_;  ///< CM id -> handle
  std::unordered_map<std::uint32_t, Mc> mcs_;                ///< multicast joins by their id
  std::uint32_t next_mc_ = 0;
  // The handles; after the CM lock.
  std::mutex handles_mu_;
  std::set<std::uint32_t> free_handles_;
  std::uint32_t next_handle_ = 0;
  // Ids of the port spaces uroce lacks (AF_IB's probe): they exist, and
  // can only be destroyed. Their own lock: there may be no CM yet.
  std::mutex stubs_mu_;
  std::unordered_map<std::uint32_t, File*> stubs_;
};

template <typename F>
int Ucma::with_ctx(File& f, std::uint32_t handle, F&& fn) {
  if (is_stub(handle)) return EINVAL;
  verbs::Gsi* g = gsi();
  if (!g) return ENODEV;
  return g->run([&](cm::Cma& cma, cm::Nanos now) {
    int err = 0;
    Ctx* c = find(handle, f, &err);
    return c ? fn(*c, cma, now) : err;
  });
}

}  // namespace uroce::rdmacm
