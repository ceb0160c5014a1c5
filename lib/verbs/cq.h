/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Completion queues (IBA 11.2.8) as the verbs see them: the transport's
// ring, which QPs complete into, with the rules around it. Polling an
// empty CQ drives the engine from the program's thread (DESIGN.md,
// progress), so a program spinning on its CQ gets its completions without
// waiting for the poll thread.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>

#include "transport/cq.h"
#include "verbs/completion_channel.h"
#include "verbs/context.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Cq : public transport::Cq {
 public:
  /// A CQ of `cqe` entries, notifying `channel` (if not null) when armed.
  /// EINVAL for 0 or more than the device's max_cqe entries, a completion
  /// vector it does not have, or a channel of another context.
  static int create(Context& ctx, std::int64_t cqe, CompletionChannel* channel, int comp_vector,
                    std::unique_ptr<Cq>* out);
  /// EBUSY while QPs complete into it.
  static int destroy(std::unique_ptr<Cq>& cq);
  ~Cq();

  Context& context() const { return ctx_; }
  CompletionChannel* channel() const { return channel_; }
  UseCount& users() { return users_; }
  /// The program's handle of the CQ (its ibv_cq), for events and channels.
  void* handle = nullptr;

  /// Takes up to `max` completions, oldest first; when there are none,
  /// runs the engine once and looks again. Programs may poll one CQ from
  /// several threads: the ring has one consumer, so they take turns.
  std::uint32_t poll(transport::Wc* out, std::uint32_t max);
  /// The same for a caller that converts completions as it goes: `fn(wc,
  /// n)` takes each chunk of at most `chunk` (at most 32); up to `max` in
  /// all, under one turn of the poll lock, the engine run once only when
  /// there were none at all.
  template <typename F>
  std::uint32_t poll_each(std::uint32_t max, F&& fn) {
    std::lock_guard lock(poll_mu_);
    std::uint32_t got = drain(max, fn);
    if (got == 0 && max > 0) {
      drive();
      got = drain(max, fn);
    }
    return got;
  }
  /// The extended CQ's one-at-a-time polling (start_poll / next_poll /
  /// end_poll): take the poll lock, take completions, give it back.
  void lock() { poll_mu_.lock(); }
  void unlock() { poll_mu_.unlock(); }
  bool take_locked(transport::Wc* out);
  /// ibv_req_notify_cq: without a channel there is nowhere to deliver the
  /// event, and arming succeeds and does nothing, as with the kernel's.
  void req_notify(bool solicited_only);
  /// ibv_resize_cq: EINVAL for a size out of range or smaller than what
  /// waits.
  int resize(std::int64_t cqe);
  /// Removes a QP's completions (it moved to RESET), as mlx5 and rxe
  /// clean their CQs.
  void remove_qp_completions(std::uint32_t qpn);

 private:
  Cq(Context& ctx, std::uint32_t depth) : transport::Cq(depth), ctx_(ctx) {}
  template <typename F>
  std::uint32_t drain(std::uint32_t max, F& fn) {
    // Left unwritten until poll fills it: a Wc's members have defaults,
    // and zeroing 32 of them on every poll_cq was 3 % of a streaming
    // program's time. Wc is an aggregate, so storage of its size and
    // alignment holds Wcs as soon as it exists (implicit object creation).
    alignas(transport::Wc) std::byte raw[32 * sizeof(transport::Wc)];
    transport::Wc* const buf = std::launder(reinterpret_cast<transport::Wc*>(raw));
    std::uint32_t got = 0;
    while (got < max) {
      const std::uint32_t want = std::min<std::uint32_t>(max - got, 32);
      const std::uint32_t k = transport::Cq::poll(buf, want);
      if (k > 0) fn(buf, k);
      got += k;
      if (k < want) break;
    }
    return got;
  }
  void drive();
  Context& ctx_;
  CompletionChannel* channel_ = nullptr;
  std::mutex poll_mu_;  ///< uncontended unless the program polls from several threads
  UseCount users_;
};

}  // namespace uroce::verbs
