/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A completion channel (ibv_comp_channel): a file descriptor that becomes
// readable when an armed CQ gets a completion, and delivers which CQ it
// was, one event per CQ notification, as the kernel's channel does. One
// channel may serve several CQs.

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "transport/cq.h"
#include "verbs/context.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Cq;

class CompletionChannel : public transport::CqNotifier {
 public:
  /// A channel of `ctx`. EMFILE when no descriptor is left.
  static int create(Context& ctx, std::unique_ptr<CompletionChannel>* out);
  /// EBUSY while CQs notify it.
  static int destroy(std::unique_ptr<CompletionChannel>& ch);

  /// A channel of no context (the tests' own).
  CompletionChannel();
  ~CompletionChannel() override;
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;

  /// The descriptor to poll(2) or block on; readable while events wait.
  int fd() const { return fd_; }

  /// ibv_get_cq_event: the CQ of the next event, waiting for one (unless
  /// the descriptor was made non-blocking, then null with errno EAGAIN).
  transport::Cq* get_event();
  /// The same for a channel of a context, whose CQs are verbs CQs.
  Cq* get_cq_event();

  /// Drops the events of a CQ about to be destroyed.
  void forget(transport::Cq& cq);

  /// Called by the engine thread when an armed CQ completes.
  void notify(transport::Cq& cq) override;

  Context* context() const { return ctx_; }
  UseCount& users() { return users_; }

 private:
  Context* ctx_ = nullptr;
  UseCount users_;
  int fd_ = -1;  ///< eventfd in semaphore mode: one read per event
  std::mutex mu_;
  std::deque<transport::Cq*> events_;
};

}  // namespace uroce::verbs
