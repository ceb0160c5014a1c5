/* SPDX-License-Identifier: BSD-3-Clause */
// The ucma descriptors: open and close, the command header, GET_EVENT and
// the events' bookkeeping (ucma.c ucma_write, ucma_get_event,
// ucma_event_handler, ucma_close), and the eventfd counts that make a
// descriptor poll readable while its channel has events.

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "ibverbs/provider.h"
#include "log/log.h"
#include "rdmacm/abi.h"
#include "rdmacm/ucma.h"
#include "verbs/device.h"

namespace uroce::rdmacm {

std::atomic<std::uint64_t> cm_fds[kMaxFds / 64];

namespace {

// A GET_EVENT whose descriptor was closed under it, or whose device is
// going away with the process: the kernel's write would block until the
// process ends (the file stays open while a write is in it), and so does
// this one, holding nothing.
[[noreturn]] void block_forever() {
  for (;;) pause();
}

void mark(int fd, bool on) {
  const auto u = static_cast<unsigned>(fd);
  const std::uint64_t bit = std::uint64_t{1} << (u & 63);
  if (on) {
    cm_fds[u >> 6].fetch_or(bit, std::memory_order_relaxed);
  } else {
    cm_fds[u >> 6].fetch_and(~bit, std::memory_order_relaxed);
  }
}

}  // namespace

Ucma& Ucma::get() {
  static Ucma* const u = new Ucma();
  return *u;
}

verbs::Gsi* Ucma::gsi() {
  std::lock_guard lock(gsi_mu_);
  if (gsi_ || shut_) return gsi_;
  // The process's first uroce device: the CM's device, whatever address
  // an id binds (one device per process, as uroce-run gives).
  const auto& devs = ibverbs::devices();
  if (devs.empty()) return nullptr;
  verbs::Device* dev = ibverbs::open_device(devs.front());
  if (!dev) return nullptr;
  device_guid_ = htobe64(dev->attr().node_guid);
  gsi_ = &dev->gsi();
  gsi_->set_observer(this);
  // Registered after the device's own at-exit handler, so run before it:
  // no command reaches the CM while the device goes.
  std::atexit(at_exit);
  return gsi_;
}

void Ucma::at_exit() {
  Ucma& u = get();
  std::lock_guard lock(u.gsi_mu_);
  if (u.gsi_) {
    // The kernel closes a process's descriptors as it ends, and ucma_close
    // destroys their ids: connections are rejected or disconnected, so
    // the peers hear of it now rather than from their QPs' timeouts.
    u.gsi_->run([&](cm::Cma& cma, cm::Nanos now) {
      for (const auto& [h, c] : u.ctxs_) cma.destroy_id(c.cma, now);
      u.ctxs_.clear();
      u.by_cma_.clear();
      u.mcs_.clear();
    });
    u.gsi_->set_observer(nullptr);
  }
  u.gsi_ = nullptr;
  u.shut_ = true;
}

Ucma::FilePtr Ucma::file(int fd) {
  std::lock_guard lock(files_mu_);
  const auto it = files_.find(fd);
  return it == files_.end() ? nullptr : it->second;
}

bool Ucma::serves() { return !ibverbs::devices().empty(); }

int Ucma::open(int flags) {
  // A semaphore eventfd: its count is the events waiting, so it polls
  // readable exactly when GET_EVENT would not block.
  const int fd = eventfd(0, EFD_SEMAPHORE | (flags & O_CLOEXEC ? EFD_CLOEXEC : 0) |
                                (flags & O_NONBLOCK ? EFD_NONBLOCK : 0));
  if (fd < 0) return -1;
  if (fd >= kMaxFds) {
    libc().close(fd);
    errno = EMFILE;
    return -1;
  }
  auto f = std::make_shared<File>();
  f->fd = fd;
  {
    std::lock_guard lock(files_mu_);
    f->channel = next_channel_++;
    files_[fd] = f;
  }
  mark(fd, true);
  return fd;
}

int Ucma::close(int fd) {
  FilePtr f = file(fd);
  if (!f || f->closed.exchange(true, std::memory_order_relaxed)) {
    errno = EBADF;
    return -1;
  }
  {
    std::lock_guard lock(stubs_mu_);
    std::erase_if(stubs_, [&](const auto& s) {
      if (s.second != f.get()) return false;
      free_handle(s.first);
      return true;
    });
  }
  {
    // ucma_close: every id of the file goes, which rejects or disconnects
    // what it had; a GET_EVENT waiting on it wakes, and blocks for good.
    std::lock_guard lock(gsi_mu_);
    if (gsi_) {
      gsi_->run([&](cm::Cma& cma, cm::Nanos now) {
        std::vector<std::uint32_t> mine;
        for (const auto& [h, c] : ctxs_)
          if (c.file == f.get()) mine.push_back(h);
        for (std::uint32_t h : mine) {
          cma.destroy_id(ctxs_.at(h).cma, now);
          erase_ctx(h);
        }
      });
    }
  }
  // The descriptor lingers a while, dead: programs commonly let a thread
  // loop in rdma_get_cm_event while another destroys the channel (rping
  // does). With the kernel that thread is back inside write() before the
  // teardown's system calls are done, and blocks there for good, the file
  // held open by the write; here the teardown can win the race, and the
  // late GET_EVENT must find the dead file, not EBADF. The oldest dead
  // descriptors are closed for real.
  // The same race from the other side: the looping thread has just been
  // handed an event and is on its way back, through librdmacm, to read the
  // channel's descriptor, which the teardown frees with the channel once
  // this close returns. With the kernel the way back takes a system call's
  // time and wins; here, give a thread that GET_EVENT served (not this
  // one) a moment to be back inside it, as it would be with the kernel.
  const pid_t reader = f->last_reader.load(std::memory_order_relaxed);
  if (reader != 0 && reader != gettid()) {
    const auto out_of_get = [&] {
      return f->gets_begun.load(std::memory_order_acquire) ==
             f->gets_ended.load(std::memory_order_acquire);
    };
    const auto until = std::chrono::steady_clock::now() + kReaderGrace;
    while (out_of_get() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    // Counted, so that a grace too short for a loaded machine shows in
    // uroce-stat rather than as a program's rare EBADF.
    const bool ran_out = out_of_get();
    {
      std::lock_guard lock(gsi_mu_);
      if (gsi_) {
        gsi_->count(verbs::GsiCounter::kUcmaCloseReaderWaits);
        if (ran_out) gsi_->count(verbs::GsiCounter::kUcmaCloseReaderExpired);
      }
    }
    if (ran_out)
      log::get().debug("rdma_cm: close of fd {}: thread {} not back in GET_EVENT after {} ms", fd,
                       reader, kReaderGrace.count());
  }
  std::vector<int> expired;
  {
    std::lock_guard lock(files_mu_);
    // Dead, it never polls readable.
    std::uint64_t one;
    while (f->signaled > 0 && libc().read(f->fd, &one, sizeof(one)) == sizeof(one)) --f->signaled;
    dead_.push_back(fd);
    while (dead_.size() > kLingering) {
      expired.push_back(dead_.front());
      files_.erase(dead_.front());
      dead_.pop_front();
    }
  }
  for (const int old : expired) {
    mark(old, false);
    libc().close(old);
  }
  return 0;
}

ssize_t Ucma::write(int fd, const void* buf, std::size_t len) {
  const FilePtr f = file(fd);
  if (!f) {
    errno = EBADF;
    return -1;
  }
  if (f->closed.load(std::memory_order_relaxed)) {
    // A GET_EVENT that lost the race with close() (see close); any other
    // command on a closed descriptor fails as on one that is gone.
    rdma_ucm_cmd_hdr hdr;
    if (len >= sizeof(hdr)) std::memcpy(&hdr, buf, sizeof(hdr));
    if (len >= sizeof(hdr) && hdr.cmd == RDMA_USER_CM_CMD_GET_EVENT) {
      f->gets_begun.fetch_add(1, std::memory_order_release);
      block_forever();
    }
    errno = EBADF;
    return -1;
  }
  // ucma_write: the header, a known command, an input that fits.
  rdma_ucm_cmd_hdr hdr;
  if (len < sizeof(hdr)) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(&hdr, buf, sizeof(hdr));
  if (hdr.in + sizeof(hdr) > len) {
    errno = EINVAL;
    return -1;
  }
  const bool get = hdr.cmd == RDMA_USER_CM_CMD_GET_EVENT;
  if (get) f->gets_begun.fetch_add(1, std::memory_order_release);
  const int err =
      command(*f, hdr.cmd, static_cast<const std::uint8_t*>(buf) + sizeof(hdr), hdr.in, hdr.out);
  if (get) {
    f->last_reader.store(gettid(), std::memory_order_relaxed);
    f->gets_ended.fetch_add(1, std::memory_order_release);
  }
  if (err != 0) {
    errno = err;
    return -1;
  }
  return static_cast<ssize_t>(len);
}

// --- ids -------------------------------------------------------------------------------

Ucma::Ctx* Ucma::find(std::uint32_t handle, const File& f, int* err) {
  const auto it = ctxs_.find(handle);
  if (it == ctxs_.end()) {
    *err = ENOENT;
    return nullptr;
  }
  if (it->second.file != &f) {
    *err = EINVAL;
    return nullptr;
  }
  return &it->second;
}

std::uint32_t Ucma::alloc_handle() {
  std::lock_guard lock(handles_mu_);
  if (free_handles_.empty()) return next_handle_++;
  const std::uint32_t h = *free_handles_.begin();
  free_handles_.erase(free_handles_.begin());
  return h;
}

void Ucma::free_handle(std::uint32_t handle) {
  std::lock_guard lock(handles_mu_);
  free_handles_.insert(handle);
}

bool Ucma::is_stub(std::uint32_t handle) {
  std::lock_guard lock(stubs_mu_);
  return stubs_.contains(handle);
}

std::uint32_t Ucma::add_ctx(File& f, std::uint32_t cma_id, std::uint64_t uid, cm::QpType type) {
  const std::uint32_t h = alloc_handle();
  Ctx& c = ctxs_[h];
  c.handle = h;
  c.cma = cma_id;
  c.uid = uid;
  c.file = &f;
  c.qp_type = type;
  by_cma_[cma_id] = h;
  return h;
}

void Ucma::erase_ctx(std::uint32_t handle) {
  const auto it = ctxs_.find(handle);
  if (it == ctxs_.end()) return;
  by_cma_.erase(it->second.cma);
  ctxs_.erase(it);
  // ucma_cleanup_multicast: the id's joins go with it (the CM forgets
  // them with the id).
  std::erase_if(mcs_, [handle](const auto& m) { return m.second.ctx == handle; });
  free_handle(handle);
}

// --- events ----------------------------------------------------------------------------

void Ucma::cm_changed(cm::Cma& cma) {
  // Each descriptor's eventfd counts its channel's waiting events. Only
  // this code reads or writes those counts, so a decrement never blocks.
  std::lock_guard lock(files_mu_);
  for (auto& [fd, f] : files_) {
    if (f->closed.load(std::memory_order_relaxed)) continue;
    const std::uint64_t pending = cma.pending_events(f->channel);
    if (pending > f->signaled) {
      const std::uint64_t add = pending - f->signaled;
      if (libc().write(f->fd, &add, sizeof(add)) == sizeof(add)) f->signaled = pending;
    }
    while (f->signaled > pending) {
      std::uint64_t one;
      if (libc().read(f->fd, &one, sizeof(one)) != sizeof(one)) break;
      --f->signaled;
    }
  }
}

bool Ucma::take_event(File& f, cm::Cma& cma, const cm::CmaEvent& e, rdma_ucm_event_resp& r,
                      cm::Nanos now) {
  r = {};
  Ctx* c = nullptr;
  if (e.event == cm::CmaEventType::kConnectRequest) {
    // ucma_get_event: the new id is handed out with its event, which the
    // listener reports (and counts), under the listener's uid.
    const auto l = by_cma_.find(e.listen_id);
    const auto info = cma.query(e.id);
    if (l == by_cma_.end() || !info) {
      cma.destroy_id(e.id, now);
      return false;
    }
    Ctx& listener = ctxs_.at(l->second);
    r.uid = listener.uid;
    r.id = add_ctx(f, e.id, 0, info->qp_type);
    ++listener.events_reported;
    c = &ctxs_.at(r.id);
  } else if (e.event == cm::CmaEventType::kMulticastJoin ||
             e.event == cm::CmaEventType::kMulticastError) {
    // ucma_event_handler: a join's events carry the join's uid and id;
    // ucma_get_event counts them as the join's and the id's.
    const auto m = mcs_.find(static_cast<std::uint32_t>(e.mc));
    if (m == mcs_.end() || !ctxs_.contains(m->second.ctx)) return false;
    c = &ctxs_.at(m->second.ctx);
    r.uid = m->second.uid;
    r.id = m->second.id;
    ++m->second.events_reported;
    ++c->events_reported;
  } else {
    const auto it = by_cma_.find(e.id);
    // ucma_event_handler: events of a new connection before the program
    // set its uid (in ACCEPT) are dropped.
    if (it == by_cma_.end()) return false;
    c = &ctxs_.at(it->second);
    if (c->uid == 0) return false;
    r.uid = c->uid;
    r.id = c->handle;
    ++c->events_reported;
  }
  to_event_resp(e, c->qp_type == cm::QpType::kUd, &r);
  return true;
}

int Ucma::get_event(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  // Older librdmacm asks without the ECE tail.
  if (out_len < offsetof(rdma_ucm_event_resp, ece)) return ENOSPC;
  const auto cmd = command_struct<rdma_ucm_get_event>(in, in_len);
  verbs::Gsi* g = gsi();
  if (!g) return ENODEV;
  const bool nonblock = (libc().fcntl(f.fd, F_GETFL) & O_NONBLOCK) != 0;
  rdma_ucm_event_resp resp{};
  int err = 0;
  bool closed = false;
  const bool done = g->wait([&](cm::Cma& cma, cm::Nanos now) {
    if (f.closed.load(std::memory_order_relaxed)) {
      closed = true;
      return true;
    }
    cm::CmaEvent e;
    while (cma.get_event(f.channel, e))
      if (take_event(f, cma, e, resp, now)) return true;
    if (nonblock) {
      err = EAGAIN;
      return true;
    }
    return false;
  });
  if (!done || closed) block_forever();
  if (err != 0) return err;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(cmd.response)), &resp,
              std::min(out_len, sizeof(resp)));
  return 0;
}

}  // namespace uroce::rdmacm
