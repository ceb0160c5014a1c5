/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the switch reads and changes in a frame: its VLAN, its priority
// (trusting PCP or DSCP through a configurable map) and its ECN field,
// which it sets to CE when a queue grows (RFC 3168). The ICRC of RoCEv2
// masks the IP ECN bits, so marking keeps it valid; the IPv4 header
// checksum is updated.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pfc/quanta.h"
#include "wire/bytes.h"
#include "wire/classify.h"
#include "wire/ip.h"

namespace uroce::sw {

using pfc::Nanos;

/// Which field names a frame's priority, and how it maps to one.
struct PriorityMap {
  bool trust_pcp = false;  ///< tagged frames: PCP; otherwise DSCP
  std::array<std::uint8_t, 64> dscp{};
  std::array<std::uint8_t, 8> pcp{};
  PriorityMap() {
    for (unsigned d = 0; d < 64; ++d) dscp[d] = static_cast<std::uint8_t>(d >> 3);
    for (unsigned p = 0; p < 8; ++p) pcp[p] = static_cast<std::uint8_t>(p);
  }
};

/// What the pipeline needs to know of a frame: lib/wire's classification
/// and the priority the switch gives it.
struct FrameInfo : wire::FrameClass {
  std::uint8_t priority = 0;
};

/// Classifies `frame` and finds its priority.
FrameInfo inspect(wire::ConstBytes frame, const PriorityMap& map);

/// Sets an ECN-capable IP packet's ECN field to CE; the IPv4 header
/// checksum follows. Returns false if the packet is not ECN-capable.
bool mark_ce(wire::Bytes frame, const FrameInfo& info);

/// A frame held by the switch, in memory of its own.
struct Packet {
  std::vector<std::uint8_t> bytes;
  std::uint16_t ingress = 0;
  std::uint8_t priority = 0;
  Nanos due = 0;  ///< when a delay line lets it go
};
using PacketPtr = std::unique_ptr<Packet>;

/// Recycles packets, so the datapath does not allocate once warm.
class PacketPool {
 public:
  PacketPtr get(wire::ConstBytes frame) {
    PacketPtr p;
    if (free_.empty()) {
      p = std::make_unique<Packet>();
    } else {
      p = std::move(free_.back());
      free_.pop_back();
    }
    p->bytes.assign(frame.begin(), frame.end());
    p->due = 0;
    return p;
  }
  void put(PacketPtr p) {
    if (free_.size() < 8192) free_.push_back(std::move(p));
  }

 private:
  std::vector<PacketPtr> free_;
};

}  // namespace uroce::sw
