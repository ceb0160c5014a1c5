/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The UDP header and RoCEv2's use of it: destination port 4791, and a
// source port that carries per-flow entropy for ECMP and RSS.

#include <cstdint>

#include "wire/bytes.h"

namespace uroce::wire {

/// IANA port of RoCEv2 (ROCE_V2_UDP_DPORT).
inline constexpr std::uint16_t kRoceV2Port = 4791;

struct UdpHdr {
  static constexpr std::size_t kSize = 8;

  std::uint16_t src_port = 0;
  std::uint16_t dst_port = kRoceV2Port;
  std::uint16_t length = 0;  ///< header + payload
  /// 0 over IPv4, as rxe and ConnectX NICs send it (the ICRC protects the
  /// packet); computed over IPv6, where RFC 8200 forbids 0.
  std::uint16_t checksum = 0;

  static UdpHdr parse(const std::uint8_t* p) {
    return {load_be16(p), load_be16(p + 2), load_be16(p + 4), load_be16(p + 6)};
  }
  void write(std::uint8_t* p) const {
    store_be16(p, src_port);
    store_be16(p + 2, dst_port);
    store_be16(p + 4, length);
    store_be16(p + 6, checksum);
  }
};

/// The 20-bit flow label of a QP pair when the program gave none
/// (rdma_calc_flow_label in Linux ib_verbs.h). Symmetric in its arguments,
/// so both ends of a connection hash to the same flow.
constexpr std::uint32_t calc_flow_label(std::uint32_t lqpn, std::uint32_t rqpn) {
  std::uint64_t v = std::uint64_t{lqpn} * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<std::uint32_t>(v & 0xFFFFF);
}

/// The UDP source port for a flow label (rdma_flow_label_to_udp_sport):
/// folds 20 bits into the 14 low bits of the ephemeral range 0xC000-0xFFFF.
constexpr std::uint16_t flow_label_to_udp_sport(std::uint32_t fl) {
  const std::uint32_t fl_low = fl & 0x03FFF;
  const std::uint32_t fl_high = fl & 0xFC000;
  return static_cast<std::uint16_t>((fl_low ^ (fl_high >> 14)) | 0xC000);
}

/// The source port of a QP pair: constant for the flow, so its packets
/// stay on one ECMP path and in order.
constexpr std::uint16_t roce_udp_sport(std::uint32_t lqpn, std::uint32_t rqpn) {
  return flow_label_to_udp_sport(calc_flow_label(lqpn, rqpn));
}

static_assert(roce_udp_sport(0x11, 0x22) == roce_udp_sport(0x22, 0x11));
static_assert(roce_udp_sport(0xFFFFFF, 0xFFFFFE) >= 0xC000);
static_assert(flow_label_to_udp_sport(0) == 0xC000);

}  // namespace uroce::wire
