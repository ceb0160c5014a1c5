/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The memory the processes serving one XRC target QP share
// (transport/responder_state.h): the target QP's responder and the
// process-shared mutex that orders them. The device daemon makes it, a
// memfd of its own, when the target QP's maker asks, and hands a
// descriptor of it to each program that receives for the target QP; each
// maps it (XrcTargetBlock::map) and holds the mutex around everything its
// Qp of the target QP does.
//
// The mutex is robust: a program that dies holding it leaves the next
// taker EOWNERDEAD, and a responder that may be half changed, so the QP
// then ends in the error state as if a request had failed (the other
// programs' peers see a fatal NAK or a timeout, never bytes out of order).

#include <pthread.h>

#include <cstdint>
#include <memory>

#include "transport/qp.h"

namespace uroce::verbs {

struct XrcTargetShm {
  pthread_mutex_t mu;
  transport::SharedResponder responder;
};

/// Makes a block, zeroed, its mutex ready: a descriptor (close-on-exec),
/// or -errno.
int make_xrc_target_block();

/// One program's mapping of a block, and the lock a Qp of the target QP
/// takes.
class XrcTargetBlock final : public transport::SharedResponderLock {
 public:
  /// Maps the block `fd` is open on (the descriptor stays the caller's).
  /// Null with errno when it is not one.
  static std::unique_ptr<XrcTargetBlock> map(int fd);
  ~XrcTargetBlock() override;
  XrcTargetBlock(const XrcTargetBlock&) = delete;
  XrcTargetBlock& operator=(const XrcTargetBlock&) = delete;

  transport::SharedResponder* responder() { return &shm_->responder; }
  void lock() override;
  void unlock() override;

 private:
  explicit XrcTargetBlock(XrcTargetShm* shm) : shm_(shm) {}
  XrcTargetShm* const shm_;
};

}  // namespace uroce::verbs
