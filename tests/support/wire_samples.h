/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Representative RoCEv2 packets for tests: a route and, per opcode, the
// BTH, extension headers and payload a real sender would put in it.

#include <cstdint>
#include <random>
#include <vector>

#include "wire/ib_headers.h"
#include "wire/roce_frame.h"

namespace uroce::test {

/// A route between two hosts of 10.0.0.0/24 (or fd00::/64 when ipv6).
wire::RoceRoute sample_route(bool ipv6, bool vlan = false);

/// One packet's worth of transport headers and payload.
struct SamplePacket {
  wire::Bth bth;
  wire::ExtHeaders ext;
  std::vector<std::uint8_t> payload;
};

/// Fills every field `opcode` carries with values drawn from `rng`; the
/// payload is 1..300 bytes (so pad counts vary) where the opcode allows
/// padding, a multiple of 4 where it does not, empty where it has none.
SamplePacket sample_packet(std::uint8_t opcode, std::mt19937_64& rng);

/// Builds the frame of a sample packet over a route.
std::vector<std::uint8_t> build_frame(const wire::RoceRoute& route, const SamplePacket& pkt,
                                      std::uint16_t ip_id = 0x1234);

/// Every opcode the table knows.
std::vector<std::uint8_t> all_opcodes();

}  // namespace uroce::test
