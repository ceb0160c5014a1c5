/* SPDX-License-Identifier: BSD-3-Clause */
// The libc entry points through which librdmacm reaches the kernel's rdma
// CM, interposed for /dev/infiniband/rdma_cm and the descriptors its open
// gives (drivers/rdmacm/ucma.h); every other path and descriptor goes
// straight to libc, at the cost of one string compare per open and one
// bit test per write, close and fstat. The symbols carry the versions the
// target's libc gives them (the version script drivers/ibverbs generates),
// so that programs and libraries bound to libc's bind here first.

// The definitions below are libc's own names: no fortified inline
// wrappers of them.
#undef _FORTIFY_SOURCE

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "ibverbs/libc_next.h"
#include "rdmacm/ucma.h"

namespace uroce::rdmacm {

namespace {

template <typename Fn>
Fn next(const char* name) {
  return ibverbs::libc_next<Fn>(name);
}

struct Real {
  int (*open)(const char*, int, ...) = next<decltype(open)>("open");
  int (*open64)(const char*, int, ...) = next<decltype(open64)>("open64");
  int (*openat)(int, const char*, int, ...) = next<decltype(openat)>("openat");
  int (*openat64)(int, const char*, int, ...) = next<decltype(openat64)>("openat64");
  int (*open_2)(const char*, int) = next<decltype(open_2)>("__open_2");
  int (*open64_2)(const char*, int) = next<decltype(open64_2)>("__open64_2");
  int (*openat_2)(int, const char*, int) = next<decltype(openat_2)>("__openat_2");
  int (*openat64_2)(int, const char*, int) = next<decltype(openat64_2)>("__openat64_2");
  int (*fstat)(int, struct stat*) = next<decltype(fstat)>("fstat");
  int (*fstat64)(int, struct stat64*) = next<decltype(fstat64)>("fstat64");
  int (*fxstat)(int, int, struct stat*) = next<decltype(fxstat)>("__fxstat");
  int (*fxstat64)(int, int, struct stat64*) = next<decltype(fxstat64)>("__fxstat64");
  Libc libc{next<decltype(Libc::write)>("write"), next<decltype(Libc::read)>("read"),
            next<decltype(Libc::close)>("close"), next<decltype(Libc::fcntl)>("fcntl")};
};

const Real& real() {
  static const Real r;
  return r;
}

// The path is the character device librdmacm opens (relative paths and
// other spellings of it are left to the kernel), and ours while the
// configuration names a uroce device.
bool is_cm_path(const char* path) {
  return path != nullptr && path[0] == '/' && std::strcmp(path, kCmPath) == 0 && Ucma::serves();
}

mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

// What fstat says of a ucma descriptor: a character device, as
// open_cdev insists. Where the kernel has the real one (netlink may then
// have told librdmacm its dev_t), the same device numbers.
template <typename Stat>
void fill_stat(Stat* st) {
  struct stat dev;
  if (stat(kCmPath, &dev) == 0 && S_ISCHR(dev.st_mode)) {
    ibverbs::fill_char_device(st, dev.st_mode, dev.st_rdev);
  } else {
    ibverbs::fill_char_device(st, S_IFCHR | 0666, makedev(10, 0));
  }
}

}  // namespace

const Libc& libc() { return real().libc; }

}  // namespace uroce::rdmacm

using uroce::rdmacm::fill_stat;
using uroce::rdmacm::is_cm_fd;
using uroce::rdmacm::is_cm_path;
using uroce::rdmacm::mode_arg;
using uroce::rdmacm::real;
using uroce::rdmacm::Ucma;

extern "C" {

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().open(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().open64(path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().openat64(dirfd, path, flags, mode);
}

// _FORTIFY_SOURCE's checked opens (no mode: they refuse O_CREAT).
int __open_2(const char* path, int flags) {
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().open_2(path, flags);
}

int __open64_2(const char* path, int flags) {
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().open64_2(path, flags);
}

int __openat_2(int dirfd, const char* path, int flags) {
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().openat_2(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char* path, int flags) {
  if (is_cm_path(path)) return Ucma::get().open(flags);
  return real().openat64_2(dirfd, path, flags);
}

int fstat(int fd, struct stat* st) {
  if (is_cm_fd(fd)) {
    fill_stat(st);
    return 0;
  }
  return real().fstat(fd, st);
}

int fstat64(int fd, struct stat64* st) {
  if (is_cm_fd(fd)) {
    fill_stat(st);
    return 0;
  }
  return real().fstat64(fd, st);
}

// Programs built before glibc 2.33 call these for fstat.
int __fxstat(int ver, int fd, struct stat* st) {
  if (is_cm_fd(fd)) {
    fill_stat(st);
    return 0;
  }
  return real().fxstat(ver, fd, st);
}

int __fxstat64(int ver, int fd, struct stat64* st) {
  if (is_cm_fd(fd)) {
    fill_stat(st);
    return 0;
  }
  return real().fxstat64(ver, fd, st);
}

ssize_t write(int fd, const void* buf, size_t len) {
  if (is_cm_fd(fd)) return Ucma::get().write(fd, buf, len);
  return real().libc.write(fd, buf, len);
}

int close(int fd) {
  if (is_cm_fd(fd)) return Ucma::get().close(fd);
  return real().libc.close(fd);
}

}  // extern "C"
