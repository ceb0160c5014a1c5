/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/self_delivery.h"

#include <cstring>

#include "engine/params.h"
#include "wire/classify.h"
#include "wire/ip.h"

namespace uroce::engine {

bool SelfDelivery::to_self(const port::TxFrame& f) const {
  const wire::ConstBytes frame(f.room.data(), f.length);
  if (f.length < wire::EthHdr::kSize ||
      std::memcmp(frame.data(), host_.mac().bytes.data(), host_.mac().bytes.size()) != 0)
    return false;
  const wire::FrameClass c = wire::classify(frame);
  return c.ip() && host_.is_local(c.ip_dst(frame));
}

void SelfDelivery::loop_back(port::TxFrame& f) {
  const std::size_t queued = queue_.size();
  copy_back(f);
  // The copy, its IPv4 checksum filled in, as the receive path sees it.
  if (tap_ && queue_.size() > queued)
    tap_(wire::ConstBytes(queue_.back().data(), queue_.back().size()));
  port_.tx_free(f);
}

void SelfDelivery::copy_back(const port::TxFrame& f) {
  if (queue_.size() >= kMaxLoopback) {
    // As a congested link would: the transport's retries recover.
    counters_.inc(EngineCounter::kTxDropped);
    return;
  }
  std::vector<std::uint8_t> copy;
  if (!spare_.empty()) {
    copy = std::move(spare_.back());
    spare_.pop_back();
  }
  copy.assign(f.room.data(), f.room.data() + f.length);
  if (f.ipv4_checksum_offload && f.length >= std::size_t{f.l2_len} + wire::Ipv4Hdr::kMinSize) {
    // The port would have filled the header checksum in; here no port does.
    std::uint8_t* ip = copy.data() + f.l2_len;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::inet_checksum(ip, wire::Ipv4Hdr::kMinSize));
  }
  queue_.push_back(std::move(copy));
  counters_.inc(EngineCounter::kTxLoopback);
}

std::uint32_t SelfDelivery::run(Nanos now) {
  if (queue_.empty()) return 0;
  // What these frames cause to be looped back lands in queue_, for the
  // next call.
  batch_.swap(queue_);
  const auto n = static_cast<std::uint32_t>(batch_.size());
  for (auto& f : batch_) {
    path_.receive(wire::ConstBytes(f.data(), f.size()), now);
    if (spare_.size() < kSpareFrames) spare_.push_back(std::move(f));
  }
  batch_.clear();
  counters_.inc(EngineCounter::kRxLoopback, n);
  return n;
}

}  // namespace uroce::engine
