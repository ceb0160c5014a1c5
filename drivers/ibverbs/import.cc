/* SPDX-License-Identifier: BSD-3-Clause */
// Importing a context and its objects (ibv_import_device, ibv_import_pd,
// ibv_import_mr, ibv_import_dm). With a kernel provider two contexts
// share one kernel context through a duplicated command descriptor. A
// uroce device lives in its process, so an import works between contexts
// of one process: the descriptor names the device, a handle names a PD,
// an MR or a DM of it, and the imported object stands for the original
// (same protection, same keys, same memory) until it is unimported.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "drivers/ibverbs/forward.h"
#include "drivers/ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

std::mutex fds_mu;
// A context's memfd, by inode (every memfd has its own; a dup shares
// it), to its device and the number of contexts holding it.
struct ContextFd {
  UDevice* device;
  int holders;
};
std::unordered_map<ino_t, ContextFd>& context_fds() {
  static auto* m = new std::unordered_map<ino_t, ContextFd>();
  return *m;
}

bool inode_of(int fd, ino_t* ino) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  *ino = st.st_ino;
  return true;
}

// Whether `fd` is a uroce context's descriptor: a memfd named
// kContextFdName, which /proc shows as "/memfd:NAME (deleted)".
bool is_context_fd(int fd) {
  char link[128];
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link));
  return n > 0 && std::string_view(link, static_cast<std::size_t>(n))
                      .starts_with(std::string("/memfd:") + kContextFdName);
}

template <typename T>
T* find(UDevice* d, std::unordered_map<std::uint32_t, T*>& m, std::uint32_t handle) {
  std::lock_guard lock(d->handles_mu);
  const auto it = m.find(handle);
  return it == m.end() ? nullptr : it->second;
}

}  // namespace

void remember_context_fd(int fd, UDevice* d) {
  ino_t ino;
  if (!inode_of(fd, &ino)) return;
  std::lock_guard lock(fds_mu);
  ++context_fds().try_emplace(ino, ContextFd{d, 0}).first->second.holders;
}

void forget_context_fd(int fd) {
  ino_t ino;
  if (!inode_of(fd, &ino)) return;
  std::lock_guard lock(fds_mu);
  const auto it = context_fds().find(ino);
  if (it != context_fds().end() && --it->second.holders == 0) context_fds().erase(it);
}

void remember(UDevice* d, UPd* pd) {
  std::lock_guard lock(d->handles_mu);
  d->pds[pd->ibv.handle] = pd;
}
void remember(UDevice* d, UMr* mr) {
  std::lock_guard lock(d->handles_mu);
  d->mrs[mr->ibv.handle] = mr;
}
void remember(UDevice* d, UDm* dm) {
  std::lock_guard lock(d->handles_mu);
  d->dms[dm->ibv.handle] = dm;
}
// An imported object is never entered; forgetting it leaves the original.
void forget(UDevice* d, UPd* pd) {
  std::lock_guard lock(d->handles_mu);
  if (const auto it = d->pds.find(pd->ibv.handle); it != d->pds.end() && it->second == pd)
    d->pds.erase(it);
}
void forget(UDevice* d, UMr* mr) {
  std::lock_guard lock(d->handles_mu);
  if (const auto it = d->mrs.find(mr->ibv.handle); it != d->mrs.end() && it->second == mr)
    d->mrs.erase(it);
}
void forget(UDevice* d, UDm* dm) {
  std::lock_guard lock(d->handles_mu);
  if (const auto it = d->dms.find(dm->ibv.handle); it != d->dms.end() && it->second == dm)
    d->dms.erase(it);
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

ibv_context* ibv_import_device(int cmd_fd) {
  if (!is_context_fd(cmd_fd)) UROCE_FORWARD(ibv_import_device, "IBVERBS_1.10", nullptr, cmd_fd);
  UDevice* d = nullptr;
  ino_t ino;
  if (inode_of(cmd_fd, &ino)) {
    std::lock_guard lock(fds_mu);
    const auto it = context_fds().find(ino);
    if (it != context_fds().end()) d = it->second.device;
  }
  if (!d) {
    errno = EOPNOTSUPP;  // another process's context: nothing to share
    return nullptr;
  }
  // A context of its own on the same device, which every context of the
  // process shares. It takes the descriptor over, as libibverbs' imported
  // contexts do: ibv_close_device closes it.
  ibv_context* ctx = ibv_open_device(&d->ibv);
  if (!ctx) return nullptr;
  forget_context_fd(ctx->cmd_fd);
  close(ctx->cmd_fd);
  ctx->cmd_fd = cmd_fd;
  remember_context_fd(cmd_fd, d);
  return ctx;
}

ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_import_pd, "IBVERBS_1.10", nullptr, context, pd_handle);
  UPd* orig = find(c->udev, c->udev->pds, pd_handle);
  if (!orig) {
    errno = EINVAL;
    return nullptr;
  }
  auto* p = new UPd();
  p->ibv.context = context;
  p->ibv.handle = pd_handle;
  p->id = orig->id;
  p->imported = orig;
  orig->users.fetch_add(1);  // the original stays while it is imported
  c->objects.fetch_add(1);
  return &p->ibv;
}

void ibv_unimport_pd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_pd)>("ibv_unimport_pd", "IBVERBS_1.10");
    if (real) real(pd);
    return;
  }
  UPd* p = to_u<UPd>(pd);
  if (!p->imported) return;  // only what was imported is unimported
  p->imported->users.fetch_sub(1);
  ours(pd->context)->objects.fetch_sub(1);
  delete p;
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_import_mr, "IBVERBS_1.10", nullptr, pd, mr_handle);
  UContext* c = ours(pd->context);
  UMr* orig = find(c->udev, c->udev->mrs, mr_handle);
  if (!orig || orig->pd->id != to_u<UPd>(pd)->id) {
    errno = EINVAL;  // no such region, or not in this PD
    return nullptr;
  }
  auto* m = new UMr();
  m->ibv = orig->ibv;
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->pd = to_u<UPd>(pd);
  m->imported = true;
  m->pd->users.fetch_add(1);
  return &m->ibv;
}

void ibv_unimport_mr(ibv_mr* mr) {
  if (!mr || !ours(mr->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_mr)>("ibv_unimport_mr", "IBVERBS_1.10");
    if (real) real(mr);
    return;
  }
  UMr* m = to_u<UMr>(mr);
  if (!m->imported) return;
  m->pd->users.fetch_sub(1);
  delete m;
}

ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_import_dm, "IBVERBS_1.13", nullptr, context, dm_handle);
  UDm* orig = find(c->udev, c->udev->dms, dm_handle);
  if (!orig) {
    errno = EINVAL;
    return nullptr;
  }
  auto* d = new UDm();
  d->ibv = orig->ibv;
  d->ibv.context = context;
  d->mem = orig->mem;  // the same memory, which lives while either does
  c->objects.fetch_add(1);
  return &d->ibv;
}

void ibv_unimport_dm(ibv_dm* dm) {
  if (!dm || !ours(dm->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_dm)>("ibv_unimport_dm", "IBVERBS_1.13");
    if (real) real(dm);
    return;
  }
  UContext* c = ours(dm->context);
  UDm* d = to_u<UDm>(dm);
  std::lock_guard lock(c->udev->handles_mu);
  if (const auto it = c->udev->dms.find(dm->handle); it != c->udev->dms.end() && it->second == d)
    return;  // the original, not an import
  c->objects.fetch_sub(1);
  delete d;
}

}  // extern "C"
