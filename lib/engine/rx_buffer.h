/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The receive buffer between the port and the transport, and the software
// PFC that watches it (802.1Qbb, lib/pfc): a NIC's packet buffer, in which
// frames wait when the transport is slower than the link, per priority, so
// that PFC pauses the partner as a lossless priority fills it. Part of the
// engine's host side; engine thread only.
//
// It is used when PFC runs in uroce (the NIC has none) or the receiver is
// made slow on purpose (rx_rate_mbps, a test knob); otherwise frames go
// from the port to the transport directly. A full buffer leaves frames in
// the port's ring; the slow receiver's drops them.

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "engine/counters.h"
#include "engine/frame_path.h"
#include "pfc/classify.h"
#include "pfc/counters.h"
#include "pfc/pause_generator.h"
#include "pfc/pause_state.h"
#include "port/port.h"
#include "wire/roce_frame.h"

namespace uroce::engine {

/// Priority-based Flow Control of the port (lib/pfc).
struct PfcConfig {
  bool enabled = false;
  pfc::XoffConfig xoff;  ///< lossless priorities, thresholds, quanta
  pfc::WatchdogConfig watchdog;
};

struct RxBufferConfig {
  std::uint64_t bytes = 1u << 20;  ///< past this the buffer drops
  std::uint32_t rate_mbps = 0;     ///< frames leave at most this fast; 0: no limit
};

/// The priority PFC holds a route's frames by: its tag's PCP when tagged,
/// otherwise its DSCP's.
inline std::uint8_t route_priority(const wire::RoceRoute& r) {
  return r.vlan ? r.pcp : pfc::dscp_priority(r.dscp);
}

class RxBuffer {
 public:
  /// Hands PFC to the NIC when it can take it (hardware_pfc()), or runs it
  /// here.
  RxBuffer(port::Port& port, const RxBufferConfig& buffer, const PfcConfig& pfc, wire::MacAddr mac,
           FramePath& path, EngineCounters& counters);
  /// Frames still buffered go back to the port.
  ~RxBuffer();
  RxBuffer(const RxBuffer&) = delete;
  RxBuffer& operator=(const RxBuffer&) = delete;

  /// Whether received frames go through the buffer.
  bool active() const { return active_; }
  /// Empties the port into the buffer, as a NIC fills its packet buffer
  /// whatever the host does, then lets out what the transport may take now
  /// (at most `budget` frames) through the engine's receive path. Returns
  /// the frames taken from the port and let out.
  std::uint32_t poll(Nanos now, std::uint16_t budget);

  /// PAUSE and PFC frames: the MAC's own, acted on at once.
  void on_mac_control(wire::ConstBytes frame, Nanos now);

  /// True when the NIC does PFC; false when uroce does, or nobody does.
  bool hardware_pfc() const { return hardware_pfc_; }
  bool software_pfc() const { return pause_.has_value(); }
  /// One iteration of software PFC: what the partner paused now, our XOFF
  /// or XON from the buffer's backlog, sent ahead of anything waiting.
  void run_pfc(Nanos now);
  /// The priorities the partner has paused, as of the last run_pfc.
  std::uint8_t paused() const { return paused_; }

  /// Holds a CNP whose priority is paused (802.1Qbb: a paused priority
  /// sends nothing, CNPs included); false when it is not paused, to send
  /// now. A CNP says "slow down" about now, so only the latest per peer QP
  /// waits, and the list is bounded, since a storm may hold it a while.
  bool hold_cnp(const wire::RoceRoute& route, std::uint32_t dest_qp);
  /// Calls send(route, dest_qp) for every held CNP whose priority is no
  /// longer paused, and forgets it.
  template <typename F>
  void release_cnps(F&& send) {
    auto keep = held_cnps_.begin();
    for (const HeldCnp& h : held_cnps_) {
      if (paused_ >> route_priority(h.route) & 1) {
        *keep++ = h;
      } else {
        send(h.route, h.dest_qp);
      }
    }
    held_cnps_.erase(keep, held_cnps_.end());
  }

  const pfc::Counters& pfc_counters() const { return pfc_counters_; }

 private:
  struct Buffered {
    port::RxFrame frame;
    std::uint32_t charge;  ///< bytes of buffer it holds (at least a share per frame)
    std::uint8_t priority;
  };
  struct HeldCnp {
    wire::RoceRoute route;
    std::uint32_t dest_qp;
  };

  /// The slow receiver (rx_rate_mbps) drops at its buffer's end; otherwise
  /// the engine stops taking frames from the port while the buffer is full.
  bool drop_when_full() const { return buffer_.rate_mbps != 0; }
  bool full() const;
  void fill(port::RxFrame* frames, std::uint16_t n, Nanos now);
  std::uint32_t drain(Nanos now, std::uint16_t budget);
  /// Sends the pending PFC frame ahead of anything waiting; one the port
  /// cannot take stays pending, merged with later ones.
  void send_pfc();

  port::Port& port_;
  const RxBufferConfig buffer_;
  const PfcConfig pfc_;
  const wire::MacAddr mac_;
  FramePath& path_;
  EngineCounters& counters_;
  bool active_ = false;

  std::deque<Buffered> frames_;
  std::uint64_t bytes_ = 0;
  std::array<std::uint64_t, wire::kNumPriorities> backlog_{};  ///< bytes per priority
  double tokens_ = 0;  ///< bytes the rate limit lets out now
  Nanos tokens_at_ = 0;

  pfc::Counters pfc_counters_;
  bool hardware_pfc_ = false;
  std::optional<pfc::PauseState> pause_;        ///< what the partner paused
  std::optional<pfc::PauseGenerator> xoff_;     ///< our pauses
  std::uint8_t paused_ = 0;                     ///< priorities paused this iteration
  std::optional<pfc::PfcRequest> pfc_pending_;  ///< our PFC frame, not sent yet
  std::uint8_t storms_logged_ = 0;
  std::vector<HeldCnp> held_cnps_;
};

}  // namespace uroce::engine
