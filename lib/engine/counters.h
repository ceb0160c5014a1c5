/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Engine counters: what the port saw and what became of it. Frames the
// RoCEv2 parser refused are counted per drop reason (wire::DropReason).

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "wire/roce_parser.h"

namespace uroce::engine {

enum class EngineCounter : std::uint8_t {
  kRxBursts,
  kRxFrames,
  kTxFrames,
  kTxDropped,              ///< the port refused them (queue full)
  kTxIpv4ChecksumOffload,  ///< frames whose IPv4 checksum the port computed
  kRxRoce,
  kRxNotOurIp,
  kRxUnknownQpn,
  kRxArp,
  kTxArpReply,
  kTxArpRequest,
  kRxIcmpEcho,
  kRxNdp,  ///< neighbour solicitations and advertisements
  kTxNeighborAdvert,
  kTxNeighborSolicit,
  kRxMacControl,
  kRxMacControlDropped,  ///< malformed PAUSE/PFC frames
  kRxBufferDropped,      ///< frames the full receive buffer could not take
  kTxCnpHeld,            ///< CNPs that waited for a PFC pause to end
  kTxLoopback,           ///< frames to the device itself, kept off the wire
  kRxLoopback,           ///< ... and received
  kRxOther,
  kFaultDropped,
  kFaultDuplicated,
  kFaultReordered,
  kFaultCorrupted,
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(EngineCounter::kCount)>
    kEngineCounterNames = {
        "rx_bursts",
        "rx_frames",
        "tx_frames",
        "tx_dropped",
        "tx_ipv4_checksum_offload",
        "rx_roce",
        "rx_not_our_ip",
        "rx_unknown_qpn",
        "rx_arp",
        "tx_arp_reply",
        "tx_arp_request",
        "rx_icmp_echo",
        "rx_ndp",
        "tx_neighbor_advert",
        "tx_neighbor_solicit",
        "rx_mac_control",
        "rx_mac_control_dropped",
        "rx_buffer_dropped",
        "tx_cnp_held",
        "tx_loopback",
        "rx_loopback",
        "rx_other",
        "fault_dropped",
        "fault_duplicated",
        "fault_reordered",
        "fault_corrupted",
};
static_assert(kEngineCounterNames.back() == "fault_corrupted");

/// Written by the engine thread, read from anywhere.
class EngineCounters {
 public:
  void inc(EngineCounter c, std::uint64_t n = 1) { bump(v_[static_cast<std::size_t>(c)], n); }
  void drop(wire::DropReason r) { bump(drops_[static_cast<std::size_t>(r)], 1); }
  std::uint64_t get(EngineCounter c) const {
    return v_[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
  }
  std::uint64_t drops(wire::DropReason r) const {
    return drops_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }

 private:
  static void bump(std::atomic<std::uint64_t>& v, std::uint64_t n) {
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(EngineCounter::kCount)> v_{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(wire::DropReason::kCount)>
      drops_{};
};

}  // namespace uroce::engine
