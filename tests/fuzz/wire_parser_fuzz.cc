/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for everything in lib/wire that reads received frames:
// the RoCEv2 parser, MAC control (PFC/PAUSE), ARP and ICMP echo. Built
// with ASan and UBSan: any read outside the frame, any undefined behaviour
// or a broken invariant of a parsed packet is a crash.
//
// The first input byte picks how the rest becomes a frame:
//   0: the bytes as they are;
//   1: the bytes, with IPv4 header checksum and ICRC resealed
//      (fuzz_input.h), so inputs reach the checks behind the ICRC;
//   2: a valid packet of an opcode chosen by the input, built with the
//      builder, then mutated by the input and resealed or not.

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "wire/arp.h"
#include "wire/icmp.h"
#include "wire/icrc.h"
#include "wire/mac_control.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

using namespace uroce::wire;
using uroce::fuzz::reseal;

namespace {

std::vector<std::uint8_t> structured(const std::uint8_t* d, std::size_t n) {
  static const std::vector<std::uint8_t> kOpcodes = [] {
    std::vector<std::uint8_t> ops;
    for (unsigned op = 0; op < 256; ++op) {
      if (opcode_info(static_cast<std::uint8_t>(op)).valid())
        ops.push_back(static_cast<std::uint8_t>(op));
    }
    return ops;
  }();
  if (n < 8) return {};
  RoceRoute route;
  route.vlan = d[1] & 1;
  route.src_ip = route.dst_ip = IpAddr::from_v4(0x0A000001);
  if (d[1] & 2) {
    route.src_ip.bytes = {0xfd};
    route.dst_ip.bytes = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  }
  Bth bth;
  bth.opcode = kOpcodes[d[0] % kOpcodes.size()];
  bth.dest_qp = load_be24(d + 2);
  bth.psn = Psn(load_be24(d + 5));
  const OpcodeInfo& info = opcode_info(bth.opcode);
  std::size_t payload_len = info.has_payload ? (std::size_t{d[1]} << 4) % 4200 : 0;
  if (!info.ends_message()) payload_len &= ~std::size_t{3};
  d += 8;
  n -= 8;
  std::vector<std::uint8_t> payload(payload_len);
  for (std::size_t i = 0; i < payload_len && i < n; ++i) payload[i] = d[i];
  std::vector<std::uint8_t> frame(roce_frame_length(route, info, payload_len));
  FUZZ_CHECK(build_roce_frame(frame, route, bth, ExtHeaders{}, payload, 1) == frame.size());
  RocePacket p;
  FUZZ_CHECK(parse_roce_frame(frame, p) == DropReason::kNone);

  // Mutations: (offset, xor) pairs from the input's tail.
  const std::size_t skip = payload_len < n ? payload_len : n;
  d += skip;
  n -= skip;
  for (; n >= 3; d += 3, n -= 3) frame[load_be16(d) % frame.size()] ^= d[2];
  if (n > 0 && (d[0] & 1)) reseal(frame);
  return frame;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::uint8_t> frame;
  switch (data[0] % 3) {
    case 0:
      frame.assign(data + 1, data + size);
      break;
    case 1:
      frame.assign(data + 1, data + size);
      reseal(frame);
      break;
    default:
      frame = structured(data + 1, size - 1);
      break;
  }
  // An exactly-sized heap copy: ASan catches a read one byte past it.
  frame.shrink_to_fit();

  RocePacket p;
  if (parse_roce_frame(frame, p) == DropReason::kNone) {
    FUZZ_CHECK(p.info != nullptr && p.info->valid() && p.bth.tver == 0);
    FUZZ_CHECK(p.payload.empty() ||
               (p.payload.data() >= frame.data() &&
                p.payload.data() + p.payload.size() <= frame.data() + frame.size()));
    FUZZ_CHECK(p.payload.empty() || p.info->has_payload);
    FUZZ_CHECK(p.bth_offset + p.info->length + p.payload.size() + p.bth.pad_count + kIcrcSize <=
               frame.size());
  }
  MacControlFrame mc;
  (void)parse_mac_control_frame(frame, mc);
  ArpPacket arp;
  if (parse_arp_frame(frame, arp)) {
    std::uint8_t reply[kMinFrameSize];
    FUZZ_CHECK(build_arp_reply(reply, arp, MacAddr{}, 1) == kMinFrameSize);
  }
  std::vector<std::uint8_t> echo(frame.size() + kMinFrameSize);
  const std::size_t n = build_icmp_echo_reply(echo, frame);
  FUZZ_CHECK(n <= echo.size());
  return 0;
}
