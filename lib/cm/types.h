/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What lib/cm shares with its callers: time, the address a MAD travels
// between, the sink MADs leave through, a source of unpredictable
// numbers, and the QP attributes init_qp_attr() fills. The QP types are
// plain C++ with libibverbs' numeric values (IBV_QPT_*, IBV_QPS_*,
// IBV_QP_*, IBV_ACCESS_*), so a verbs front end casts instead of
// translating; lib/cm itself never includes infiniband/verbs.h.

#include <array>
#include <cstdint>
#include <optional>

#include "cm/mad_fields.h"
#include "wire/ethernet.h"
#include "wire/ib_headers.h"
#include "wire/ip.h"
#include "wire/mtu.h"
#include "wire/qp_attr.h"

namespace uroce::cm {

/// Time in nanoseconds from a clock the caller owns (the engine's, or a
/// simulator's).
using Nanos = std::uint64_t;
inline constexpr Nanos kNanosPerMs = 1'000'000;

/// An IBA time value, 4.096 us * 2^t, in milliseconds as the kernel
/// approximates it (cm.c cm_convert_to_ms: 2^(t-8) ms, at least 1).
constexpr std::uint32_t iba_time_ms(unsigned t) {
  return std::uint32_t{1} << (t > 8 ? (t > 31 ? 23 : t - 8) : 0);
}
static_assert(iba_time_ms(20) == 4096 && iba_time_ms(18) == 1024 && iba_time_ms(3) == 1);

// ---------------------------------------------------------------------------
// MAD transport.

/// The two ends of a MAD on the wire, from this host's side: the IP
/// addresses (the GIDs) and what the BTH/DETH and IP header carried. For a
/// received MAD the engine fills it from the frame; for one to send, the CM
/// fills it and the engine builds a UD SEND-only to `remote_qpn` from it.
struct GsiAddress {
  wire::IpAddr local_ip;   ///< our GID the MAD arrived at / leaves from
  wire::IpAddr remote_ip;  ///< the peer's GID
  /// The peer's MAC when the caller already resolved it (a REQ carries the
  /// one of the route); empty: the engine resolves remote_ip itself.
  std::optional<wire::MacAddr> remote_mac;
  std::uint32_t remote_qpn = 1;  ///< received: the DETH source QP; sent: always QP 1
  std::uint16_t pkey = wire::kDefaultPkey;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  std::uint32_t flow_label = 0;
};

/// A MAD to send: 256 bytes to QP 1 of `to.remote_ip`, with Q_Key
/// 0x80010000 (GSI) and P_Key `to.pkey`, source QP 1.
struct OutMad {
  std::array<std::uint8_t, kMadSize> mad{};
  GsiAddress to;
};

/// Where the CM's MADs leave. send_mad() copies what it needs; a MAD it
/// cannot send is lost as on a lossy link, and the CM's resends cover it.
class MadSender {
 public:
  virtual ~MadSender() = default;
  virtual void send_mad(const OutMad& mad) = 0;
};

/// Numbers a remote attacker must not guess: comm IDs, PSNs. The default
/// (random.h) reads the kernel's CSPRNG; tests give a seeded one.
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual std::uint32_t u32() = 0;
};

// ---------------------------------------------------------------------------
// QP attributes, as struct ibv_qp_attr carries them.

using wire::QpState;
using wire::QpType;

namespace qp_attr_mask = wire::qp_attr_mask;

namespace qp_access = wire::access;

/// RDMA_UDP_QKEY: the Q_Key of every UD id in the UDP port space.
inline constexpr std::uint32_t kUdpQkey = 0x01234567;

/// struct ibv_ah_attr with its GRH, for RoCE (is_global 1, dlid 0). The
/// MAC is not part of ibv_ah_attr: it rides along for the caller that has
/// it, as the kernel's rdma_ah_attr.roce.dmac does.
struct AhAttr {
  struct Grh {
    wire::IpAddr dgid;
    std::uint32_t flow_label = 0;
    std::uint8_t sgid_index = 0;
    std::uint8_t hop_limit = 0;
    std::uint8_t traffic_class = 0;
  } grh;
  std::uint16_t dlid = 0;
  std::uint8_t sl = 0;
  std::uint8_t src_path_bits = 0;
  std::uint8_t static_rate = 0;
  std::uint8_t is_global = 1;
  std::uint8_t port_num = 1;
  std::optional<wire::MacAddr> dmac;
};

/// The fields of struct ibv_qp_attr that connection management sets.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  wire::Mtu path_mtu = wire::Mtu::k1024;
  std::uint32_t qkey = 0;
  std::uint32_t rq_psn = 0;
  std::uint32_t sq_psn = 0;
  std::uint32_t dest_qp_num = 0;
  unsigned qp_access_flags = 0;
  AhAttr ah_attr;
  std::uint16_t pkey_index = 0;
  std::uint8_t max_rd_atomic = 0;
  std::uint8_t max_dest_rd_atomic = 0;
  std::uint8_t min_rnr_timer = 0;
  std::uint8_t port_num = 1;
  std::uint8_t timeout = 0;
  std::uint8_t retry_cnt = 0;
  std::uint8_t rnr_retry = 0;
};

}  // namespace uroce::cm
