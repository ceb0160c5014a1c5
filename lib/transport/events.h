/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Asynchronous events (IBA 11.6.3): what the transport reports about a
// CQ, QP or shared receive queue outside any completion. The verbs layer
// turns them into ibv_async_event records.

#include <cstdint>

namespace uroce::transport {

class Cq;
class Qp;
class RecvQueue;

/// Why a QP went to the error state on its own: IBA 11.6.3.1's affiliated
/// asynchronous errors of a work queue.
enum class QpError : std::uint8_t {
  /// Its completions were lost to a full CQ (IBV_EVENT_QP_FATAL).
  kCatastrophic,
  /// Its responder received an invalid request and NAKed it (Invalid
  /// Request Local WQ Error, IBV_EVENT_QP_REQ_ERR).
  kInvalidRequest,
  /// Its responder found a request violating the memory's protection and
  /// NAKed it (Local Access Violation WQ Error, IBV_EVENT_QP_ACCESS_ERR).
  kAccessViolation,
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  /// A completion found the CQ full (IBV_EVENT_CQ_ERR); reported once.
  virtual void cq_overflow(Cq& cq) = 0;
  /// The QP went to the error state on its own, for `why`.
  virtual void qp_error(Qp& qp, QpError why) = 0;
  /// An SRQ armed with a limit fell below it (IBV_EVENT_SRQ_LIMIT_REACHED);
  /// the limit is disarmed until set again.
  virtual void srq_limit_reached(RecvQueue& srq) = 0;
  /// A QP moved to SQD with en_sqd_async_notify has every message it had
  /// begun acknowledged (IBV_EVENT_SQ_DRAINED).
  virtual void sq_drained(Qp& qp) = 0;
};

}  // namespace uroce::transport
