/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Building RoCEv2 frames: Ethernet [802.1Q] | IPv4 or IPv6 | UDP 4791 | BTH
// | extension headers | payload | pad | ICRC. The Ethernet FCS is the
// port's business.

#include <array>
#include <cstddef>
#include <cstdint>

#include "wire/bytes.h"
#include "wire/ethernet.h"
#include "wire/ib_headers.h"
#include "wire/ip.h"
#include "wire/opcode.h"
#include "wire/udp.h"

namespace uroce::wire {

/// What every packet of one flow (one QP and its peer) shares below the
/// BTH: the header template of a QP.
struct RoceRoute {
  MacAddr src_mac;
  MacAddr dst_mac;
  bool vlan = false;     ///< add an 802.1Q tag (VID 0 = priority tag)
  std::uint8_t pcp = 0;  ///< 802.1p priority when tagged
  std::uint16_t vid = 0;
  IpAddr src_ip;  ///< both IPv4-mapped, or both IPv6
  IpAddr dst_ip;
  std::uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  std::uint8_t hop_limit = 64;
  std::uint32_t flow_label = 0;  ///< IPv6 only
  std::uint16_t udp_sport = 0xC000;

  bool ipv6() const { return !src_ip.is_v4(); }
  /// Offset of the IP header in the frame.
  std::size_t l3_offset() const { return EthHdr::kSize + (vlan ? VlanTag::kSize : 0); }
  /// Offset of the BTH in the frame.
  std::size_t bth_offset() const {
    return l3_offset() + (ipv6() ? Ipv6Hdr::kSize : Ipv4Hdr::kMinSize) + UdpHdr::kSize;
  }
};

/// Bytes of pad that align a payload to 4 bytes (IBA 9.2: PadCnt).
constexpr std::uint8_t pad_count(std::size_t payload_len) {
  return static_cast<std::uint8_t>((0 - payload_len) & 3);
}

/// The bytes of a route's frames below the BTH (Ethernet [802.1Q] | IP |
/// UDP), laid out once. A frame's headers are then a copy with the lengths
/// patched in and, over IPv4, the identification and a checksum finished
/// from the template's partial sum (RFC 1624). Written field by field they
/// cost about 250 instructions a frame; the copy and patches cost 60.
class RouteTemplate {
 public:
  static constexpr std::size_t kMaxSize =
      EthHdr::kSize + VlanTag::kSize + Ipv6Hdr::kSize + UdpHdr::kSize;

  RouteTemplate() = default;
  explicit RouteTemplate(const RoceRoute& route);

  bool ipv6() const { return ipv6_; }
  std::size_t l3_offset() const { return l3_; }
  std::size_t bth_offset() const { return len_; }
  IpAddr src_ip() const;
  IpAddr dst_ip() const;

  /// Writes the headers below the BTH of a frame of `frame_len` bytes
  /// (ICRC included) to `p`, which has room for bth_offset() bytes. The
  /// IPv4 checksum is left 0 without `ipv4_checksum`, for a NIC to fill.
  void write(std::uint8_t* p, std::size_t frame_len, std::uint16_t ip_id, bool ipv4_checksum) const;

 private:
  std::array<std::uint8_t, kMaxSize> bytes_{};
  std::uint8_t len_ = 0;
  std::uint8_t l3_ = 0;
  bool ipv6_ = false;
  /// The ones' complement sum of the IPv4 header with its length,
  /// identification and checksum zero.
  std::uint16_t ipv4_sum_ = 0;
};

/// Length of the whole frame, ICRC included, for `payload_len` bytes of
/// payload under `info`.
std::size_t roce_frame_length(const RoceRoute& route, const OpcodeInfo& info,
                              std::size_t payload_len);
inline std::size_t roce_frame_length(const RouteTemplate& route, const OpcodeInfo& info,
                                     std::size_t payload_len) {
  return route.bth_offset() + info.length + payload_len + pad_count(payload_len) + kIcrcSize;
}

/// Writes the headers of a packet carrying `payload_len` bytes, from the
/// Ethernet header to the last extension header, into `out`; fills in the
/// lengths, the pad count (bth.pad_count is ignored) and the IPv4 checksum
/// (unless `ipv4_checksum` is false: a NIC offload fills it in; the ICRC
/// masks it either way). The first half of build_roce_frame, which every
/// frame goes through; on its own for measuring it. Returns the header
/// length, or 0 when `out` is too small or the opcode is unknown.
std::size_t write_roce_headers(Bytes out, const RouteTemplate& route, Bth bth,
                               const ExtHeaders& ext, std::size_t payload_len, std::uint16_t ip_id,
                               bool ipv4_checksum = true);
inline std::size_t write_roce_headers(Bytes out, const RoceRoute& route, Bth bth,
                                      const ExtHeaders& ext, std::size_t payload_len,
                                      std::uint16_t ip_id, bool ipv4_checksum = true) {
  return write_roce_headers(out, RouteTemplate(route), bth, ext, payload_len, ip_id, ipv4_checksum);
}

/// Builds a complete frame into `out`, the one way every RoCE frame uroce
/// sends is made: headers, the payload gathered from `payload` in order,
/// zero pad, ICRC and, over IPv6, the UDP checksum (which the ICRC does
/// not cover). With `offload_ipv4_checksum` the IPv4 header checksum is
/// left 0 for the port to fill in. Returns the frame length, or 0 when
/// `out` is too small or the opcode is unknown.
std::size_t build_roce_frame(Bytes out, const RouteTemplate& route, const Bth& bth,
                             const ExtHeaders& ext, std::span<const ConstBytes> payload,
                             std::uint16_t ip_id, bool offload_ipv4_checksum = false);
/// The same with the payload in the transport's gather segments.
std::size_t build_roce_frame(Bytes out, const RouteTemplate& route, const Bth& bth,
                             const ExtHeaders& ext, std::span<const GatherSeg> payload,
                             std::uint16_t ip_id, bool offload_ipv4_checksum = false);

/// The same from a route, for frames off the fast path (CNPs, tests): the
/// engine keeps its routes' templates.
inline std::size_t build_roce_frame(Bytes out, const RoceRoute& route, const Bth& bth,
                                    const ExtHeaders& ext, std::span<const ConstBytes> payload,
                                    std::uint16_t ip_id, bool offload_ipv4_checksum = false) {
  return build_roce_frame(out, RouteTemplate(route), bth, ext, payload, ip_id,
                          offload_ipv4_checksum);
}

/// The same with the payload in one piece.
inline std::size_t build_roce_frame(Bytes out, const RoceRoute& route, const Bth& bth,
                                    const ExtHeaders& ext, ConstBytes payload,
                                    std::uint16_t ip_id) {
  return build_roce_frame(out, route, bth, ext, std::span<const ConstBytes>(&payload, 1), ip_id);
}

}  // namespace uroce::wire
