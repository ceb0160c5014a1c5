/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A program's port over the frame rings its device daemon shares with it
// (port/shm_ring.h): frames arrive on Ring::kToProgram and leave on
// Ring::kToDaemon. Received frames are read in place in their slots, so a
// slot goes back to the daemon only once its frame is released and every
// frame before it has gone back too; the engine may hold frames across
// bursts and release them in any order.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "port/params.h"
#include "port/port.h"
#include "port/shm_ring.h"
#include "wire/ethernet.h"

namespace uroce::port {

/// Transmit buffers of a RingPort, each a slot's size, allocated once.
inline constexpr std::uint32_t kRingTxBuffers = 512;
static_assert(kRingTxBuffers >= kMaxTxBurst, "a whole burst can be built at once");

/// What the daemon tells a program about the link its rings stand for.
struct RingPortInfo {
  wire::MacAddr mac;
  std::uint32_t mtu = 0;
  std::uint32_t speed_mbps = 0;
};

class RingPort final : public Port {
 public:
  RingPort(std::unique_ptr<ShmRegion> region, const RingPortInfo& info);
  RingPort(const RingPort&) = delete;
  RingPort& operator=(const RingPort&) = delete;

  std::uint16_t rx_burst(RxFrame* out, std::uint16_t max) override;
  void rx_release(RxFrame* frames, std::uint16_t n) override;
  /// A buffer of the port's pool; false when `size` exceeds a slot or the
  /// pool is empty.
  bool tx_alloc(std::uint32_t size, TxFrame& out) override;
  /// Copies frames into the ring in order and gives their buffers back;
  /// stops at the first the ring has no room for. A frame of no bytes or
  /// more than its buffer is taken and dropped (tx_invalid), since no
  /// retry could send it.
  std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) override;
  void tx_free(TxFrame& frame) override;

  wire::MacAddr mac() const override { return info_.mac; }
  std::uint32_t mtu() const override { return info_.mtu; }
  bool link_up() const override { return link_.load(std::memory_order_acquire); }
  std::uint32_t speed_mbps() const override { return info_.speed_mbps; }

  /// The owner's word on the link (say, the daemon's socket closed); any
  /// thread.
  void set_link(bool up) { link_.store(up, std::memory_order_release); }

  /// Slots the daemon filled with no valid frame (length 0 or past the
  /// slot), skipped.
  std::uint64_t rx_malformed() const { return rx_malformed_; }
  /// Times the daemon's head was impossible and the receive ring was
  /// resynchronised (its frames lost).
  std::uint64_t rx_corrupt() const { return rx_.corrupt(); }
  /// Frames tx_burst dropped for a length no slot can carry.
  std::uint64_t tx_invalid() const { return tx_invalid_; }
  const ShmRegion& region() const { return *region_; }

 private:
  /// Gives back the leading run of released slots.
  void pop_released();
  bool own_tx(const TxFrame& f, std::uint32_t& index) const;

  std::unique_ptr<ShmRegion> region_;
  RingConsumer rx_;
  RingProducer tx_;
  RingPortInfo info_;
  std::atomic<bool> link_{true};

  /// Frames from the front of the receive ring handed out (or skipped)
  /// and not yet popped.
  std::uint32_t rx_out_ = 0;
  /// By slot: released and waiting for those before it.
  std::vector<std::uint8_t> rx_released_;
  /// Handles carry it beside the frame's counter: a release from before a
  /// resynchronisation names slots that are no longer its frame's.
  std::uint32_t rx_epoch_ = 1;
  std::uint64_t rx_corrupt_seen_ = 0;
  std::uint64_t rx_malformed_ = 0;

  std::uint32_t slot_size_ = 0;
  std::vector<std::uint8_t> tx_pool_;  ///< kRingTxBuffers * slot_size_
  std::vector<std::uint32_t> tx_free_;
  std::vector<std::uint8_t> tx_in_use_;
  std::uint64_t tx_invalid_ = 0;
};

}  // namespace uroce::port
