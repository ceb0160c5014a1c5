/* SPDX-License-Identifier: BSD-3-Clause */
#include "pfc/pause_state.h"

namespace uroce::pfc {

PauseState::PauseState(std::uint8_t lossless, std::uint32_t speed_mbps, WatchdogConfig watchdog,
                       Counters& counters)
    : lossless_(lossless), speed_mbps_(speed_mbps), watchdog_(watchdog), counters_(counters) {}

void PauseState::on_frame(const wire::MacControlFrame& frame, Nanos now) {
  if (frame.opcode == wire::mac_control_opcode::kPause) {
    // 802.3x stops the whole link, whatever the priority.
    counters_.inc(PortCounter::kRxGlobalPause);
    for (unsigned p = 0; p < wire::kNumPriorities; ++p) pause(p, frame.pause_time, now);
    return;
  }
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    const auto bit = static_cast<std::uint8_t>(1u << p);
    if (!(frame.class_enable & bit) || !(lossless_ & bit)) continue;
    if (frame.class_time[p] == 0) {
      counters_.inc(PrioCounter::kRxResume, p);
    } else {
      counters_.inc(PrioCounter::kRxPause, p);
    }
    pause(p, frame.class_time[p], now);
  }
}

void PauseState::pause(unsigned p, std::uint16_t quanta, Nanos now) {
  const auto bit = static_cast<std::uint8_t>(1u << p);
  if (storm_until_[p] > now) {
    counters_.inc(PortCounter::kRxPauseIgnored);
    return;
  }
  if ((active_ & bit) && until_[p] <= now) end(p, until_[p]);  // lapsed before this frame
  if (quanta == 0) {
    if (active_ & bit) end(p, now);
    return;
  }
  if (!(active_ & bit)) {
    active_ |= bit;
    since_[p] = now;
  }
  until_[p] = now + quanta_to_ns(quanta, speed_mbps_);
}

void PauseState::end(unsigned p, Nanos at) {
  active_ &= static_cast<std::uint8_t>(~(1u << p));
  paused_ns_[p] += at > since_[p] ? at - since_[p] : 0;
  counters_.set(PrioCounter::kRxPauseDuration, p, paused_ns_[p] / 1000);
}

void PauseState::publish_duration(unsigned p, Nanos now) {
  const Nanos running = now > since_[p] ? now - since_[p] : 0;
  counters_.set(PrioCounter::kRxPauseDuration, p, (paused_ns_[p] + running) / 1000);
}

std::uint8_t PauseState::paused(Nanos now) {
  if (active_ == 0) return 0;
  for (unsigned p = 0; p < wire::kNumPriorities; ++p) {
    const auto bit = static_cast<std::uint8_t>(1u << p);
    if (!(active_ & bit)) continue;
    if (until_[p] <= now) {
      end(p, until_[p]);
      continue;
    }
    if (watchdog_.detection_ns != 0 && now > since_[p] &&
        now - since_[p] >= watchdog_.detection_ns) {
      end(p, now);
      storm_until_[p] = now + watchdog_.restoration_ns;
      counters_.inc(PortCounter::kPfcStormDetected);
      new_storms_ |= bit;
      continue;
    }
    publish_duration(p, now);
  }
  return active_;
}

}  // namespace uroce::pfc
