/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/mac_control.h"

#include <cstring>

namespace uroce::wire {
namespace {

constexpr std::size_t kOpcodeOff = EthHdr::kSize;
constexpr std::size_t kBodyOff = kOpcodeOff + 2;
constexpr std::size_t kPfcBodySize = 2 + 2 * kNumPriorities;

std::uint8_t* start_frame(Bytes out, const MacAddr& src, std::uint16_t opcode) {
  std::memset(out.data(), 0, kMinFrameSize);
  EthHdr{kMacControlDst, src, ether_type::kMacControl}.write(out.data());
  store_be16(out.data() + kOpcodeOff, opcode);
  return out.data() + kBodyOff;
}

}  // namespace

std::size_t build_pfc_frame(Bytes out, const MacAddr& src, std::uint8_t class_enable,
                            const std::array<std::uint16_t, kNumPriorities>& class_time) {
  if (out.size() < kMinFrameSize) return 0;
  std::uint8_t* body = start_frame(out, src, mac_control_opcode::kPfc);
  // The enable vector is two octets; the high one is reserved and zero.
  store_be16(body, class_enable);
  for (unsigned i = 0; i < kNumPriorities; ++i) store_be16(body + 2 + 2 * i, class_time[i]);
  return kMinFrameSize;
}

std::size_t build_pause_frame(Bytes out, const MacAddr& src, std::uint16_t pause_time) {
  if (out.size() < kMinFrameSize) return 0;
  std::uint8_t* body = start_frame(out, src, mac_control_opcode::kPause);
  store_be16(body, pause_time);
  return kMinFrameSize;
}

MacControlError parse_mac_control_frame(ConstBytes frame, MacControlFrame& out) {
  if (frame.size() < kBodyOff) return MacControlError::kShortFrame;
  const EthHdr eth = EthHdr::parse(frame.data());
  if (eth.ether_type != ether_type::kMacControl) return MacControlError::kNotMacControl;
  if (eth.dst != kMacControlDst) return MacControlError::kBadDestination;
  out = MacControlFrame{};
  out.src = eth.src;
  out.opcode = load_be16(frame.data() + kOpcodeOff);
  const std::uint8_t* body = frame.data() + kBodyOff;
  if (out.opcode == mac_control_opcode::kPause) {
    if (frame.size() < kBodyOff + 2) return MacControlError::kShortFrame;
    out.pause_time = load_be16(body);
    return MacControlError::kNone;
  }
  if (out.opcode != mac_control_opcode::kPfc) return MacControlError::kUnknownOpcode;
  if (frame.size() < kBodyOff + kPfcBodySize) return MacControlError::kShortFrame;
  if (body[0] != 0) return MacControlError::kBadClassEnable;
  out.class_enable = body[1];
  for (unsigned i = 0; i < kNumPriorities; ++i) out.class_time[i] = load_be16(body + 2 + 2 * i);
  return MacControlError::kNone;
}

}  // namespace uroce::wire
