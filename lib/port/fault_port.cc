/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/fault_port.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "wire/ethernet.h"

namespace uroce::port {

namespace {

// PAUSE and PFC frames are the link's, not traffic: impairing them would
// test a different link (a lost XOFF overruns a lossless buffer), so they
// pass as the wire carries them.
bool mac_control(wire::ConstBytes f) {
  return f.size() >= wire::EthHdr::kSize &&
         wire::load_be16(f.data() + 12) == wire::ether_type::kMacControl;
}

}  // namespace

FaultPort::FaultPort(std::unique_ptr<Port> inner, const FaultConfig& cfg)
    : Decorator(std::move(inner)),
      // One generator per direction, so that what is received does not
      // change what happens to what is sent.
      rx_(cfg.rx, cfg.seed),
      tx_(cfg.tx, cfg.seed + 1),
      copies_(kFaultCopies) {
  free_copies_.reserve(kFaultCopies);
  for (std::uint16_t i = kFaultCopies; i-- > 0;) free_copies_.push_back(i);
}

FaultPort::~FaultPort() {
  for (std::uint16_t i = 0; i < rx_held_n_; ++i) rx_release(&rx_held_[i], 1);
  for (std::uint16_t i = 0; i < tx_held_n_; ++i) inner_->tx_free(tx_held_[i]);
  for (std::uint16_t i = 0; i < tx_queue_n_; ++i) inner_->tx_free(tx_queue_[i]);
}

bool FaultPort::own(const void* handle) const {
  // std::less: a total order even over pointers into different objects.
  const std::less<const void*> before;
  return !before(handle, copies_.data()) && before(handle, copies_.data() + copies_.size());
}

bool FaultPort::copy(const RxFrame& f, RxFrame& out) {
  if (free_copies_.empty()) return false;
  Copy& c = copies_[free_copies_.back()];
  free_copies_.pop_back();
  c.bytes.assign(f.data.begin(), f.data.end());  // no allocation once the buffer has grown
  out.data = wire::ConstBytes(c.bytes.data(), c.bytes.size());
  out.handle = &c;
  return true;
}

std::uint16_t FaultPort::rx_burst(RxFrame* out, std::uint16_t max) {
  // A poll without a transmit since the last one: what was held back on
  // transmit has no later frame to go behind, so it goes now.
  if (!sent_since_poll_) release_tx_held();
  sent_since_poll_ = false;
  flush_tx();

  max = std::min(max, kRxBurst);
  // Each frame may become two (a duplicate), and the frames held back may
  // all go out behind one of them.
  const std::uint16_t take = max > rx_held_n_ ? (max - rx_held_n_) / 2 : 0;
  RxFrame in[kRxBurst];
  const std::uint16_t got = take > 0 ? inner_->rx_burst(in, take) : 0;
  RxFrame done[kRxBurst];  // the inner port's frames FaultPort is done with
  std::uint16_t n = 0, n_done = 0;
  for (std::uint16_t i = 0; i < got; ++i) {
    RxFrame f = in[i];
    if (mac_control(f.data)) {  // the link's own: never impaired
      out[n++] = f;
      continue;
    }
    const ImpairmentDecision d = rx_.decide();
    if (d.drop) {
      counters_.inc(ImpairmentCounter::kDropped);
      done[n_done++] = f;
      continue;
    }
    RxFrame c;
    if (d.corrupt && copy(f, c)) {
      if (rx_.corrupt(static_cast<Copy*>(c.handle)->bytes))
        counters_.inc(ImpairmentCounter::kCorrupted);
      done[n_done++] = f;
      f = c;
    }
    RxFrame dup;
    const bool duplicated = d.duplicate && copy(f, dup);
    if (duplicated) counters_.inc(ImpairmentCounter::kDuplicated);
    if (d.reorder && rx_held_n_ < kMaxHeld) {
      counters_.inc(ImpairmentCounter::kReordered);
      rx_held_[rx_held_n_++] = f;
    } else {
      out[n++] = f;
      // Overtaken: what was held goes now.
      for (std::uint16_t k = 0; k < rx_held_n_; ++k) out[n++] = rx_held_[k];
      rx_held_n_ = 0;
    }
    if (duplicated) out[n++] = dup;
  }
  if (got == 0 && rx_held_n_ > 0) {
    // Nothing came to overtake the held frames: an idle link lets them go.
    const std::uint16_t k = std::min(rx_held_n_, max);
    std::copy_n(rx_held_.begin(), k, out);
    std::copy(rx_held_.begin() + k, rx_held_.begin() + rx_held_n_, rx_held_.begin());
    rx_held_n_ -= k;
    n = k;
  }
  if (n_done > 0) inner_->rx_release(done, n_done);
  return n;
}

void FaultPort::rx_release(RxFrame* frames, std::uint16_t n) {
  RxFrame theirs[kRxBurst];
  std::uint16_t k = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (own(frames[i].handle)) {
      free_copies_.push_back(
          static_cast<std::uint16_t>(static_cast<const Copy*>(frames[i].handle) - copies_.data()));
      continue;
    }
    theirs[k++] = frames[i];
    if (k == kRxBurst) {
      inner_->rx_release(theirs, k);
      k = 0;
    }
  }
  if (k > 0) inner_->rx_release(theirs, k);
}

