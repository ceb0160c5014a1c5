/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/xrc_target_block.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>

namespace uroce::verbs {

int make_xrc_target_block() {
  const int fd = memfd_create("uroce-xrc-target", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  void* m = MAP_FAILED;
  const auto fail = [&] {
    const int err = errno;
    if (m != MAP_FAILED) munmap(m, sizeof(XrcTargetShm));
    close(fd);
    return -err;
  };
  // Sealed at its size: no program can shrink it under the others'
  // mappings (which would then fault).
  if (ftruncate(fd, sizeof(XrcTargetShm)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail();
  m = mmap(nullptr, sizeof(XrcTargetShm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return fail();
  auto* shm = static_cast<XrcTargetShm*>(m);
  new (&shm->responder) transport::SharedResponder();
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  const int rc = pthread_mutex_init(&shm->mu, &a);
  pthread_mutexattr_destroy(&a);
  if (rc != 0) {
    errno = rc;
    return fail();
  }
  munmap(m, sizeof(XrcTargetShm));
  return fd;
}

std::unique_ptr<XrcTargetBlock> XrcTargetBlock::map(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  if (static_cast<std::size_t>(st.st_size) != sizeof(XrcTargetShm)) {
    errno = EINVAL;
    return nullptr;
  }
  void* m = mmap(nullptr, sizeof(XrcTargetShm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return nullptr;
  return std::unique_ptr<XrcTargetBlock>(new XrcTargetBlock(static_cast<XrcTargetShm*>(m)));
}

XrcTargetBlock::~XrcTargetBlock() { munmap(shm_, sizeof(XrcTargetShm)); }

void XrcTargetBlock::lock() {
  if (pthread_mutex_lock(&shm_->mu) == EOWNERDEAD) {
    // Its holder died between two changes: the responder may be half
    // changed, so the target QP ends, as after a fatal error.
    transport::SharedResponder& r = shm_->responder;
    r.resp.fatal = true;
    r.resp.fatal_error = transport::QpError::kCatastrophic;
    r.state = transport::QpState::kErr;
    r.attr.qp_state = transport::QpState::kErr;
    std::atomic_ref(r.generation).fetch_add(1, std::memory_order_release);
    pthread_mutex_consistent(&shm_->mu);
  }
}

void XrcTargetBlock::unlock() { pthread_mutex_unlock(&shm_->mu); }

}  // namespace uroce::verbs
