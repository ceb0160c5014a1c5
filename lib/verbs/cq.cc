/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/cq.h"

#include <cerrno>

#include "verbs/device.h"
#include "verbs/limits.h"

namespace uroce::verbs {

int Cq::create(Context& ctx, std::int64_t cqe, CompletionChannel* channel, int comp_vector,
               std::unique_ptr<Cq>* out) {
  if (cqe <= 0 || cqe > ctx.device().attr().max_cqe || comp_vector < 0 ||
      comp_vector >= kNumCompVectors || (channel && channel->context() != &ctx))
    return EINVAL;
  std::unique_ptr<Cq> cq(new Cq(ctx, static_cast<std::uint32_t>(cqe)));
  // Its QPs may be of any of the device's lcores.
  if (ctx.device().lcores() > 1) cq->set_many_producers();
  cq->set_events(ctx.event_sink());
  if (channel) {
    cq->channel_ = channel;
    channel->users().acquire();
    cq->set_notifier(channel);
  }
  ctx.objects().acquire();
  *out = std::move(cq);
  return 0;
}

int Cq::destroy(std::unique_ptr<Cq>& cq) {
  if (cq->users_.busy()) return EBUSY;
  cq.reset();
  return 0;
}

Cq::~Cq() {
  if (channel_) {
    channel_->forget(*this);
    channel_->users().release();
  }
  ctx_.objects().release();
}

std::uint32_t Cq::poll(transport::Wc* out, std::uint32_t max) {
  std::lock_guard lock(poll_mu_);
  std::uint32_t got = transport::Cq::poll(out, max);
  if (got == 0 && max > 0) {
    // Nothing yet: move the engine ourselves, then look again.
    ctx_.device().drive();
    got = transport::Cq::poll(out, max);
  }
  return got;
}

void Cq::drive() { ctx_.device().drive(); }

bool Cq::take_locked(transport::Wc* out) {
  if (transport::Cq::poll(out, 1) == 1) return true;
  ctx_.device().drive();
  return transport::Cq::poll(out, 1) == 1;
}

void Cq::req_notify(bool solicited_only) {
  if (channel_) arm(solicited_only);
}

int Cq::resize(std::int64_t cqe) {
  Device& dev = ctx_.device();
  if (cqe <= 0 || cqe > dev.attr().max_cqe) return EINVAL;
  // Let the engine finish what is in hand (a NIC would have written those
  // completions already): the check below is against what the CQ holds.
  for (int i = 0; i < 16; ++i) {
    std::uint32_t work = 0;
    if (!dev.engine().try_poll(engine::now_ns(), &work) || work == 0) break;
  }
  if (dev.lcores() > 1) dev.poll();
  std::lock_guard lock(poll_mu_);
  bool ok = false;
  dev.hold_all([&] { ok = transport::Cq::resize(static_cast<std::uint32_t>(cqe)); });
  return ok ? 0 : EINVAL;  // more completions wait than the new size holds
}

void Cq::remove_qp_completions(std::uint32_t qpn) {
  std::lock_guard lock(poll_mu_);
  ctx_.device().hold_all([&] { remove_qp(qpn); });
}

}  // namespace uroce::verbs
