/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Per-QP transport counters, named as rxe names them in
// /sys/class/infiniband/<dev>/ports/1/hw_counters (and, where rxe has none,
// as mlx5 does), so users read uroce's numbers the way they read theirs.

#include <cstdint>
#include <string_view>

#include "counters/counter_set.h"

namespace uroce::transport {

enum class Counter : std::uint8_t {
  kSentPkts,             ///< packets this QP put on the wire
  kRcvdPkts,             ///< packets delivered to this QP
  kDuplicateRequest,     ///< responder: request PSN already executed
  kOutOfSeqRequest,      ///< responder: request PSN ahead of the expected one
  kRcvdRnrErr,           ///< requester: RNR NAKs received
  kSendRnrErr,           ///< responder: RNR NAKs sent
  kRcvdSeqErr,           ///< requester: NAK sequence errors received
  kAckDeferred,          ///< responder: ACKs folded into a later one
  kRetryExceededErr,     ///< requester: retry_cnt exhausted
  kRetryRnrExceededErr,  ///< requester: rnr_retry exhausted
  kCompleterRetryErr,    ///< requester: go-back-N restarts, any cause
  kSendErr,              ///< requester: WRs failed locally
  kRdmaSends,
  kRdmaRecvs,
  kLocalAckTimeoutErr,  ///< requester: local ACK timeout expired (mlx5 name)
  kImpliedNakSeqErr,    ///< requester: a READ/ATOMIC response was skipped (mlx5 name)
  kPacketSeqErr,        ///< responder: NAK sequence errors sent (mlx5 name)
  kDroppedInvalid,      ///< packets dropped for QP-level checks (state, P_Key, Q_Key, ...)
  kEcnMarkedPkts,       ///< CE-marked packets received (np_ecn_marked_roce_packets)
  kXrcSrqErr,           ///< XRC target: requests naming no SRQ of its domain, NAKed
  /// XRC target shared between processes: requests kept until another
  /// process ran those before them
  kXrcSharedWaits,
  // Selective repeat (uroce's own; docs/transport.md).
  kSrOooKept,         ///< responder: requests ahead of the expected PSN kept, not dropped
  kSrSackSent,        ///< responder: selective acknowledgements sent
  kSrSackRcvd,        ///< requester: selective acknowledgements received
  kSrRecoveryRounds,  ///< requester: recoveries begun (each resends every hole once)
  kSrRetransmitted,   ///< requester: packets resent because a SACK showed them lost
  kSrTailProbes,      ///< requester: tail probes sent (a short timeout with nothing new to send)
  kCount,
};

/// The counter's name, as rxe's hw_counters (or mlx5's) spell it.
constexpr std::string_view name(Counter c) {
  switch (c) {
    case Counter::kSentPkts:
      return "sent_pkts";
    case Counter::kRcvdPkts:
      return "rcvd_pkts";
    case Counter::kDuplicateRequest:
      return "duplicate_request";
    case Counter::kOutOfSeqRequest:
      return "out_of_seq_request";
    case Counter::kRcvdRnrErr:
      return "rcvd_rnr_err";
    case Counter::kSendRnrErr:
      return "send_rnr_err";
    case Counter::kRcvdSeqErr:
      return "rcvd_seq_err";
    case Counter::kAckDeferred:
      return "ack_deferred";
    case Counter::kRetryExceededErr:
      return "retry_exceeded_err";
    case Counter::kRetryRnrExceededErr:
      return "retry_rnr_exceeded_err";
    case Counter::kCompleterRetryErr:
      return "completer_retry_err";
    case Counter::kSendErr:
      return "send_err";
    case Counter::kRdmaSends:
      return "rdma_sends";
    case Counter::kRdmaRecvs:
      return "rdma_recvs";
    case Counter::kLocalAckTimeoutErr:
      return "local_ack_timeout_err";
    case Counter::kImpliedNakSeqErr:
      return "implied_nak_seq_err";
    case Counter::kPacketSeqErr:
      return "packet_seq_err";
    case Counter::kDroppedInvalid:
      return "dropped_invalid";
    case Counter::kEcnMarkedPkts:
      return "np_ecn_marked_roce_packets";
    case Counter::kXrcSrqErr:
      return "xrc_srq_err";
    case Counter::kXrcSharedWaits:
      return "xrc_shared_waits";
    case Counter::kSrOooKept:
      return "sr_ooo_kept";
    case Counter::kSrSackSent:
      return "sr_sack_sent";
    case Counter::kSrSackRcvd:
      return "sr_sack_rcvd";
    case Counter::kSrRecoveryRounds:
      return "sr_recovery_rounds";
    case Counter::kSrRetransmitted:
      return "sr_retransmitted";
    case Counter::kSrTailProbes:
      return "sr_tail_probes";
    case Counter::kCount:
      break;
  }
  return {};
}

/// A QP's counters: written by the engine thread, readable from any.
using Counters = counters::CounterSet<Counter>;

}  // namespace uroce::transport
