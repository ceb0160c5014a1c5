/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the transport hands down to be sent, and the hooks congestion
// control plugs into.

#include <array>
#include <cstdint>

#include "transport/limits.h"
#include "transport/types.h"
#include "wire/ib_headers.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

namespace uroce::transport {

/// One packet: the route (Ethernet/IP/UDP template), BTH and extension
/// headers, and its payload as segments of registered memory. The engine
/// turns it into a frame; the payload bytes are read during transmit().
struct TxPacket {
  const wire::RouteTemplate* route = nullptr;
  wire::Bth bth;
  wire::ExtHeaders ext;
  /// [0, payload_segs) are set; the rest are never written nor read.
  std::array<wire::GatherSeg, kMaxSge + 1> payload;
  std::uint32_t payload_segs = 0;
  std::uint32_t payload_len = 0;
};

/// Where packets go. transmit() copies what it needs before returning.
class TxSink {
 public:
  virtual ~TxSink() = default;
  /// Sends one packet; false when there is no room now (the QP keeps the
  /// packet's state and offers it again on its next turn).
  virtual bool transmit(const TxPacket& pkt) = 0;
};

/// The per-QP transmit gate congestion control fills (DCQCN's pacer): may
/// this QP send `bytes` now? If not, `*retry_at` says when to ask again.
class TxGate {
 public:
  virtual ~TxGate() = default;
  virtual bool admit(std::uint32_t bytes, Nanos now, Nanos* retry_at) = 0;
};

/// Congestion signals seen on receive, reported upward.
class CongestionObserver {
 public:
  virtual ~CongestionObserver() = default;
  /// A packet for `qpn` arrived CE-marked (the notification point's input).
  virtual void on_ce_marked(std::uint32_t qpn, const wire::RocePacket& pkt, Nanos now) = 0;
  /// A CNP for `qpn` arrived (the reaction point's input).
  virtual void on_cnp(std::uint32_t qpn, Nanos now) = 0;
};

}  // namespace uroce::transport
