/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/super_frame.h"

#include "packet/udp_gso.h"
#include "wire/ib_headers.h"
#include "wire/opcode.h"
#include "wire/roce_parser.h"

namespace uroce::test {

namespace {

// Splits at `gso_size`: every segment must parse, ICRC included.
std::optional<std::vector<std::vector<std::uint8_t>>> try_split(wire::ConstBytes frame,
                                                                const packet::UdpFrame& at,
                                                                std::uint32_t gso_size) {
  if (gso_size == 0 || gso_size >= at.payload || gso_size > 0xFFFF) return std::nullopt;
  const wire::ConstBytes header = frame.first(at.header_length());
  const wire::ConstBytes payload = frame.subspan(at.header_length(), at.payload);
  const std::uint32_t n = packet::segments(at.payload, static_cast<std::uint16_t>(gso_size));
  std::vector<std::vector<std::uint8_t>> out;
  for (std::uint32_t k = 0; k < n; ++k) {
    std::vector<std::uint8_t> seg(at.header_length() + gso_size);
    seg.resize(packet::split(header, at, payload, static_cast<std::uint16_t>(gso_size), k, seg));
    wire::RocePacket pkt;
    if (seg.empty() || wire::parse_roce_frame(seg, pkt) != wire::DropReason::kNone)
      return std::nullopt;
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::vector<std::uint8_t>>> split_super_frame(wire::ConstBytes frame) {
  const packet::UdpFrame at = packet::locate_udp(frame);
  if (!at.valid || at.payload < wire::kBthSize) return std::nullopt;
  const std::uint8_t* bth = frame.data() + at.header_length();
  const wire::OpcodeInfo& info = wire::opcode_info(bth[0]);
  if (!info.valid()) return std::nullopt;
  constexpr std::uint32_t kIcrc = 4;
  // The usual case: packets of a path MTU's payload, or of none.
  if (info.has_payload) {
    for (std::uint32_t pmtu = 256; pmtu <= 4096; pmtu *= 2)
      if (auto s = try_split(frame, at, info.length + pmtu + kIcrc)) return s;
  } else if (auto s = try_split(frame, at, info.length + kIcrc)) {
    return s;
  }
  // Equal packets of any length (UD SENDs of one size, say). A candidate
  // must have a BTH of transport version 0 where the next packet starts.
  for (std::uint32_t g = info.length + kIcrc; g < at.payload; g += 4) {
    const std::uint8_t* next = bth + g;
    if (!wire::opcode_info(next[0]).valid() || (next[1] & 0x0F) != 0) continue;
    if (auto s = try_split(frame, at, g)) return s;
  }
  return std::nullopt;
}

}  // namespace uroce::test
