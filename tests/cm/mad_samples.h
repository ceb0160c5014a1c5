/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// CM messages with every field drawn at random within its width, for
// round trips, the tshark cross-check and fuzz seeds; and the RoCEv2 frame
// a MAD travels in (UD SEND-only to QP 1).

#include <cstdint>
#include <random>
#include <vector>

#include "cm/mad.h"
#include "cm/types.h"
#include "wire/roce_frame.h"

namespace uroce::test {

cm::ReqMsg random_req(std::mt19937_64& rng);
cm::MraMsg random_mra(std::mt19937_64& rng);
cm::RejMsg random_rej(std::mt19937_64& rng);
cm::RepMsg random_rep(std::mt19937_64& rng);
cm::RtuMsg random_rtu(std::mt19937_64& rng);
cm::DreqMsg random_dreq(std::mt19937_64& rng);
cm::DrepMsg random_drep(std::mt19937_64& rng);
cm::SidrReqMsg random_sidr_req(std::mt19937_64& rng);
cm::SidrRepMsg random_sidr_rep(std::mt19937_64& rng);

/// One random message of each of the nine types, in attribute ID order.
std::vector<cm::CmMessage> random_messages(std::mt19937_64& rng);

/// A CM MAD header with a random TID.
cm::MadHdr random_hdr(std::mt19937_64& rng);

/// Encodes a MAD.
std::vector<std::uint8_t> encode_mad(const cm::MadHdr& hdr, const cm::CmMessage& msg);

/// The frame that carries `mad` from `route.src_ip` to QP 1 of
/// `route.dst_ip`: UD SEND-only, BTH P_Key 0xFFFF, DETH Q_Key 0x80010000,
/// source QP 1 (research/rdma-cm.md 3.1).
std::vector<std::uint8_t> gsi_frame(const wire::RoceRoute& route, wire::ConstBytes mad,
                                    std::uint32_t psn = 0);

}  // namespace uroce::test
