/* SPDX-License-Identifier: BSD-3-Clause */
// The device node of each uroce device, /dev/infiniband/<dev_name>
// (uverbs-uroce0), as stat and access see it. Middleware checks it before
// it takes a device: UCX's uct_ib_device_is_accessible wants stat to say
// S_ISCHR and access(R_OK|W_OK) to succeed, and skips the device silently
// otherwise. No such node exists (uroce has no kernel part), so the stat
// family answers for exactly these paths as the kernel would for a uverbs
// node; every other path goes straight to libc at the cost of a prefix
// compare. Nothing opens the node: the verbs calls never reach the kernel.
//
// Interposing was chosen over a private mount namespace holding the node:
// it needs no privilege and no user namespace (mknod is denied in one, an
// overlay over /dev fails), leaves the host's /dev and its submounts
// (shm, hugepages) alone, and works for a process however it was started,
// as long as it has the preload. What it misses (static binaries, raw
// syscalls) would not load liburoce-ibverbs.so anyway.

// The definitions below are libc's own names: no fortified inline
// wrappers of them.
#undef _FORTIFY_SOURCE

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ibverbs/libc_next.h"
#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

constexpr char kDir[] = "/dev/infiniband/";
constexpr std::size_t kDirLen = sizeof(kDir) - 1;
// The kernel's uverbs nodes: major 231, minors from 192 (IB_UVERBS_BASE_DEV).
constexpr unsigned kUverbsMajor = 231;
constexpr unsigned kUverbsBaseMinor = 192;
// crw-rw-rw-, as the rdma-core udev rules leave uverbs nodes.
constexpr mode_t kMode = S_IFCHR | 0666;

struct Real {
  int (*stat)(const char*, struct stat*) = libc_next<decltype(stat)>("stat");
  int (*stat64)(const char*, struct stat64*) = libc_next<decltype(stat64)>("stat64");
  int (*lstat)(const char*, struct stat*) = libc_next<decltype(lstat)>("lstat");
  int (*lstat64)(const char*, struct stat64*) = libc_next<decltype(lstat64)>("lstat64");
  int (*fstatat)(int, const char*, struct stat*, int) = libc_next<decltype(fstatat)>("fstatat");
  int (*fstatat64)(int, const char*, struct stat64*,
                   int) = libc_next<decltype(fstatat64)>("fstatat64");
  int (*statx)(int, const char*, int, unsigned,
               struct statx*) = libc_next<decltype(statx)>("statx");
  int (*xstat)(int, const char*, struct stat*) = libc_next<decltype(xstat)>("__xstat");
  int (*xstat64)(int, const char*, struct stat64*) = libc_next<decltype(xstat64)>("__xstat64");
  int (*lxstat)(int, const char*, struct stat*) = libc_next<decltype(lxstat)>("__lxstat");
  int (*lxstat64)(int, const char*, struct stat64*) = libc_next<decltype(lxstat64)>("__lxstat64");
  int (*fxstatat)(int, int, const char*, struct stat*,
                  int) = libc_next<decltype(fxstatat)>("__fxstatat");
  int (*fxstatat64)(int, int, const char*, struct stat64*,
                    int) = libc_next<decltype(fxstatat64)>("__fxstatat64");
  int (*access)(const char*, int) = libc_next<decltype(access)>("access");
  int (*faccessat)(int, const char*, int, int) = libc_next<decltype(faccessat)>("faccessat");
  int (*euidaccess)(const char*, int) = libc_next<decltype(euidaccess)>("euidaccess");
  int (*eaccess)(const char*, int) = libc_next<decltype(eaccess)>("eaccess");
};

const Real& real() {
  static const Real r;
  return r;
}

// The device's index when `path` names the node of a uroce device, else
// -1. Only absolute paths spelled as the kernel names the node are ours.
int uverbs_node_index(const char* path) {
  // The cheap test first: every other path stops here.
  if (path == nullptr || path[0] != '/' || std::strncmp(path, kDir, kDirLen) != 0) return -1;
  const char* name = path + kDirLen;
  const std::vector<UDevice*>& devs = devices();
  for (std::size_t i = 0; i < devs.size(); ++i) {
    if (std::strcmp(name, devs[i]->ibv.dev_name) == 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

}  // namespace uroce::ibverbs

namespace {

using uroce::ibverbs::real;
using uroce::ibverbs::uverbs_node_index;

template <typename Stat>
int node_stat(int index, Stat* st) {
  uroce::ibverbs::fill_char_device(
      st, uroce::ibverbs::kMode,
      makedev(uroce::ibverbs::kUverbsMajor,
              uroce::ibverbs::kUverbsBaseMinor + static_cast<unsigned>(index)));
  return 0;
}

// The node is read-write for everyone; nothing may execute it.
int node_access(int mode) {
  if (mode & X_OK) {
    errno = EACCES;
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" {

int __xstat(int ver, const char* path, struct stat* st);
int __xstat64(int ver, const char* path, struct stat64* st);
int __lxstat(int ver, const char* path, struct stat* st);
int __lxstat64(int ver, const char* path, struct stat64* st);
int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags);
int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags);

int stat(const char* path, struct stat* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().stat(path, st);
}

int stat64(const char* path, struct stat64* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().stat64(path, st);
}

// A device node is not a link: lstat says the same.
int lstat(const char* path, struct stat* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().lstat(path, st);
}

int lstat64(const char* path, struct stat64* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().lstat64(path, st);
}

// Only absolute paths are ours, so dirfd never matters.
int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().fstatat(dirfd, path, st, flags);
}

int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().fstatat64(dirfd, path, st, flags);
}

int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* stx) {
  if (const int i = uverbs_node_index(path); i >= 0) {
    std::memset(stx, 0, sizeof(*stx));
    stx->stx_mask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_UID | STATX_GID;
    stx->stx_mode = uroce::ibverbs::kMode;
    stx->stx_nlink = 1;
    stx->stx_blksize = 4096;
    stx->stx_rdev_major = uroce::ibverbs::kUverbsMajor;
    stx->stx_rdev_minor = uroce::ibverbs::kUverbsBaseMinor + static_cast<unsigned>(i);
    return 0;
  }
  return real().statx(dirfd, path, flags, mask, stx);
}

// Programs and libraries built before glibc 2.33 call these for stat.
int __xstat(int ver, const char* path, struct stat* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().xstat(ver, path, st);
}

int __xstat64(int ver, const char* path, struct stat64* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().xstat64(ver, path, st);
}

int __lxstat(int ver, const char* path, struct stat* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().lxstat(ver, path, st);
}

int __lxstat64(int ver, const char* path, struct stat64* st) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().lxstat64(ver, path, st);
}

int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().fxstatat(ver, dirfd, path, st, flags);
}

int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags) {
  if (const int i = uverbs_node_index(path); i >= 0) return node_stat(i, st);
  return real().fxstatat64(ver, dirfd, path, st, flags);
}

int access(const char* path, int mode) {
  if (uverbs_node_index(path) >= 0) return node_access(mode);
  return real().access(path, mode);
}

int faccessat(int dirfd, const char* path, int mode, int flags) {
  if (uverbs_node_index(path) >= 0) return node_access(mode);
  return real().faccessat(dirfd, path, mode, flags);
}

int euidaccess(const char* path, int mode) {
  if (uverbs_node_index(path) >= 0) return node_access(mode);
  return real().euidaccess(path, mode);
}

int eaccess(const char* path, int mode) {
  if (uverbs_node_index(path) >= 0) return node_access(mode);
  return real().eaccess(path, mode);
}

}  // extern "C"
