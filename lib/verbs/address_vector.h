/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Where an RC/UC QP's packets or a UD datagram go (ibv_ah_attr's RoCE
// part). RoCE addresses by GID: an address without a GRH has no IP
// address, and a uroce device has one port.

#include <array>
#include <cstdint>

namespace uroce::verbs {

struct AddressVector {
  bool has_grh = true;        ///< ibv_ah_attr.is_global
  std::uint8_t port_num = 1;  ///< 0 is taken as the device's one port
  std::uint8_t sgid_index = 0;
  std::array<std::uint8_t, 16> dgid{};
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
};

}  // namespace uroce::verbs
