/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A context: one opening of a device by a program (the kernel's
// ib_ucontext, what ibv_open_device returns). Its PDs, CQs, completion
// channels, thread domains and device memory belong to it, and objects of
// one context are not mixed with another's (EINVAL), as the kernel
// refuses; the asynchronous events of its objects go to its event sink.

#include "transport/events.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Device;

class Context {
 public:
  /// `events`, if not null, hears of the asynchronous events of the
  /// context's CQs, QPs and SRQs.
  Context(Device& dev, transport::EventSink* events) : dev_(dev), events_(events) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device& device() const { return dev_; }
  transport::EventSink* events() const { return events_; }
  /// The context's live objects: it may be closed only without them.
  UseCount& objects() { return objects_; }
  bool busy() const { return objects_.busy(); }

 private:
  Device& dev_;
  transport::EventSink* events_;
  UseCount objects_;
};

}  // namespace uroce::verbs
