/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The one frame classifier: what a frame is below its payload, read once,
// so that no receiver works out offsets itself (DPDK's rte_net_get_ptype
// with its rte_net_hdr_lens). L2: Ethernet, with or without one 802.1Q
// tag. L3: IPv4 (with options) or IPv6 (fixed header). L4: the protocol
// number only; what follows is the caller's (the RoCE parser, ARP, ND,
// ICMP).

#include <cstddef>
#include <cstdint>

#include "wire/bytes.h"
#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::wire {

struct FrameClass {
  /// 14 or 18 (tagged); 0 when the frame is shorter than its L2 header.
  std::uint8_t l2_len = 0;
  bool tagged = false;
  std::uint8_t pcp = 0;   ///< 802.1p priority of a tagged frame
  std::uint16_t vid = 0;  ///< VLAN of a tagged frame (0: priority tag)
  /// The type of what follows the L2 header (after the tag, if any).
  std::uint16_t ether_type = 0;
  /// 4 or 6 when a whole IP header of that version follows; 0 otherwise.
  std::uint8_t ip_version = 0;
  std::uint8_t l3_len = 0;    ///< the IP header's length (IHL * 4, or 40)
  std::uint8_t l4_proto = 0;  ///< IPv4 protocol, IPv6 next header
  std::uint8_t tclass = 0;    ///< IPv4 TOS or IPv6 traffic class: DSCP << 2 | ECN

  bool valid() const { return l2_len != 0; }
  bool ip() const { return ip_version != 0; }
  std::size_t l3_offset() const { return l2_len; }
  std::size_t l4_offset() const { return std::size_t{l2_len} + l3_len; }
  std::uint8_t dscp() const { return tclass >> 2; }
  Ecn ecn() const { return static_cast<Ecn>(tclass & 3); }
  /// The IP destination address (ip() must hold).
  IpAddr ip_dst(ConstBytes frame) const;
};

/// Classifies `frame`. Never reads past its end: fields it cannot see are
/// left at their defaults (valid() false, ip_version 0).
FrameClass classify(ConstBytes frame);

}  // namespace uroce::wire
