/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/impairment.h"

namespace uroce::sw {

using port::ImpairmentCounter;

namespace {
// A packet held back for reordering goes anyway after this long.
constexpr Nanos kHoldLimit = 1'000'000;
}  // namespace

void Impairment::push(PacketPtr p, Nanos now, PacketPool& pool, std::vector<PacketPtr>& out) {
  const port::ImpairmentDecision d = model_.decide();
  if (d.drop) {
    counters_.inc(ImpairmentCounter::kDropped);
    pool.put(std::move(p));
    return;
  }
  if (d.corrupt && model_.corrupt(p->bytes)) counters_.inc(ImpairmentCounter::kCorrupted);
  PacketPtr copy;
  if (d.duplicate) {
    copy = pool.get(p->bytes);
    copy->ingress = p->ingress;
    copy->priority = p->priority;
    counters_.inc(ImpairmentCounter::kDuplicated);
  }
  if (!held_ && d.reorder) {
    counters_.inc(ImpairmentCounter::kReordered);
    held_ = std::move(p);
    held_until_ = now + kHoldLimit;
  } else {
    emit(std::move(p), now, out);
    if (held_) emit(std::move(held_), now, out);  // overtaken: now it goes
  }
  if (copy) emit(std::move(copy), now, out);
}

void Impairment::emit(PacketPtr p, Nanos now, std::vector<PacketPtr>& out) {
  const ImpairmentConfig& cfg = model_.config();
  if (cfg.delay_ns == 0 && cfg.jitter_ns == 0) {
    out.push_back(std::move(p));
    return;
  }
  // Jitter does not reorder: a packet never leaves before the one ahead.
  const Nanos due = std::max(now + model_.delay(), last_due_);
  last_due_ = due;
  p->due = due;
  counters_.inc(ImpairmentCounter::kDelayed);
  delayed_.push_back(std::move(p));
}

void Impairment::release(Nanos now, std::vector<PacketPtr>& out) {
  if (held_ && now >= held_until_) emit(std::move(held_), now, out);
  while (!delayed_.empty() && delayed_.front()->due <= now) {
    out.push_back(std::move(delayed_.front()));
    delayed_.pop_front();
  }
}

void Impairment::clear(PacketPool& pool) {
  if (held_) pool.put(std::move(held_));
  for (auto& p : delayed_) pool.put(std::move(p));
  delayed_.clear();
}

}  // namespace uroce::sw
