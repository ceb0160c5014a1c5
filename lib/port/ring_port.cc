/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/ring_port.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace uroce::port {

namespace {

void* rx_handle(std::uint32_t epoch, std::uint32_t counter) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(std::uint64_t{epoch} << 32 | counter));
}

}  // namespace

RingPort::RingPort(std::unique_ptr<ShmRegion> region, const RingPortInfo& info)
    : region_(std::move(region)),
      rx_(region_->ring(ShmRegion::Ring::kToProgram)),
      tx_(region_->ring(ShmRegion::Ring::kToDaemon)),
      info_(info),
      rx_released_(region_->slots(), 0),
      slot_size_(region_->slot_size()),
      tx_pool_(std::size_t{kRingTxBuffers} * slot_size_),
      tx_in_use_(kRingTxBuffers, 0) {
  static_assert(sizeof(void*) == 8, "a receive handle holds an epoch and a counter");
  tx_free_.reserve(kRingTxBuffers);
  for (std::uint32_t i = kRingTxBuffers; i-- > 0;) tx_free_.push_back(i);
}

std::uint16_t RingPort::rx_burst(RxFrame* out, std::uint16_t max) {
  const std::uint32_t avail = rx_.available();
  if (rx_.corrupt() != rx_corrupt_seen_) {
    // The consumer skipped to the daemon's head: what was handed out is
    // no longer in the ring's window, and its releases must not count.
    rx_corrupt_seen_ = rx_.corrupt();
    rx_out_ = 0;
    std::fill(rx_released_.begin(), rx_released_.end(), 0);
    ++rx_epoch_;
  }
  const std::uint32_t mask = rx_.slots() - 1;
  std::uint16_t n = 0;
  bool skipped = false;
  while (n < max && rx_out_ < avail) {
    const std::uint32_t counter = rx_.position() + rx_out_;
    const wire::ConstBytes f = rx_.peek(rx_out_);
    ++rx_out_;
    if (f.empty()) {
      ++rx_malformed_;
      rx_released_[counter & mask] = 1;
      skipped = true;
      continue;
    }
    out[n++] = RxFrame{f, rx_handle(rx_epoch_, counter)};
  }
  if (skipped) pop_released();
  return n;
}

void RingPort::rx_release(RxFrame* frames, std::uint16_t n) {
  if (rx_.slots() == 0) return;
  const std::uint32_t mask = rx_.slots() - 1;
  for (std::uint16_t i = 0; i < n; ++i) {
    const auto h = reinterpret_cast<std::uintptr_t>(frames[i].handle);
    const auto epoch = static_cast<std::uint32_t>(std::uint64_t{h} >> 32);
    const auto counter = static_cast<std::uint32_t>(h);
    // A frame of an earlier epoch, or one popped already (released
    // twice): its slot is not its own any more.
    if (epoch != rx_epoch_ || counter - rx_.position() >= rx_out_) continue;
    rx_released_[counter & mask] = 1;
  }
  pop_released();
}

void RingPort::pop_released() {
  const std::uint32_t mask = rx_.slots() - 1;
  const std::uint32_t first = rx_.position();
  std::uint32_t k = 0;
  while (k < rx_out_ && rx_released_[(first + k) & mask] != 0) {
    rx_released_[(first + k) & mask] = 0;
    ++k;
  }
  if (k == 0) return;
  rx_.pop(k);
  rx_out_ -= k;
}

bool RingPort::tx_alloc(std::uint32_t size, TxFrame& out) {
  if (size > slot_size_ || tx_free_.empty()) return false;
  const std::uint32_t i = tx_free_.back();
  tx_free_.pop_back();
  tx_in_use_[i] = 1;
  out = TxFrame{};
  out.room = wire::Bytes(tx_pool_.data() + std::size_t{i} * slot_size_, slot_size_);
  out.handle = out.room.data();
  return true;
}

bool RingPort::own_tx(const TxFrame& f, std::uint32_t& index) const {
  // std::less: a total order even over pointers into different objects.
  const std::less<const void*> before;
  const void* begin = tx_pool_.data();
  const void* end = tx_pool_.data() + tx_pool_.size();
  if (before(f.handle, begin) || !before(f.handle, end)) return false;
  const auto off =
      static_cast<std::size_t>(static_cast<const std::uint8_t*>(f.handle) - tx_pool_.data());
  if (off % slot_size_ != 0) return false;
  index = static_cast<std::uint32_t>(off / slot_size_);
  return tx_in_use_[index] != 0;
}

std::uint16_t RingPort::tx_burst(TxFrame* frames, std::uint16_t n) {
  n = std::min(n, kMaxTxBurst);
  std::uint16_t taken = 0;
  for (; taken < n; ++taken) {
    TxFrame& f = frames[taken];
    if (f.length == 0 || f.length > f.room.size() || f.length > slot_size_) {
      ++tx_invalid_;
    } else if (!tx_.push(wire::ConstBytes(f.room.data(), f.length))) {
      break;
    }
    tx_free(f);
  }
  return taken;
}

void RingPort::tx_free(TxFrame& frame) {
  std::uint32_t i = 0;
  if (!own_tx(frame, i)) return;
  tx_in_use_[i] = 0;
  tx_free_.push_back(i);
  frame.handle = nullptr;
  frame.room = {};
  frame.length = 0;
}

}  // namespace uroce::port
