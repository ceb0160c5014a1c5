/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The counters of one attached program, as the device daemon sees it: what
// it delivered into the program's ring, what it took out, and what it
// refused and why (uroce-stat's "process:<pid>" scope).

#include <cstdint>
#include <string_view>

#include "counters/counter_set.h"

namespace uroce::daemon {

enum class ProgramCounter : std::uint8_t {
  kRxFrames,         ///< frames put in the program's receive ring
  kRxRingFull,       ///< ... lost: the program does not drain its ring
  kTxFrames,         ///< frames taken from its transmit ring toward the port
  kTxMalformed,      ///< too short, too long, an empty slot, no Ethernet
  kTxSpoofedSource,  ///< a source MAC, IP or VLAN that is not the device's
  kTxSpoofedQpn,     ///< a datagram whose DETH names a QP that is not its own
  kTxNotRoce,        ///< IP traffic that is not RoCEv2 or neighbour discovery
  kTxRingCorrupt,    ///< its ring's head was impossible (garbage in the region)
  kTxNoBuffer,       ///< the port's pool was empty
  kCount,
};

constexpr std::string_view name(ProgramCounter c) {
  switch (c) {
    case ProgramCounter::kRxFrames:
      return "rx_frames";
    case ProgramCounter::kRxRingFull:
      return "rx_ring_full";
    case ProgramCounter::kTxFrames:
      return "tx_frames";
    case ProgramCounter::kTxMalformed:
      return "tx_malformed";
    case ProgramCounter::kTxSpoofedSource:
      return "tx_spoofed_source";
    case ProgramCounter::kTxSpoofedQpn:
      return "tx_spoofed_qpn";
    case ProgramCounter::kTxNotRoce:
      return "tx_not_roce";
    case ProgramCounter::kTxRingCorrupt:
      return "tx_ring_corrupt";
    case ProgramCounter::kTxNoBuffer:
      return "tx_no_buffer";
    case ProgramCounter::kCount:
      break;
  }
  return {};
}

using ProgramCounters = counters::CounterSet<ProgramCounter>;

}  // namespace uroce::daemon
