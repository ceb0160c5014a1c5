/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// ARP for IPv4 over Ethernet (RFC 826): what a uroce port answers for its
// own addresses and asks to resolve its peers.

#include <cstdint>

#include "wire/bytes.h"
#include "wire/ethernet.h"

namespace uroce::wire {

enum class ArpOp : std::uint16_t { kRequest = 1, kReply = 2 };

/// An Ethernet/IPv4 ARP packet. Addresses in host order.
struct ArpPacket {
  ArpOp op = ArpOp::kRequest;
  MacAddr sender_mac;
  std::uint32_t sender_ip = 0;
  MacAddr target_mac;  ///< zero in a request
  std::uint32_t target_ip = 0;
};

/// Writes a request for `target_ip`, broadcast; returns the frame length
/// (60, padded) or 0 when `out` is too small.
std::size_t build_arp_request(Bytes out, const MacAddr& src_mac, std::uint32_t src_ip,
                              std::uint32_t target_ip);

/// Writes the reply to `request`, telling it that `our_ip` is at `our_mac`;
/// unicast to the requester. Returns the frame length or 0.
std::size_t build_arp_reply(Bytes out, const ArpPacket& request, const MacAddr& our_mac,
                            std::uint32_t our_ip);

/// Decodes an untagged or 802.1Q-tagged Ethernet/IPv4 ARP frame; false if
/// the frame is anything else or is truncated.
[[nodiscard]] bool parse_arp_frame(ConstBytes frame, ArpPacket& out);

}  // namespace uroce::wire
