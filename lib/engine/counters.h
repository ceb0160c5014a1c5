/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Engine counters: what the port saw and what became of it. Frames the
// RoCEv2 parser refused are counted per drop reason (wire::DropReason).

#include <cstdint>
#include <string_view>

#include "counters/counter_set.h"
#include "wire/roce_parser.h"

namespace uroce::engine {

enum class EngineCounter : std::uint8_t {
  kRxBursts,
  kRxFrames,
  kTxFrames,
  kRxBytes,                ///< the received frames' octets, Ethernet header to payload
  kTxBytes,                ///< ... of the frames the port took
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
  kKernelNeighborSolicit,  ///< resolutions asked of the kernel (netdev mode)
  kRxMacControl,
  kRxMacControlDropped,  ///< malformed PAUSE/PFC frames
  kRxBufferDropped,      ///< frames the full receive buffer could not take
  kTxCnpHeld,            ///< CNPs that waited for a PFC pause to end
  kTxLoopback,           ///< frames to the device itself, kept off the wire
  kRxLoopback,           ///< ... and received
  kRxMcast,              ///< RoCEv2 frames to the multicast QPN
  kRxMcastDelivered,     ///< ... their copies, one per attached QP
  kRxMcastNoGroup,       ///< ... to a group no QP of the device is attached to
  kTxMcast,              ///< frames sent to a multicast group
  kRxForwarded,          ///< RoCEv2 frames handed to the program owning their QP (daemon)
  kRxHandedOff,          ///< frames for another lcore's QPs, handed to it (handoff.h)
  kRxHandedIn,           ///< ... and those this lcore received so from the others
  kRxHandoffDropped,     ///< ... that found the other lcore's box full
  kRxOther,
  kTxSchedTurns,    ///< turns the transmit round robin gave QPs
  kTxSchedRescued,  ///< QPs with work found by the rescan, not by an event
  kCount,
};

/// The counter's name, in uroce-stat's engine scope.
constexpr std::string_view name(EngineCounter c) {
  switch (c) {
    case EngineCounter::kRxBursts:
      return "rx_bursts";
    case EngineCounter::kRxFrames:
      return "rx_frames";
    case EngineCounter::kTxFrames:
      return "tx_frames";
    case EngineCounter::kRxBytes:
      return "rx_bytes";
    case EngineCounter::kTxBytes:
      return "tx_bytes";
    case EngineCounter::kTxDropped:
      return "tx_dropped";
    case EngineCounter::kTxIpv4ChecksumOffload:
      return "tx_ipv4_checksum_offload";
    case EngineCounter::kRxRoce:
      return "rx_roce";
    case EngineCounter::kRxNotOurIp:
      return "rx_not_our_ip";
    case EngineCounter::kRxUnknownQpn:
      return "rx_unknown_qpn";
    case EngineCounter::kRxArp:
      return "rx_arp";
    case EngineCounter::kTxArpReply:
      return "tx_arp_reply";
    case EngineCounter::kTxArpRequest:
      return "tx_arp_request";
    case EngineCounter::kRxIcmpEcho:
      return "rx_icmp_echo";
    case EngineCounter::kRxNdp:
      return "rx_ndp";
    case EngineCounter::kTxNeighborAdvert:
      return "tx_neighbor_advert";
    case EngineCounter::kTxNeighborSolicit:
      return "tx_neighbor_solicit";
    case EngineCounter::kKernelNeighborSolicit:
      return "kernel_neighbor_solicit";
    case EngineCounter::kRxMacControl:
      return "rx_mac_control";
    case EngineCounter::kRxMacControlDropped:
      return "rx_mac_control_dropped";
    case EngineCounter::kRxBufferDropped:
      return "rx_buffer_dropped";
    case EngineCounter::kTxCnpHeld:
      return "tx_cnp_held";
    case EngineCounter::kTxLoopback:
      return "tx_loopback";
    case EngineCounter::kRxLoopback:
      return "rx_loopback";
    case EngineCounter::kRxMcast:
      return "multicast_rcv_packets";
    case EngineCounter::kRxMcastDelivered:
      return "multicast_delivered";
    case EngineCounter::kRxMcastNoGroup:
      return "multicast_no_group";
    case EngineCounter::kTxMcast:
      return "multicast_xmit_packets";
    case EngineCounter::kRxForwarded:
      return "rx_forwarded";
    case EngineCounter::kRxHandedOff:
      return "rx_handed_off";
    case EngineCounter::kRxHandedIn:
      return "rx_handed_in";
    case EngineCounter::kRxHandoffDropped:
      return "rx_handoff_dropped";
    case EngineCounter::kRxOther:
      return "rx_other";
    case EngineCounter::kTxSchedTurns:
      return "tx_sched_turns";
    case EngineCounter::kTxSchedRescued:
      return "tx_sched_rescued";
    case EngineCounter::kCount:
      break;
  }
  return {};
}

/// Written by the engine thread, read from anywhere: what the port saw,
/// and the RoCEv2 frames the parser refused, by reason.
class EngineCounters {
 public:
  void inc(EngineCounter c, std::uint64_t n = 1) { counters_.inc(c, n); }
  void drop(wire::DropReason r) { drops_.inc(r); }
  std::uint64_t get(EngineCounter c) const { return counters_.get(c); }
  std::uint64_t drops(wire::DropReason r) const { return drops_.get(r); }

  /// Calls fn(name, value) for every engine counter.
  template <typename F>
  void for_each(F&& fn) const {
    counters_.for_each(fn);
  }
  /// Calls fn(name, value) for every drop reason (kNone is no drop).
  template <typename F>
  void for_each_drop(F&& fn) const {
    drops_.for_each([&](std::string_view name, std::uint64_t v) {
      if (name != wire::name(wire::DropReason::kNone)) fn(name, v);
    });
  }

 private:
  counters::CounterSet<EngineCounter> counters_;
  counters::CounterSet<wire::DropReason> drops_;
};

}  // namespace uroce::engine
