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

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

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
  std::unique_ptr<uroce::verbs::Pd> pd;
  const int rc = c->dev->with_pd(pd_handle, [&](uroce::verbs::Pd* orig) {
    return orig ? uroce::verbs::Pd::import(*c->ctx, *orig, &pd) : EINVAL;
  });
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* p = new UPd();
  p->ibv.context = context;
  p->ibv.handle = pd_handle;
  p->pd = std::move(pd);
  return &p->ibv;
}

void ibv_unimport_pd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_pd)>("ibv_unimport_pd", "IBVERBS_1.10");
    if (real) real(pd);
    return;
  }
  UPd* p = to_u<UPd>(pd);
  if (!p->pd->imported()) return;  // only what was imported is unimported
  uroce::verbs::Pd::unimport(p->pd);
  delete p;
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_import_mr, "IBVERBS_1.10", nullptr, pd, mr_handle);
  ibv_mr* out = nullptr;
  const int rc = ours(pd->context)->dev->with_mr(mr_handle, [&](uroce::verbs::Mr* orig) {
    if (!orig) return EINVAL;
    out = import_mr(pd, *orig);
    return out ? 0 : errno;
  });
  if (rc != 0) errno = rc;  // no such region, or not in this PD
  return out;
}

void ibv_unimport_mr(ibv_mr* mr) {
  if (!mr || !ours(mr->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_mr)>("ibv_unimport_mr", "IBVERBS_1.10");
    if (real) real(mr);
    return;
  }
  UMr* m = to_u<UMr>(mr);
  if (!m->mr->imported()) return;
  uroce::verbs::Mr::unimport(m->mr);
  delete m;
}

ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_import_dm, "IBVERBS_1.13", nullptr, context, dm_handle);
  std::unique_ptr<uroce::verbs::Dm> dm;
  const int rc = c->dev->with_dm(dm_handle, [&](uroce::verbs::Dm* orig) {
    return orig ? uroce::verbs::Dm::import(*c->ctx, *orig, &dm) : EINVAL;
  });
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  return publish_dm(context, std::move(dm));
}

void ibv_unimport_dm(ibv_dm* dm) {
  if (!dm || !ours(dm->context)) {
    static const auto real = real_fn<decltype(&ibv_unimport_dm)>("ibv_unimport_dm", "IBVERBS_1.13");
    if (real) real(dm);
    return;
  }
  UDm* d = to_u<UDm>(dm);
  if (!d->dm->imported()) return;  // the original, not an import
  uroce::verbs::Dm::unimport(d->dm);
  delete d;
}

}  // extern "C"
