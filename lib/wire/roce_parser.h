/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Validating a received RoCEv2 frame. The parser checks everything that
// can be checked without QP state (framing, lengths, opcode, pad, ICRC) and
// returns either a parsed packet or the reason to drop it. QP-dependent
// checks (P_Key, Q_Key, PSN, path MTU, addresses) belong to the transport.
// It never reads outside the frame it is given.

#include <cstdint>
#include <string_view>

#include "wire/bytes.h"
#include "wire/classify.h"
#include "wire/ethernet.h"
#include "wire/ib_headers.h"
#include "wire/ip.h"
#include "wire/opcode.h"
#include "wire/udp.h"

namespace uroce::wire {

/// Why a frame is not a valid RoCEv2 packet. kNone means it is.
enum class DropReason : std::uint8_t {
  kNone,
  kShortFrame,         ///< ends before a header it announces
  kNotIp,              ///< EtherType is neither IPv4 nor IPv6
  kBadIpVersion,       ///< version nibble disagrees with the EtherType
  kBadIpHeaderLength,  ///< IPv4 IHL other than 5 (RoCEv2 has no options)
  kBadIpLength,        ///< IP length beyond the frame or below the headers
  kBadIpChecksum,
  kIpFragment,  ///< RoCEv2 is never fragmented
  kNotUdp,
  kNotRoceV2Port,  ///< UDP destination port is not 4791
  kBadUdpLength,   ///< UDP length disagrees with the IP length
  kBadTver,        ///< BTH transport version is not 0
  kUnknownOpcode,
  kBadLength,  ///< too short for the opcode's headers, or payload where none may be
  kBadPad,     ///< pad count larger than the payload, or on a packet that may not pad
  kBadIcrc,
  kCount,
};

/// The counter name of a drop reason (the engine's drop counters).
constexpr std::string_view name(DropReason c) {
  switch (c) {
    case DropReason::kNone:
      return "none";
    case DropReason::kShortFrame:
      return "short_frame";
    case DropReason::kNotIp:
      return "not_ip";
    case DropReason::kBadIpVersion:
      return "bad_ip_version";
    case DropReason::kBadIpHeaderLength:
      return "bad_ip_header_length";
    case DropReason::kBadIpLength:
      return "bad_ip_length";
    case DropReason::kBadIpChecksum:
      return "bad_ip_checksum";
    case DropReason::kIpFragment:
      return "ip_fragment";
    case DropReason::kNotUdp:
      return "not_udp";
    case DropReason::kNotRoceV2Port:
      return "not_rocev2_port";
    case DropReason::kBadUdpLength:
      return "bad_udp_length";
    case DropReason::kBadTver:
      return "bad_tver";
    case DropReason::kUnknownOpcode:
      return "unknown_opcode";
    case DropReason::kBadLength:
      return "bad_length";
    case DropReason::kBadPad:
      return "bad_pad";
    case DropReason::kBadIcrc:
      return "bad_icrc";
    case DropReason::kCount:
      break;
  }
  return {};
}

constexpr std::string_view drop_reason_name(DropReason r) { return name(r); }

/// A validated RoCEv2 packet. Spans point into the frame it was parsed
/// from, which must outlive it.
struct RocePacket {
  // (The Ethernet header is not copied out: nothing on the receive path
  // reads it. EthHdr::parse(frame.data()) has it.)
  bool has_vlan = false;
  VlanTag vlan;

  bool ipv6 = false;
  IpAddr src_ip;
  IpAddr dst_ip;
  std::uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  std::uint8_t hop_limit = 0;
  std::uint32_t flow_label = 0;  ///< IPv6 only
  std::uint16_t ip_id = 0;       ///< IPv4 only

  std::uint16_t udp_sport = 0;

  Bth bth;
  const OpcodeInfo* info = nullptr;
  ExtHeaders ext;

  ConstBytes frame;    ///< the whole frame this packet was parsed from
  ConstBytes payload;  ///< without the pad
  std::uint32_t icrc = 0;

  std::size_t l3_offset = 0;   ///< IP header, from the start of the frame
  std::size_t bth_offset = 0;  ///< BTH, from the start of the frame
};

/// Parses and validates `frame` (Ethernet header to ICRC, no FCS). On
/// success fills `pkt` and returns kNone.
[[nodiscard]] DropReason parse_roce_frame(ConstBytes frame, RocePacket& pkt);
/// The same for a frame its receiver has classified already: `c` must be
/// classify(frame), which the parser then does not repeat.
[[nodiscard]] DropReason parse_roce_frame(ConstBytes frame, const FrameClass& c, RocePacket& pkt);

}  // namespace uroce::wire
