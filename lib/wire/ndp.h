/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// IPv6 neighbour discovery (RFC 4861), what ARP is to IPv4: a uroce port
// answers Neighbor Solicitations for its IPv6 addresses and solicits its
// peers' link-layer addresses.

#include <cstdint>

#include "wire/bytes.h"
#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::wire {

namespace icmpv6_type {
inline constexpr std::uint8_t kEchoRequest = 128;
inline constexpr std::uint8_t kNeighborSolicitation = 135;
inline constexpr std::uint8_t kNeighborAdvertisement = 136;
}  // namespace icmpv6_type

/// A Neighbor Solicitation or Advertisement.
struct NdpPacket {
  std::uint8_t type = icmpv6_type::kNeighborSolicitation;
  MacAddr eth_src;
  IpAddr src;     ///< the IPv6 source (:: for duplicate address detection)
  IpAddr target;  ///< the address asked about, or advertised
  bool has_link_addr = false;
  MacAddr link_addr;  ///< source (NS) or target (NA) link-layer address option
};

/// The solicited-node multicast address of `ip` (ff02::1:ffXX:XXXX) and
/// its Ethernet group (33:33:ff:XX:XX:XX).
IpAddr solicited_node(const IpAddr& ip);
MacAddr solicited_node_mac(const IpAddr& ip);

/// Writes a Neighbor Solicitation from `src_ip` (at `src_mac`) for
/// `target`, to its solicited-node group; returns the frame length or 0.
std::size_t build_neighbor_solicitation(Bytes out, const MacAddr& src_mac, const IpAddr& src_ip,
                                        const IpAddr& target);

/// Writes the solicited Neighbor Advertisement answering `ns`: `our_ip` is
/// at `our_mac`. Returns the frame length or 0.
std::size_t build_neighbor_advertisement(Bytes out, const NdpPacket& ns, const MacAddr& our_mac,
                                         const IpAddr& our_ip);

/// Decodes an untagged or 802.1Q-tagged Neighbor Solicitation or
/// Advertisement, checking what RFC 4861 7.1.1/7.1.2 require (hop limit
/// 255, code 0, the ICMPv6 checksum, a unicast target); false otherwise.
[[nodiscard]] bool parse_ndp_frame(ConstBytes frame, NdpPacket& out);

}  // namespace uroce::wire
