/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/multicast.h"

namespace uroce::wire {

bool is_multicast(const IpAddr& gid) {
  if (gid.is_v4()) return (gid.v4() >> 28) == 0xE;
  return gid.bytes[0] == 0xFF;
}

MacAddr multicast_mac(const IpAddr& group) {
  const auto& b = group.bytes;
  if (group.is_v4())
    return {{0x01, 0x00, 0x5E, static_cast<std::uint8_t>(b[13] & 0x7F), b[14], b[15]}};
  return {{0x33, 0x33, b[12], b[13], b[14], b[15]}};
}

}  // namespace uroce::wire
