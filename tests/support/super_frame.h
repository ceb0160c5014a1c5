/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The packet port's UDP GSO super-frames (drivers/packet/udp_gso.h) in a
// capture of a veth, where nothing segments them: the RoCEv2 packets one
// carries, found without the gso_size its virtio-net header had.

#include <cstdint>
#include <optional>
#include <vector>

#include "wire/bytes.h"

namespace uroce::test {

/// The packets `frame` splits into, each a RoCEv2 packet that parses with
/// a correct ICRC, when it is a super-frame of two or more; nullopt
/// otherwise. Segment sizes are tried from the first packet's opcode: its
/// headers with each path MTU's payload, then every length a RoCE packet
/// may have.
std::optional<std::vector<std::vector<std::uint8_t>>> split_super_frame(wire::ConstBytes frame);

}  // namespace uroce::test
