/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The connection manager's counters. The kernel's cm.c keeps four groups
// of per-attribute counters per port, shown in sysfs as
// /sys/class/infiniband/<dev>/ports/<n>/<group>/<attribute>
// (cm_tx_msgs, cm_tx_retries, cm_rx_msgs, cm_rx_duplicates; req ... apr);
// uroce keeps the same groups under the same names, and adds what the
// kernel only logs at debug level: MADs refused by the decoder and
// messages the state machine dropped.

#include <cstdint>
#include <string_view>

#include "cm/mad.h"
#include "counters/counter_set.h"

namespace uroce::cm {

/// One counter per CM attribute, in attribute ID order (cm.c CM_*_COUNTER).
enum class CmAttr : std::uint8_t {
  kReq,
  kMra,
  kRej,
  kRep,
  kRtu,
  kDreq,
  kDrep,
  kSidrReq,
  kSidrRep,
  kLap,
  kApr,
  kCount,
};

constexpr std::string_view name(CmAttr a) {
  switch (a) {
    case CmAttr::kReq:
      return "req";
    case CmAttr::kMra:
      return "mra";
    case CmAttr::kRej:
      return "rej";
    case CmAttr::kRep:
      return "rep";
    case CmAttr::kRtu:
      return "rtu";
    case CmAttr::kDreq:
      return "dreq";
    case CmAttr::kDrep:
      return "drep";
    case CmAttr::kSidrReq:
      return "sidr_req";
    case CmAttr::kSidrRep:
      return "sidr_rep";
    case CmAttr::kLap:
      return "lap";
    case CmAttr::kApr:
      return "apr";
    case CmAttr::kCount:
      break;
  }
  return {};
}

/// The counter of an attribute ID (CM_ATTR_ID_OFFSET 0x10 is REQ).
constexpr CmAttr cm_attr(AttrId a) {
  return static_cast<CmAttr>(static_cast<std::uint16_t>(a) -
                             static_cast<std::uint16_t>(AttrId::kReq));
}
static_assert(cm_attr(AttrId::kApr) == CmAttr::kApr &&
              cm_attr(AttrId::kSidrRep) == CmAttr::kSidrRep);

/// Messages the state machine received and dropped: well formed, but
/// answering nothing this CM has, or arriving in a state that takes none.
enum class CmDrop : std::uint8_t {
  kBadPkey,          ///< BTH P_Key neither 0xFFFF nor 0x7FFF (rxe's pkey check)
  kUnmatchedCommId,  ///< names a comm ID (and remote ID) of no connection here
  kWrongState,       ///< for a connection in a state that does not take it
  kDreqQpnMismatch,  ///< DREQ whose RemoteQPN is not our QPN (cm_dreq_handler)
  kRemoteIdInUse,    ///< REP from a peer connection another of ours already has
  kBacklogFull,      ///< REQ dropped, its listener's backlog full; the peer resends
  kCount,
};

constexpr std::string_view name(CmDrop d) {
  switch (d) {
    case CmDrop::kBadPkey:
      return "bad_pkey";
    case CmDrop::kUnmatchedCommId:
      return "unmatched_comm_id";
    case CmDrop::kWrongState:
      return "wrong_state";
    case CmDrop::kDreqQpnMismatch:
      return "dreq_qpn_mismatch";
    case CmDrop::kRemoteIdInUse:
      return "remote_id_in_use";
    case CmDrop::kBacklogFull:
      return "backlog_full";
    case CmDrop::kCount:
      break;
  }
  return {};
}

/// A counter group's name, as the kernel's sysfs directory spells it.
inline constexpr std::string_view kTxMsgs = "cm_tx_msgs";
inline constexpr std::string_view kTxRetries = "cm_tx_retries";
inline constexpr std::string_view kRxMsgs = "cm_rx_msgs";
inline constexpr std::string_view kRxDuplicates = "cm_rx_duplicates";
inline constexpr std::string_view kRxMalformed = "cm_rx_malformed";
inline constexpr std::string_view kRxDropped = "cm_rx_dropped";

/// The CM's counters: written by the thread that drives the CM, readable
/// from any.
struct CmCounters {
  counters::CounterSet<CmAttr> tx_msgs;        ///< every MAD sent, resends included
  counters::CounterSet<CmAttr> tx_retries;     ///< resends, and answers to duplicates
  counters::CounterSet<CmAttr> rx_msgs;        ///< every well-formed CM MAD received
  counters::CounterSet<CmAttr> rx_duplicates;  ///< received again: a resend or a late copy
  counters::CounterSet<MadError> rx_malformed;
  counters::CounterSet<CmDrop> rx_dropped;

  /// Calls fn(group, counter, value) for every counter.
  template <typename F>
  void for_each(F&& fn) const {
    auto group = [&](std::string_view g, const auto& set) {
      set.for_each([&](std::string_view n, std::uint64_t v) { fn(g, n, v); });
    };
    group(kTxMsgs, tx_msgs);
    group(kTxRetries, tx_retries);
    group(kRxMsgs, rx_msgs);
    group(kRxDuplicates, rx_duplicates);
    group(kRxMalformed, rx_malformed);
    group(kRxDropped, rx_dropped);
  }
};

}  // namespace uroce::cm
