/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The RoCEv2 Congestion Notification Packet (IBA Annex A17.9.2,
// as ConnectX NICs send it): what a notification point sends back to the reaction
// point when it sees CE-marked packets of a QP.

#include <cstdint>

#include "wire/bytes.h"
#include "wire/roce_frame.h"

namespace uroce::wire {

/// Length of a CNP frame without FCS: headers, 16 reserved bytes, ICRC
/// (74 bytes over IPv4, as ConnectX NICs send it).
std::size_t cnp_frame_length(const RoceRoute& route);

/// Builds a CNP to `dest_qp`, the QP whose packets were marked (the
/// sender's QPN). `route` carries the CNP's DSCP and priority (cnp_dscp,
/// cnp_802p_prio) and the UDP source port. BTH: opcode 0x81, BECN set,
/// P_Key 0xFFFF, PSN 0, AckReq clear. Returns the frame length or 0.
std::size_t build_cnp_frame(Bytes out, const RoceRoute& route, std::uint32_t dest_qp,
                            std::uint16_t ip_id);

}  // namespace uroce::wire
