/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What liburoce-ibverbs.so's interposed libc entry points share
// (uverbs_node.cc here, drivers/rdmacm/interpose.cc): the libc definition
// they stand in front of, and the stat of a character device they report
// for the /dev/infiniband paths a program expects of an RDMA device. The
// symbols themselves get libc's versions from the version script that
// CMakeLists generates (uroce_interpose_libc).

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstring>

namespace uroce::ibverbs {

/// The next definition of libc's `name` after ours (libc's own).
template <typename Fn>
Fn libc_next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

/// Fills a stat (or stat64) as the kernel does for a character device
/// node of `mode` and `rdev`, owned by root.
template <typename Stat>
void fill_char_device(Stat* st, mode_t mode, dev_t rdev) {
  std::memset(st, 0, sizeof(*st));
  st->st_mode = mode;
  st->st_rdev = rdev;
  st->st_nlink = 1;
  st->st_blksize = 4096;
}

}  // namespace uroce::ibverbs
