/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/handoff.h"

#include <algorithm>

#include "engine/params.h"
#include "wire/ib_headers.h"
#include "wire/ip.h"
#include "wire/udp.h"

namespace uroce::engine {

Handoff::Handoff(std::uint16_t lcores)
    : lcores_(std::clamp<std::uint16_t>(lcores, 1, kMaxLcores)),
      boxes_(std::make_unique<Box[]>(lcores_)),
      staged_(std::make_unique<Staged[]>(lcores_)) {}

Handoff::~Handoff() {
  const auto free_copies = [](const std::vector<HandedFrame>& frames) {
    for (const HandedFrame& h : frames)
      if (h.copy) delete static_cast<std::vector<std::uint8_t>*>(h.frame.handle);
  };
  for (std::uint16_t i = 0; i < lcores_; ++i) {
    free_copies(boxes_[i].in);
    for (const auto& to : staged_[i].to) free_copies(to);
  }
}

std::uint16_t Handoff::lcore_of(wire::ConstBytes frame, const wire::FrameClass& c) const {
  if (!c.ip() || c.l4_proto != wire::ip_proto::kUdp) return 0;
  // The UDP header, then the BTH: its destination QP is bytes 5 to 7.
  // Only the port and the QPN are read here; the owner checks the rest.
  const std::size_t udp = c.l4_offset();
  if (frame.size() < udp + wire::UdpHdr::kSize + wire::kBthSize) return 0;
  const std::uint8_t* p = frame.data() + udp;
  if (wire::load_be16(p + 2) != wire::kRoceV2Port) return 0;
  return owner(wire::load_be24(p + wire::UdpHdr::kSize + 5));
}

bool Handoff::reserve(std::uint16_t to) {
  // Counted as staged, so that what waits in the box and on its way to it
  // is bounded together.
  std::atomic<std::uint32_t>& held = boxes_[to].held;
  std::uint32_t n = held.load(std::memory_order_relaxed);
  do {
    if (n >= kMaxHandedFrames) return false;
  } while (!held.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  return true;
}

bool Handoff::pass(std::uint16_t from, std::uint16_t to, const port::RxFrame& f,
                   const wire::FrameClass& c) {
  if (!reserve(to)) return false;
  staged_[from].to[to].push_back({f, c, from, false});
  return true;
}

bool Handoff::pass_copy(std::uint16_t from, std::uint16_t to, wire::ConstBytes frame,
                        const wire::FrameClass& c) {
  if (!reserve(to)) return false;
  auto* bytes = new std::vector<std::uint8_t>(frame.begin(), frame.end());
  const port::RxFrame f{wire::ConstBytes(bytes->data(), bytes->size()), bytes};
  staged_[from].to[to].push_back({f, c, from, true});
  return true;
}

void Handoff::give_back(std::uint16_t lcore, std::vector<HandedFrame>& frames) {
  Staged& s = staged_[lcore];
  for (const HandedFrame& h : frames) {
    if (h.copy)
      delete static_cast<std::vector<std::uint8_t>*>(h.frame.handle);
    else
      s.back[h.from].push_back(h.frame);
  }
  boxes_[lcore].held.fetch_sub(static_cast<std::uint32_t>(frames.size()),
                               std::memory_order_relaxed);
  frames.clear();
}

void Handoff::flush(std::uint16_t from) {
  Staged& s = staged_[from];
  for (std::uint16_t to = 0; to < lcores_; ++to) {
    if (!s.to[to].empty()) {
      Box& b = boxes_[to];
      {
        std::lock_guard lock(b.mu);
        b.in.insert(b.in.end(), s.to[to].begin(), s.to[to].end());
        b.has_in.store(true, std::memory_order_release);
      }
      s.to[to].clear();
    }
    if (!s.back[to].empty()) {
      Box& b = boxes_[to];
      {
        std::lock_guard lock(b.mu);
        b.back.insert(b.back.end(), s.back[to].begin(), s.back[to].end());
        b.has_back.store(true, std::memory_order_release);
      }
      s.back[to].clear();
    }
  }
}

void Handoff::take(std::uint16_t lcore, std::vector<HandedFrame>& out) {
  Box& b = boxes_[lcore];
  if (!b.has_in.load(std::memory_order_acquire)) return;
  std::lock_guard lock(b.mu);
  out.insert(out.end(), b.in.begin(), b.in.end());
  b.in.clear();
  b.has_in.store(false, std::memory_order_relaxed);
}

void Handoff::take_returned(std::uint16_t lcore, std::vector<port::RxFrame>& out) {
  Box& b = boxes_[lcore];
  if (!b.has_back.load(std::memory_order_acquire)) return;
  std::lock_guard lock(b.mu);
  out.insert(out.end(), b.back.begin(), b.back.end());
  b.back.clear();
  b.has_back.store(false, std::memory_order_relaxed);
}

}  // namespace uroce::engine
