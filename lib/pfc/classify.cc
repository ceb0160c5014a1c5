/* SPDX-License-Identifier: BSD-3-Clause */
#include "pfc/classify.h"

#include "wire/ethernet.h"

namespace uroce::pfc {

std::uint8_t frame_priority(wire::ConstBytes frame) {
  if (frame.size() < wire::EthHdr::kSize) return 0;
  const std::uint16_t type = wire::load_be16(frame.data() + 12);
  if (type == wire::ether_type::kVlan) {
    if (frame.size() < wire::EthHdr::kSize + 2) return 0;
    return frame[wire::EthHdr::kSize] >> 5;
  }
  const std::size_t l3 = wire::EthHdr::kSize;
  if (type == wire::ether_type::kIpv4 && frame.size() > l3 + 1)
    return dscp_priority(frame[l3 + 1] >> 2);
  if (type == wire::ether_type::kIpv6 && frame.size() > l3 + 1) {
    // The traffic class straddles the first two bytes: 4 bits each.
    const auto tclass = static_cast<std::uint8_t>((frame[l3] & 0x0F) << 4 | frame[l3 + 1] >> 4);
    return dscp_priority(tclass >> 2);
  }
  return 0;
}

}  // namespace uroce::pfc
