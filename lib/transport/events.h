/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Asynchronous events (IBA 11.6.3): what the transport reports about a
// CQ, QP or shared receive queue outside any completion. The verbs layer
// turns them into ibv_async_event records.

namespace uroce::transport {

class Cq;
class Qp;
class RecvQueue;

class EventSink {
 public:
  virtual ~EventSink() = default;
  /// A completion found the CQ full (IBV_EVENT_CQ_ERR); reported once.
  virtual void cq_overflow(Cq& cq) = 0;
  /// The QP went to the error state on its own, its completions lost to
  /// a full CQ (IBV_EVENT_QP_FATAL).
  virtual void qp_fatal(Qp& qp) = 0;
  /// An SRQ armed with a limit fell below it (IBV_EVENT_SRQ_LIMIT_REACHED);
  /// the limit is disarmed until set again.
  virtual void srq_limit_reached(RecvQueue& srq) = 0;
};

}  // namespace uroce::transport
