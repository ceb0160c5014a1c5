/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// UDP segmentation offload for RoCEv2: several RoCE packets of one flow
// handed to the kernel as one super-frame, and a super-frame split back
// into its packets.
//
// The kernel's UDP GSO (UDP_SEGMENT, SKB_GSO_UDP_L4) cuts a datagram's
// payload into gso_size pieces and gives each the super-frame's Ethernet,
// IP and UDP headers with its own lengths, an IPv4 ID one above the one
// before (inet_gso_segment) and fresh checksums. Everything RoCE puts in a
// packet (BTH, extension headers, payload, ICRC) is UDP payload, so a run
// of complete RoCE packets of equal length (the last may be shorter) is a
// valid super-frame: each segment comes out as one of those packets. QUIC
// stacks batch their packets the same way. The catch is the ICRC, which
// covers the IPv4 ID and the lengths (IBA A17.3.3 masks only the TOS,
// TTL and checksums): a packet joins a run only if its header is the one
// segmentation will write, its ID one above its predecessor's. uroce's
// engine numbers the IDs of the frames it builds consecutively, so a QP's
// burst coalesces as built.
//
// Over a veth nothing segments the super-frame (veth takes GSO_UDP_L4):
// the peer's packet socket receives it whole with the gso_size in its
// virtio-net header, and split() does there what segmentation would have
// done. Toward a NIC or a kernel peer the kernel (or the NIC's USO)
// segments it. Pure: no sockets here.

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.h"

namespace uroce::packet {

/// Where an untagged frame's UDP datagram lies. IPv4 without options and
/// unfragmented, or IPv6 without extension headers; lengths consistent
/// with the frame's.
struct UdpFrame {
  bool valid = false;
  bool ipv6 = false;
  std::uint16_t l3 = 0;       ///< IP header offset
  std::uint16_t l4 = 0;       ///< UDP header offset
  std::uint32_t payload = 0;  ///< bytes after the UDP header
  std::uint32_t header_length() const { return l4 + 8u; }
};

UdpFrame locate_udp(wire::ConstBytes frame);

/// The largest super-frame, Ethernet header included: what a peer's
/// receive ring holds in one slot (packet_port.h), below IPv4's 64 KiB.
inline constexpr std::size_t kMaxSuperFrame = 65000;
/// Most segments in one super-frame (the kernel's UDP_MAX_SEGMENTS is 64
/// in older kernels, 128 since 6.11).
inline constexpr std::uint16_t kMaxSegments = 64;

/// How many frames, from frames[0], segmentation of one super-frame
/// reproduces byte for byte (ICRC and all): 1 when frames[0] goes alone.
/// `first` is locate_udp(frames[0]).
std::uint16_t coalescible(std::span<const wire::ConstBytes> frames, const UdpFrame& first);

/// The super-frame's headers for frames[0]'s `first` header and a UDP
/// payload of `total` bytes, into `out` (first.header_length() bytes): the
/// lengths of the whole, the IPv4 checksum, and in the UDP checksum the
/// pseudo-header sum a CHECKSUM_PARTIAL datagram carries (the kernel
/// completes each segment's).
void write_super_header(wire::ConstBytes leader, const UdpFrame& first, std::uint32_t total,
                        std::uint8_t* out);

/// Segment `k` of a super-frame whose headers are `header` (untagged,
/// locate_udp's `at`) and whose UDP payload is `payload`, cut at
/// `gso_size`, into `out`: the frame segmentation would have sent.
/// Returns its length, 0 when `out` is too small. The UDP checksum is 0
/// for IPv4 (none) and computed for IPv6, where it is mandatory.
std::size_t split(wire::ConstBytes header, const UdpFrame& at, wire::ConstBytes payload,
                  std::uint16_t gso_size, std::uint32_t k, wire::Bytes out);

/// How many segments a payload of `length` bytes makes at `gso_size`.
inline std::uint32_t segments(std::uint32_t length, std::uint16_t gso_size) {
  return gso_size == 0 ? 0 : (length + gso_size - 1) / gso_size;
}

}  // namespace uroce::packet
