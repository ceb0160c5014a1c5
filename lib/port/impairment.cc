/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/impairment.h"

#include "wire/classify.h"
#include "wire/ethernet.h"
#include "wire/udp.h"

namespace uroce::port {

Corruptible corruptible(wire::ConstBytes frame) {
  // Past the IP and UDP headers, what a flip lands on is covered by the
  // ICRC (or TCP's or ICMP's checksum): the receiver must notice. A flip
  // in IPv4's UDP checksum field, which RoCEv2 leaves 0, would pass, and
  // one in the Ethernet or IP header may only misdirect the frame. The
  // ICRC also leaves out the BTH's FECN, BECN and resv6 bits (IBA Annex
  // A17.3.3, wire/icrc.cc), which the network may set on the way.
  Corruptible c{wire::EthHdr::kSize};
  const wire::FrameClass f = wire::classify(frame);
  const std::size_t payload = f.l4_offset() + wire::UdpHdr::kSize;
  if (!f.ip() || payload >= frame.size()) return c;
  c.from = payload;
  if (f.l4_proto == wire::ip_proto::kUdp &&
      wire::UdpHdr::parse(frame.data() + f.l4_offset()).dst_port == wire::kRoceV2Port)
    c.masked = payload + 4;
  return c;
}

ImpairmentDecision Impairment::decide() {
  ImpairmentDecision d;
  d.drop = chance(cfg_.drop);
  d.duplicate = chance(cfg_.duplicate);
  d.reorder = chance(cfg_.reorder);
  d.corrupt = chance(cfg_.corrupt);
  if (d.drop) d.duplicate = d.reorder = d.corrupt = false;
  return d;
}

bool Impairment::corrupt(wire::Bytes frame) {
  const Corruptible c = corruptible(frame);
  if (c.from >= frame.size()) return false;
  const std::size_t bytes = frame.size() - c.from - (c.masked < frame.size() ? 1 : 0);
  if (bytes == 0) return false;
  const std::size_t bit = uniform(bytes * 8 - 1);
  std::size_t at = c.from + bit / 8;
  if (at >= c.masked) ++at;  // the masked byte is passed over
  frame[at] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  return true;
}

Nanos Impairment::delay() {
  return cfg_.delay_ns + (cfg_.jitter_ns > 0 ? uniform(cfg_.jitter_ns) : 0);
}

}  // namespace uroce::port
