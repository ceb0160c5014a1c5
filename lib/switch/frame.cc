/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/frame.h"

#include "wire/ethernet.h"

namespace uroce::sw {

FrameInfo inspect(wire::ConstBytes frame, const PriorityMap& map) {
  FrameInfo f;
  static_cast<wire::FrameClass&>(f) = wire::classify(frame);
  if (f.tagged && map.trust_pcp) {
    f.priority = map.pcp[f.pcp];
  } else if (f.ip()) {
    f.priority = map.dscp[f.dscp()];
  } else {
    f.priority = f.tagged ? map.pcp[f.pcp] : 0;
  }
  return f;
}

bool mark_ce(wire::Bytes frame, const FrameInfo& info) {
  if (!info.ip() || info.ecn() == wire::Ecn::kNotEct) return false;
  std::uint8_t* ip = frame.data() + info.l3_offset();
  if (info.ip_version == 4) {
    // RFC 1624 incremental update: the TOS byte is the low byte of the
    // header's first 16-bit word.
    const std::uint16_t old_word = wire::load_be16(ip);
    ip[1] |= 3;
    const std::uint16_t new_word = wire::load_be16(ip);
    std::uint32_t sum = static_cast<std::uint16_t>(~wire::load_be16(ip + 10));
    sum += static_cast<std::uint16_t>(~old_word);
    sum += new_word;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    wire::store_be16(ip + 10, static_cast<std::uint16_t>(~sum));
  } else {
    ip[1] |= 0x30;  // the traffic class's low two bits sit in byte 1's high nibble
  }
  return true;
}

}  // namespace uroce::sw
