/* SPDX-License-Identifier: BSD-3-Clause */
// Asynchronous events: the context's async_fd counts queued events (an
// eventfd in semaphore mode), so a program may poll(2) it as it would the
// kernel's, and ibv_get_async_event takes them in order.

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

namespace uroce::ibverbs {

void post_async_event(UContext* c, const ibv_async_event& e) {
  {
    std::lock_guard lock(c->async_mu);
    c->async_events.push_back(e);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(c->vctx.context.async_fd, &one, sizeof(one));
}

namespace {
// A queued event whose object was destroyed: skipped, its count consumed.
constexpr auto kForgotten = static_cast<ibv_event_type>(-1);
}  // namespace

void forget_async_events(UContext* c, const void* object) {
  std::lock_guard lock(c->async_mu);
  for (ibv_async_event& e : c->async_events) {
    // The element is one pointer (or a port number, zero-extended: our
    // events are value-initialised); compare its bytes.
    const void* p;
    static_assert(sizeof(e.element) == sizeof(p));
    std::memcpy(&p, &e.element, sizeof(p));
    if (p == object) e.event_type = kForgotten;
  }
}

void ContextEvents::cq_overflow(verbs::Cq& cq) {
  ibv_async_event e{};
  e.element.cq = static_cast<ibv_cq*>(cq.handle);
  e.event_type = IBV_EVENT_CQ_ERR;
  post_async_event(ctx, e);
}

void ContextEvents::qp_error(verbs::QueuePair& qp, transport::QpError why) {
  // As mlx5 reports its work queue errors (mlx5_ib_qp_event).
  ibv_event_type type = IBV_EVENT_QP_FATAL;
  if (why == transport::QpError::kInvalidRequest) type = IBV_EVENT_QP_REQ_ERR;
  if (why == transport::QpError::kAccessViolation) type = IBV_EVENT_QP_ACCESS_ERR;
  if (post_xrc_target_event(qp, type)) return;
  if (qp.handle == nullptr) return;
  ibv_async_event e{};
  e.element.qp = static_cast<ibv_qp*>(qp.handle);
  e.event_type = type;
  post_async_event(ctx, e);
}

void ContextEvents::sq_drained(verbs::QueuePair& qp) {
  if (qp.handle == nullptr) return;
  ibv_async_event e{};
  e.element.qp = static_cast<ibv_qp*>(qp.handle);
  e.event_type = IBV_EVENT_SQ_DRAINED;
  post_async_event(ctx, e);
}

void ContextEvents::srq_limit_reached(verbs::Srq& srq) {
  ibv_async_event e{};
  e.element.srq = static_cast<ibv_srq*>(srq.handle);
  e.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
  post_async_event(ctx, e);
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_get_async_event, "IBVERBS_1.1", -1, context, event);
  if (!event) {
    errno = EINVAL;
    return -1;
  }
  for (;;) {
    std::uint64_t v;
    // Blocks until an event is queued, unless the program made the
    // descriptor non-blocking (then -1 with EAGAIN, as with the kernel's).
    if (read(context->async_fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
    std::lock_guard lock(c->async_mu);
    if (c->async_events.empty()) {
      errno = EAGAIN;
      return -1;
    }
    *event = c->async_events.front();
    c->async_events.pop_front();
    if (event->event_type != kForgotten) return 0;
  }
}

void ibv_ack_async_event(ibv_async_event* event) {
  // The event's object: its context, and the lock, condition and count
  // that acknowledging bumps, as libibverbs does.
  ibv_context* owner = nullptr;
  pthread_mutex_t* mu = nullptr;
  pthread_cond_t* cond = nullptr;
  uint32_t* count = nullptr;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = event->element.cq;
      owner = cq->context, mu = &cq->mutex, cond = &cq->cond, count = &cq->async_events_completed;
      break;
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* srq = event->element.srq;
      owner = srq->context, mu = &srq->mutex, cond = &srq->cond, count = &srq->events_completed;
      break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp* qp = event->element.qp;
      owner = qp->context, mu = &qp->mutex, cond = &qp->cond, count = &qp->events_completed;
      break;
    }
    case IBV_EVENT_WQ_FATAL:
      owner = event->element.wq->context;  // uroce has no WQs: never ours
      break;
    default:
      return;  // port and device events carry no object and count nothing
  }
  if (!ours(owner)) {
    // Another device's event: the real library knows all its kinds.
    static const auto real =
        real_fn<decltype(&ibv_ack_async_event)>("ibv_ack_async_event", "IBVERBS_1.1");
    if (real) real(event);
    return;
  }
  pthread_mutex_lock(mu);
  ++*count;
  pthread_cond_signal(cond);
  pthread_mutex_unlock(mu);
}

}  // extern "C"
