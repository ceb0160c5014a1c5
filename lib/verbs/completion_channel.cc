/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/completion_channel.h"

#include "verbs/cq.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace uroce::verbs {

CompletionChannel::CompletionChannel() : fd_(eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE)) {}

CompletionChannel::~CompletionChannel() {
  if (fd_ >= 0) close(fd_);
  if (ctx_) ctx_->objects().release();
}

int CompletionChannel::create(Context& ctx, std::unique_ptr<CompletionChannel>* out) {
  auto ch = std::make_unique<CompletionChannel>();
  if (ch->fd_ < 0) return EMFILE;
  ch->ctx_ = &ctx;
  ctx.objects().acquire();
  *out = std::move(ch);
  return 0;
}

int CompletionChannel::destroy(std::unique_ptr<CompletionChannel>& ch) {
  if (ch->users_.busy()) return EBUSY;
  ch.reset();
  return 0;
}

void CompletionChannel::notify(transport::Cq& cq) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(&cq);
  }
  const std::uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow 2^64 - 2.
  [[maybe_unused]] const ssize_t n = write(fd_, &one, sizeof(one));
}

void CompletionChannel::forget(transport::Cq& cq) {
  std::lock_guard lock(mu_);
  for (auto& e : events_) {
    if (e == &cq) e = nullptr;  // the descriptor's count stays; get_event skips it
  }
}

transport::Cq* CompletionChannel::get_event() {
  for (;;) {
    std::uint64_t v;
    // Semaphore mode: each read takes one event, blocking until there is one.
    if (read(fd_, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return nullptr;
    std::lock_guard lock(mu_);
    if (events_.empty()) {
      errno = EAGAIN;
      return nullptr;
    }
    transport::Cq* cq = events_.front();
    events_.pop_front();
    if (cq) return cq;
  }
}

Cq* CompletionChannel::get_cq_event() { return static_cast<Cq*>(get_event()); }

}  // namespace uroce::verbs
