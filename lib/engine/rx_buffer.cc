/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/rx_buffer.h"

#include <algorithm>
#include <string>

#include "engine/burst_octets.h"
#include "engine/params.h"
#include "log/log.h"
#include "wire/classify.h"
#include "wire/mac_control.h"

namespace uroce::engine {

namespace {
std::string priority_list(std::uint8_t mask) {
  std::string s;
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    if (!(mask & (1u << p))) continue;
    if (!s.empty()) s += ",";
    s += std::to_string(p);
  }
  return s;
}
}  // namespace

RxBuffer::RxBuffer(port::Port& port, const RxBufferConfig& buffer, const PfcConfig& pfc,
                   wire::MacAddr mac, FramePath& path, EngineCounters& counters)
    : port_(port), buffer_(buffer), pfc_(pfc), mac_(mac), path_(path), counters_(counters) {
  if (pfc_.enabled) {
    const std::uint8_t lossless = pfc_.xoff.lossless;
    if (port_.enable_hardware_pfc(lossless, pfc_.xoff.quanta) == 0) {
      hardware_pfc_ = true;
      log::get().info("PFC on priorities {} runs in the NIC", priority_list(lossless));
    } else {
      pfc::XoffConfig x = pfc_.xoff;
      x.speed_mbps = port_.speed_mbps() != 0 ? port_.speed_mbps() : pfc::kDefaultSpeedMbps;
      pause_.emplace(lossless, x.speed_mbps, pfc_.watchdog, pfc_counters_);
      xoff_.emplace(x, pfc_counters_);
      held_cnps_.reserve(kMaxHeldCnps);
      log::get().info("PFC on priorities {} runs in uroce (the port has no PFC offload)",
                      priority_list(lossless));
    }
  }
  active_ = pause_.has_value() || buffer_.rate_mbps > 0;
}

RxBuffer::~RxBuffer() {
  for (Buffered& b : frames_) port_.rx_release(&b.frame, 1);
}

bool RxBuffer::full() const {
  return bytes_ >= buffer_.bytes || frames_.size() + port::kRxBurst > kMaxBufferedFrames;
}

std::uint32_t RxBuffer::poll(Nanos now, std::uint16_t budget) {
  // A full buffer leaves the rest in the port's ring (lossless as long as
  // the ring holds), unless this is the slow receiver of the tests, whose
  // buffer drops like a NIC's.
  port::RxFrame frames[port::kRxBurst];
  std::uint32_t n = 0;
  for (unsigned k = 0; k < kRxBufferBursts; ++k) {
    if (!drop_when_full() && full()) break;
    const std::uint16_t got = port_.rx_burst(frames, port::kRxBurst);
    if (got == 0) break;
    counters_.inc(EngineCounter::kRxBursts);
    counters_.inc(EngineCounter::kRxFrames, got);
    counters_.inc(EngineCounter::kRxBytes, octets(frames, got));
    fill(frames, got, now);
    n += got;
    // A decorated port (faults) may hand out less than a full burst while
    // it has more: only an empty burst says the ring is empty.
    if (got < port::kRxBurst && !port_.short_bursts()) break;
  }
  return n + drain(now, budget);
}

void RxBuffer::fill(port::RxFrame* frames, std::uint16_t n, Nanos now) {
  for (std::uint16_t i = 0; i < n; ++i) {
    const wire::ConstBytes f = frames[i].data;
    const wire::FrameClass c = wire::classify(f);
    if (c.ether_type == wire::ether_type::kMacControl) {
      // The MAC acts on PAUSE and PFC at once; they never wait in line.
      path_.receive(f, now);
      port_.rx_release(&frames[i], 1);
      continue;
    }
    // Each frame holds at least its share of the buffer, so that many
    // small frames fill it (and send XOFF) before they run out the mbufs.
    const auto charge = static_cast<std::uint32_t>(
        std::max<std::uint64_t>(f.size(), buffer_.bytes / kMaxBufferedFrames));
    const std::uint8_t prio = pfc::frame_priority(c);
    // Lossy priorities may fill the buffer up to xoff only: the rest is
    // the lossless priorities' headroom.
    std::uint64_t limit = buffer_.bytes;
    if (xoff_ && !(pfc_.xoff.lossless >> prio & 1)) limit = std::min(limit, pfc_.xoff.xoff_bytes);
    if (drop_when_full() && (bytes_ + charge > limit || frames_.size() >= kMaxBufferedFrames)) {
      counters_.inc(EngineCounter::kRxBufferDropped);
      port_.rx_release(&frames[i], 1);
      continue;
    }
    frames_.push_back({frames[i], charge, prio});
    bytes_ += charge;
    backlog_[prio] += charge;
  }
}

