/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/ethernet.h"

#include <algorithm>
#include <cstdio>

namespace uroce::wire {

std::string MacAddr::to_string() const {
  char s[18];
  std::snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2],
                bytes[3], bytes[4], bytes[5]);
  return s;
}

EthHdr EthHdr::parse(const std::uint8_t* p) {
  EthHdr h;
  std::copy_n(p, 6, h.dst.bytes.begin());
  std::copy_n(p + 6, 6, h.src.bytes.begin());
  h.ether_type = load_be16(p + 12);
  return h;
}

void EthHdr::write(std::uint8_t* p) const {
  std::copy(dst.bytes.begin(), dst.bytes.end(), p);
  std::copy(src.bytes.begin(), src.bytes.end(), p + 6);
  store_be16(p + 12, ether_type);
}

VlanTag VlanTag::parse(const std::uint8_t* tci) {
  const std::uint16_t v = load_be16(tci);
  return {static_cast<std::uint8_t>(v >> 13), (v >> 12 & 1) != 0,
          static_cast<std::uint16_t>(v & 0x0FFF), load_be16(tci + 2)};
}

void VlanTag::write(std::uint8_t* tci) const {
  store_be16(tci,
             static_cast<std::uint16_t>((pcp & 7) << 13 | (dei ? 1 : 0) << 12 | (vid & 0x0FFF)));
  store_be16(tci + 2, ether_type);
}

}  // namespace uroce::wire
