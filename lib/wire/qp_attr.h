/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// QP types, QP states (IBA 10.3.1), the attribute-mask bits of a modify
// and the access flags, numbered as rdma-core numbers them (IBV_QPT_*,
// enum ibv_qp_state, IBV_QP_*, IBV_ACCESS_*). They are here, below both,
// because lib/transport and lib/cm speak them and neither may include the
// other; drivers/ibverbs static_asserts that they agree with verbs.h.

#include <cstdint>

namespace uroce::wire {

/// IBV_QPT_*. An XRC initiator (IBV_QPT_XRC_SEND) sends to the XRC SRQs
/// of a remote XRC domain; an XRC target (IBV_QPT_XRC_RECV) belongs to a
/// domain and receives into the SRQ each message names (IBA A14.3).
enum class QpType : std::uint8_t { kRc = 2, kUc = 3, kUd = 4, kXrcIni = 9, kXrcTgt = 10 };

enum class QpState : std::uint8_t {  ///< IBV_QPS_*
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6,
};

/// ibv_qp_attr_mask bits (IBV_QP_*).
namespace qp_attr_mask {
inline constexpr unsigned kState = 1 << 0;
inline constexpr unsigned kCurState = 1 << 1;
inline constexpr unsigned kEnSqdAsyncNotify = 1 << 2;
inline constexpr unsigned kAccessFlags = 1 << 3;
inline constexpr unsigned kPkeyIndex = 1 << 4;
inline constexpr unsigned kPort = 1 << 5;
inline constexpr unsigned kQkey = 1 << 6;
inline constexpr unsigned kAv = 1 << 7;
inline constexpr unsigned kPathMtu = 1 << 8;
inline constexpr unsigned kTimeout = 1 << 9;
inline constexpr unsigned kRetryCnt = 1 << 10;
inline constexpr unsigned kRnrRetry = 1 << 11;
inline constexpr unsigned kRqPsn = 1 << 12;
inline constexpr unsigned kMaxQpRdAtomic = 1 << 13;
inline constexpr unsigned kAltPath = 1 << 14;
inline constexpr unsigned kMinRnrTimer = 1 << 15;
inline constexpr unsigned kSqPsn = 1 << 16;
inline constexpr unsigned kMaxDestRdAtomic = 1 << 17;
inline constexpr unsigned kPathMigState = 1 << 18;
inline constexpr unsigned kCap = 1 << 19;
inline constexpr unsigned kDestQpn = 1 << 20;
}  // namespace qp_attr_mask

/// IBV_ACCESS_* bits of a memory region's and a QP's access flags.
namespace access {
inline constexpr unsigned kLocalWrite = 1;
inline constexpr unsigned kRemoteWrite = 2;
inline constexpr unsigned kRemoteRead = 4;
inline constexpr unsigned kRemoteAtomic = 8;
inline constexpr unsigned kMwBind = 16;  ///< memory windows may be bound to the region
}  // namespace access

}  // namespace uroce::wire