std::uint32_t RxBuffer::drain(Nanos now, std::uint16_t budget) {
  const std::uint32_t rate = buffer_.rate_mbps;
  if (rate != 0) {
    // A token bucket in bytes: rate_mbps / 8000 bytes a nanosecond.
    if (tokens_at_ != 0 && now > tokens_at_)
      tokens_ =
          std::min(kRxTokenBurst, tokens_ + static_cast<double>(now - tokens_at_) * rate / 8000.0);
    tokens_at_ = now;
  }
  port::RxFrame done[port::kRxBurst];
  std::uint16_t n = 0;
  budget = std::min(budget, port::kRxBurst);
  while (!frames_.empty() && n < budget) {
    const Buffered b = frames_.front();
    const std::size_t size = b.frame.data.size();
    if (rate != 0) {
      if (tokens_ < static_cast<double>(size)) break;
      tokens_ -= static_cast<double>(size);
    }
    frames_.pop_front();
    bytes_ -= b.charge;
    backlog_[b.priority] -= b.charge;
    path_.receive(b.frame.data, now);
    done[n++] = b.frame;
  }
  if (n > 0) port_.rx_release(done, n);
  return n;
}

void RxBuffer::on_mac_control(wire::ConstBytes frame, Nanos now) {
  wire::MacControlFrame f;
  if (wire::parse_mac_control_frame(frame, f) != wire::MacControlError::kNone) {
    counters_.inc(EngineCounter::kRxMacControlDropped);
    return;
  }
  // Without PFC in uroce, pauses are the NIC's business or nobody's.
  if (pause_) pause_->on_frame(f, now);
}

void RxBuffer::run_pfc(Nanos now) {
  paused_ = pause_->paused(now);
  if (const std::uint8_t storms = pause_->take_new_storms()) {
    for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
      const auto bit = static_cast<std::uint8_t>(1u << p);
      if (!(storms & bit)) continue;
      // Logged once per priority; the counter keeps the rest.
      if (storms_logged_ & bit) continue;
      storms_logged_ |= bit;
      log::get().warn(
          "PFC storm on priority {}: paused for {} ms without a break; its pauses are "
          "ignored for {} ms (pfc_storm_detected counts every one)",
          p, pfc_.watchdog.detection_ns / 1'000'000, pfc_.watchdog.restoration_ns / 1'000'000);
    }
  }
  if (const auto req = xoff_->update(backlog_, now)) {
    if (pfc_pending_) {
      pfc::merge(*pfc_pending_, *req);
    } else {
      pfc_pending_ = *req;
    }
  }
  if (pfc_pending_) send_pfc();
}

void RxBuffer::send_pfc() {
  port::TxFrame f;
  if (!port_.tx_alloc(wire::kMinFrameSize, f)) return;  // tried again next time
  f.length = static_cast<std::uint32_t>(
      wire::build_pfc_frame(f.room, mac_, pfc_pending_->class_enable, pfc_pending_->class_time));
  if (port_.tx_burst(&f, 1) == 1) {
    counters_.inc(EngineCounter::kTxFrames);
    counters_.inc(EngineCounter::kTxBytes, f.length);
    pfc_pending_.reset();
  } else {
    port_.tx_free(f);
  }
}

bool RxBuffer::hold_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp) {
  if (!(paused_ >> route_priority(route) & 1)) return false;
  counters_.inc(EngineCounter::kTxCnpHeld);
  for (HeldCnp& h : held_cnps_) {
    if (h.dest_qp == dest_qp && h.route.dst_ip == route.dst_ip) {
      h.route = route;
      return true;
    }
  }
  if (held_cnps_.size() < kMaxHeldCnps) held_cnps_.push_back({route, dest_qp});
  return true;
}

}  // namespace uroce::engine
