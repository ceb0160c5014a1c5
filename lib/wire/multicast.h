/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Multicast GIDs and the Ethernet addresses they travel to. On RoCEv2 a
// multicast GID is an IP multicast address: IPv4 224.0.0.0/4, kept
// IPv4-mapped (::ffff:224.0.0.0/100), or IPv6 ff00::/8, as the kernel's
// rdma_is_multicast_addr tells them. Frames to a group go to the group's
// mapped MAC, never resolved with ARP or ND.

#include "wire/ethernet.h"
#include "wire/ip.h"

namespace uroce::wire {

/// Whether `gid` names a multicast group (rdma_is_multicast_addr).
bool is_multicast(const IpAddr& gid);

/// The MAC a multicast group's frames go to: 01:00:5e and the low 23 bits
/// of an IPv4 group (RFC 1112 6.4), 33:33 and the low 32 bits of an IPv6
/// one (RFC 2464 7). Only for an address is_multicast() accepts.
MacAddr multicast_mac(const IpAddr& group);

}  // namespace uroce::wire
