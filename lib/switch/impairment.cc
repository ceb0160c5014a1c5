/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/impairment.h"

#include "wire/udp.h"

namespace uroce::sw {

namespace {
// A packet held back for reordering goes anyway after this long.
constexpr Nanos kHoldLimit = 1'000'000;
}  // namespace

void Impairment::push(PacketPtr p, Nanos now, PacketPool& pool, std::vector<PacketPtr>& out) {
  if (chance(cfg_.loss)) {
    counters_.lost.add();
    pool.put(std::move(p));
    return;
  }
  if (chance(cfg_.corrupt) && p->bytes.size() > 14) {
    // Past the IP and UDP headers, what the flip lands on is covered by
    // the ICRC (or TCP's checksum): the receiver must notice. A flip in
    // IPv4's UDP checksum field, which RoCEv2 leaves 0, would pass.
    const wire::FrameClass c = wire::classify(p->bytes);
    std::size_t from = 14;
    if (c.ip()) from = c.l4_offset() + wire::UdpHdr::kSize;
    if (from >= p->bytes.size()) from = 14;
    const std::size_t bits = (p->bytes.size() - from) * 8;
    const std::size_t bit = from * 8 + rng_() % bits;
    p->bytes[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    counters_.corrupted.add();
  }
  PacketPtr copy;
  if (chance(cfg_.duplicate)) {
    copy = pool.get(p->bytes);
    copy->ingress = p->ingress;
    copy->priority = p->priority;
    counters_.duplicated.add();
  }
  if (!held_ && chance(cfg_.reorder)) {
    counters_.reordered.add();
    held_ = std::move(p);
    held_until_ = now + kHoldLimit;
  } else {
    emit(std::move(p), now, out);
    if (held_) emit(std::move(held_), now, out);  // overtaken: now it goes
  }
  if (copy) emit(std::move(copy), now, out);
}

void Impairment::emit(PacketPtr p, Nanos now, std::vector<PacketPtr>& out) {
  if (cfg_.delay_ns == 0 && cfg_.jitter_ns == 0) {
    out.push_back(std::move(p));
    return;
  }
  Nanos due = now + cfg_.delay_ns;
  if (cfg_.jitter_ns > 0) due += rng_() % (cfg_.jitter_ns + 1);
  // Jitter does not reorder: a packet never leaves before the one ahead.
  due = std::max(due, last_due_);
  last_due_ = due;
  p->due = due;
  counters_.delayed.add();
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
