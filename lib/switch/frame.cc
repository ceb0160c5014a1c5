/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/frame.h"

#include "wire/ethernet.h"

namespace uroce::sw {

FrameInfo inspect(wire::ConstBytes frame, const PriorityMap& map) {
  FrameInfo f;
  std::uint16_t type = wire::load_be16(frame.data() + 12);
  std::uint8_t pcp = 0;
  if (type == wire::ether_type::kVlan && frame.size() >= 18) {
    const std::uint16_t tci = wire::load_be16(frame.data() + 14);
    f.tagged = true;
    pcp = static_cast<std::uint8_t>(tci >> 13);
    f.vid = tci & 0x0FFF;
    type = wire::load_be16(frame.data() + 16);
    f.l3 = 18;
  }
  std::uint8_t tclass = 0;
  if (type == wire::ether_type::kIpv4 && frame.size() >= f.l3 + 20 && (frame[f.l3] >> 4) == 4) {
    f.ip_version = 4;
    tclass = frame[f.l3 + 1];
  } else if (type == wire::ether_type::kIpv6 && frame.size() >= f.l3 + 40 &&
             (frame[f.l3] >> 4) == 6) {
    f.ip_version = 6;
    tclass = static_cast<std::uint8_t>((frame[f.l3] & 0x0F) << 4 | frame[f.l3 + 1] >> 4);
  }
  f.ecn = static_cast<wire::Ecn>(tclass & 3);
  if (f.tagged && map.trust_pcp) {
    f.priority = map.pcp[pcp];
  } else if (f.ip_version != 0) {
    f.priority = map.dscp[tclass >> 2];
  } else {
    f.priority = f.tagged ? map.pcp[pcp] : 0;
  }
  return f;
}

bool mark_ce(wire::Bytes frame, const FrameInfo& info) {
  if (info.ip_version == 0 || info.ecn == wire::Ecn::kNotEct) return false;
  std::uint8_t* ip = frame.data() + info.l3;
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
