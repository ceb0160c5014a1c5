/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The priority a received frame belongs to, as a NIC's ingress classifier
// finds it: the 802.1Q PCP when the frame is tagged, otherwise the
// precedence bits of the DSCP (DSCP >> 3, the default "trust dscp" map
// that sends DSCP 26 to priority 3 and DSCP 48 to priority 6).

#include <cstdint>

#include "wire/classify.h"

namespace uroce::pfc {

/// The default DSCP-to-priority map.
constexpr std::uint8_t dscp_priority(std::uint8_t dscp) { return (dscp >> 3) & 7; }

/// The priority of a classified frame; 0 for frames that carry none
/// (untagged ARP).
std::uint8_t frame_priority(const wire::FrameClass& frame);

}  // namespace uroce::pfc
