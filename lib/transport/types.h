/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Work requests, work completions and the enums they use. Numeric values
// equal rdma-core's (enum ibv_wr_opcode, ibv_wc_status, ibv_wc_opcode,
// IBV_SEND_*, IBV_ACCESS_*, enum ibv_qp_state) so the verbs binding casts
// instead of translating; drivers/ibverbs static_asserts that they agree.

#include <array>
#include <cstdint>

#include "transport/limits.h"
#include "wire/mtu.h"
#include "wire/qp_attr.h"
#include "wire/roce_frame.h"

namespace uroce::transport {

/// Time in nanoseconds, from a clock the caller owns (the engine's TSC,
/// or a simulator's virtual clock).
using Nanos = std::uint64_t;

using wire::QpState;
using wire::QpType;

enum class WrOpcode : std::uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
};

namespace send_flags {
inline constexpr unsigned kFence = 1;
inline constexpr unsigned kSignaled = 2;
inline constexpr unsigned kSolicited = 4;
inline constexpr unsigned kInline = 8;
}  // namespace send_flags

namespace access = wire::access;

enum class WcStatus : std::uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

enum class WcOpcode : std::uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

namespace wc_flags {
inline constexpr unsigned kGrh = 1;
inline constexpr unsigned kWithImm = 2;
inline constexpr unsigned kWithInv = 1 << 3;
}  // namespace wc_flags

/// A scatter/gather element: `length` bytes at `addr` under `lkey`.
struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

/// A UD destination: where a datagram goes (an address handle's header
/// template, copied when the WR is posted).
struct UdDest {
  const wire::RouteTemplate* route = nullptr;
  std::uint32_t remote_qpn = 0;
  std::uint32_t remote_qkey = 0;
};

/// A memory window bind (IBV_WR_BIND_MW, ibv_bind_mw): which window, the
/// R_Key it is to have, and the range of which region it is to cover.
/// `length` 0 unbinds a type 1 window.
struct MwBind {
  std::uint32_t mw_index = 0;  ///< the window's slot in the key space
  std::uint32_t mw_id = 0;     ///< the window's identity (a freed slot's id differs)
  std::uint32_t new_rkey = 0;  ///< the window's slot in the upper 24 bits
  std::uint32_t mr_lkey = 0;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  unsigned access = 0;  ///< access:: flags the window grants
};

/// A send work request but its gather list: what a send WQE keeps of it
/// (the QP keeps the SGEs in a table of its own, max_send_sge to a WQE).
struct SendWrFields {
  std::uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  unsigned send_flags = 0;
  std::uint32_t num_sge = 0;
  std::uint32_t imm_data = 0;         ///< network order, as ibv_send_wr holds it
  std::uint32_t invalidate_rkey = 0;  ///< SEND_WITH_INV and LOCAL_INV
  std::uint64_t remote_addr = 0;      ///< RDMA and atomics
  std::uint32_t rkey = 0;             ///< RDMA and atomics
  std::uint64_t compare_add = 0;      ///< atomics
  std::uint64_t swap = 0;             ///< compare-and-swap
  UdDest ud;                          ///< UD only
  std::uint32_t xrc_remote_srqn = 0;  ///< XRC initiator: the remote XRC SRQ
  MwBind bind;                        ///< BIND_MW only
};

/// A send work request, as ibv_send_wr carries it.
struct SendWr : SendWrFields {
  std::array<Sge, kMaxSge> sg_list{};
};

/// A receive work request.
struct RecvWr {
  std::uint64_t wr_id = 0;
  std::array<Sge, kMaxSge> sg_list{};
  std::uint32_t num_sge = 0;
};

/// wc.sl of a UD receive: a RoCE NIC has no service level to report and
/// gives the received packet's L3 header type instead, as mlx5's CQE does
/// (roce_l3_header_type: 0 GRH, 1 IPv6, 2 IPv4). UCX's UD transport reads
/// `sl & 7` this way to find the DGID within the GRH.
inline constexpr std::uint8_t kWcSlRoceV2Ipv6 = 1;
inline constexpr std::uint8_t kWcSlRoceV2Ipv4 = 2;

/// A work completion, as ibv_wc carries it.
struct Wc {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  std::uint32_t vendor_err = 0;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0;  ///< network order; or the invalidated R_Key with kWithInv
  std::uint32_t qp_num = 0;
  std::uint32_t src_qp = 0;
  unsigned wc_flags = 0;
  std::uint16_t pkey_index = 0;
  std::uint16_t slid = 0;
  std::uint8_t sl = 0;
  std::uint8_t dlid_path_bits = 0;
};

}  // namespace uroce::transport
