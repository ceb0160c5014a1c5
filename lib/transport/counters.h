/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Per-QP transport counters, named as rxe names them in
// /sys/class/infiniband/<dev>/ports/1/hw_counters (and, where rxe has none,
// as mlx5 does), so users read uroce's numbers the way they read theirs.

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

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
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(Counter::kCount)>
    kCounterNames = {
        "sent_pkts",
        "rcvd_pkts",
        "duplicate_request",
        "out_of_seq_request",
        "rcvd_rnr_err",
        "send_rnr_err",
        "rcvd_seq_err",
        "ack_deferred",
        "retry_exceeded_err",
        "retry_rnr_exceeded_err",
        "completer_retry_err",
        "send_err",
        "rdma_sends",
        "rdma_recvs",
        "local_ack_timeout_err",
        "implied_nak_seq_err",
        "packet_seq_err",
        "dropped_invalid",
        "np_ecn_marked_roce_packets",
};
static_assert(kCounterNames.back() == "np_ecn_marked_roce_packets");

/// Counters written by the engine thread and readable from any thread.
class Counters {
 public:
  void inc(Counter c, std::uint64_t n = 1) {
    // One writer: a relaxed load and store, not a locked add.
    auto& v = v_[static_cast<std::size_t>(c)];
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get(Counter c) const {
    return v_[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Counter::kCount)> v_{};
};

}  // namespace uroce::transport
