/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A context: one opening of a device by a program (the kernel's
// ib_ucontext, what ibv_open_device returns). Its PDs, CQs, completion
// channels, thread domains and device memory belong to it, and objects of
// one context are not mixed with another's (EINVAL), as the kernel
// refuses. The asynchronous events of its CQs, QPs and SRQs (IBA 11.6.3)
// reach the front end through it, naming the verbs objects.

#include <mutex>
#include <unordered_map>

#include "transport/events.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Device;
class Cq;
class QueuePair;
class Srq;

/// What a front end hears of a context's objects outside any completion;
/// called from the engine's thread.
class AsyncEvents {
 public:
  virtual ~AsyncEvents() = default;
  /// A completion found the CQ full (IBV_EVENT_CQ_ERR); reported once.
  virtual void cq_overflow(Cq& cq) = 0;
  /// The QP went to the error state on its own, for `why`. Not reported
  /// once its destruction has begun.
  virtual void qp_error(QueuePair& qp, transport::QpError why) = 0;
  /// An SRQ armed with a limit fell below it (IBV_EVENT_SRQ_LIMIT_REACHED).
  virtual void srq_limit_reached(Srq& srq) = 0;
  /// The QP's send queue drained in SQD (IBV_EVENT_SQ_DRAINED), when its
  /// move to SQD asked to hear of it.
  virtual void sq_drained(QueuePair& qp) = 0;
};

class Context : private transport::EventSink {
 public:
  /// `events`, if not null, hears of the asynchronous events of the
  /// context's objects.
  Context(Device& dev, AsyncEvents* events) : dev_(dev), events_(events) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device& device() const { return dev_; }
  /// The transport's end of the events, for the rings and QPs it makes.
  transport::EventSink* event_sink() { return this; }
  /// The context's live objects: it may be closed only without them.
  UseCount& objects() { return objects_; }
  bool busy() const { return objects_.busy(); }

  /// A QP of the context, by its transport QP (for its events).
  void enter(const transport::Qp& qp, QueuePair& owner);
  void leave(const transport::Qp& qp);

 private:
  void cq_overflow(transport::Cq& cq) override;
  void qp_error(transport::Qp& qp, transport::QpError why) override;
  void srq_limit_reached(transport::RecvQueue& srq) override;
  void sq_drained(transport::Qp& qp) override;

  Device& dev_;
  AsyncEvents* events_;
  UseCount objects_;
  std::mutex qps_mu_;
  std::unordered_map<const transport::Qp*, QueuePair*> qps_;
};

}  // namespace uroce::verbs
