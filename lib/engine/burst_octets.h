/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The octets of a burst, for the engine's rx_bytes and tx_bytes (what a
// NIC's port counters, port_rcv_data and port_xmit_data, count).

#include <cstdint>

#include "port/port.h"

namespace uroce::engine {

inline std::uint64_t octets(const port::RxFrame* frames, std::uint16_t n) {
  std::uint64_t sum = 0;
  for (std::uint16_t i = 0; i < n; ++i) sum += frames[i].data.size();
  return sum;
}

inline std::uint64_t octets(const port::TxFrame* frames, std::uint16_t n) {
  std::uint64_t sum = 0;
  for (std::uint16_t i = 0; i < n; ++i) sum += frames[i].length;
  return sum;
}

}  // namespace uroce::engine