std::uint16_t FaultPort::tx_burst(TxFrame* frames, std::uint16_t n) {
  sent_since_poll_ = true;
  if (!flush_tx()) return 0;  // the inner port is full: the caller keeps its frames
  std::uint16_t taken = 0;
  // Room for a frame, its duplicate and every held frame behind it.
  for (; taken < n && tx_queue_n_ + 2 + tx_held_n_ <= kFaultTxQueue; ++taken) {
    TxFrame f = frames[taken];
    if (mac_control(f.room.first(f.length))) {  // the link's own: never impaired
      tx_queue_[tx_queue_n_++] = f;
      continue;
    }
    const ImpairmentDecision d = tx_.decide();
    if (d.drop) {
      counters_.inc(ImpairmentCounter::kDropped);
      inner_->tx_free(f);
      continue;
    }
    if (d.corrupt && tx_.corrupt(f.room.first(f.length)))
      counters_.inc(ImpairmentCounter::kCorrupted);
    // The duplicate needs a buffer of its own from the inner port.
    TxFrame dup;
    const bool duplicated = d.duplicate && inner_->tx_alloc(f.length, dup);
    if (duplicated) {
      std::memcpy(dup.room.data(), f.room.data(), f.length);
      dup.length = f.length;
      dup.ipv4_checksum_offload = f.ipv4_checksum_offload;
      dup.l2_len = f.l2_len;
      counters_.inc(ImpairmentCounter::kDuplicated);
    }
    if (d.reorder && tx_held_n_ < kMaxHeld) {
      counters_.inc(ImpairmentCounter::kReordered);
      tx_held_[tx_held_n_++] = f;
    } else {
      tx_queue_[tx_queue_n_++] = f;
      release_tx_held();  // overtaken: what was held goes now
    }
    if (duplicated) tx_queue_[tx_queue_n_++] = dup;
  }
  flush_tx();
  return taken;
}

void FaultPort::release_tx_held() {
  const auto k =
      static_cast<std::uint16_t>(std::min<std::size_t>(tx_held_n_, kFaultTxQueue - tx_queue_n_));
  std::copy_n(tx_held_.begin(), k, tx_queue_.begin() + tx_queue_n_);
  std::copy(tx_held_.begin() + k, tx_held_.begin() + tx_held_n_, tx_held_.begin());
  tx_queue_n_ += k;
  tx_held_n_ -= k;
}

bool FaultPort::flush_tx() {
  if (tx_queue_n_ == 0) return true;
  static_assert(kFaultTxQueue <= kMaxTxBurst, "the queue goes to the inner port in one burst");
  const std::uint16_t sent = inner_->tx_burst(tx_queue_.data(), tx_queue_n_);
  std::copy(tx_queue_.begin() + sent, tx_queue_.begin() + tx_queue_n_, tx_queue_.begin());
  tx_queue_n_ -= sent;
  return tx_queue_n_ == 0;
}

std::unique_ptr<Port> with_faults(std::unique_ptr<Port> port, const FaultConfig& cfg) {
  if (!cfg.enabled()) return port;
  return std::make_unique<FaultPort>(std::move(port), cfg);
}

}  // namespace uroce::port
