/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/ib_headers.h"

#include <cstring>

namespace uroce::wire {

ExtHeaders ExtHeaders::parse(const OpcodeInfo& info, const std::uint8_t* bth) {
  ExtHeaders e;
  if (info.has(ExtHeader::kDeth)) e.deth = Deth::parse(bth + info.offset_of(ExtHeader::kDeth));
  if (info.has(ExtHeader::kXrcEth))
    e.xrc_srqn = load_be24(bth + info.offset_of(ExtHeader::kXrcEth) + 1);
  if (info.has(ExtHeader::kReth)) e.reth = Reth::parse(bth + info.offset_of(ExtHeader::kReth));
  if (info.has(ExtHeader::kAtomicEth))
    e.atomic_eth = AtomicEth::parse(bth + info.offset_of(ExtHeader::kAtomicEth));
  if (info.has(ExtHeader::kAeth)) e.aeth = Aeth::parse(bth + info.offset_of(ExtHeader::kAeth));
  if (info.has(ExtHeader::kAtomicAckEth))
    e.atomic_ack_eth = AtomicAckEth::parse(bth + info.offset_of(ExtHeader::kAtomicAckEth));
  // Immediate data is opaque: copy its bytes, as ibv_wc.imm_data holds them.
  if (info.has(ExtHeader::kImmDt))
    std::memcpy(&e.imm_data, bth + info.offset_of(ExtHeader::kImmDt), 4);
  if (info.has(ExtHeader::kIeth)) e.ieth_rkey = load_be32(bth + info.offset_of(ExtHeader::kIeth));
  if (info.has(ExtHeader::kSackEth))
    e.sack = SackEth::parse(bth + info.offset_of(ExtHeader::kSackEth));
  return e;
}

void ExtHeaders::write(const OpcodeInfo& info, std::uint8_t* bth) const {
  if (info.has(ExtHeader::kDeth)) deth.write(bth + info.offset_of(ExtHeader::kDeth));
  if (info.has(ExtHeader::kXrcEth)) {
    std::uint8_t* x = bth + info.offset_of(ExtHeader::kXrcEth);
    x[0] = 0;  // reserved
    store_be24(x + 1, xrc_srqn);
  }
  if (info.has(ExtHeader::kReth)) reth.write(bth + info.offset_of(ExtHeader::kReth));
  if (info.has(ExtHeader::kAtomicEth))
    atomic_eth.write(bth + info.offset_of(ExtHeader::kAtomicEth));
  if (info.has(ExtHeader::kAeth)) aeth.write(bth + info.offset_of(ExtHeader::kAeth));
  if (info.has(ExtHeader::kAtomicAckEth))
    atomic_ack_eth.write(bth + info.offset_of(ExtHeader::kAtomicAckEth));
  if (info.has(ExtHeader::kImmDt))
    std::memcpy(bth + info.offset_of(ExtHeader::kImmDt), &imm_data, 4);
  if (info.has(ExtHeader::kIeth)) store_be32(bth + info.offset_of(ExtHeader::kIeth), ieth_rkey);
  if (info.has(ExtHeader::kSackEth)) sack.write(bth + info.offset_of(ExtHeader::kSackEth));
  if (info.has(ExtHeader::kCnpReserved))
    std::memset(bth + info.offset_of(ExtHeader::kCnpReserved), 0,
                kExtHeaderSize[static_cast<std::size_t>(ExtHeader::kCnpReserved)]);
}

}  // namespace uroce::wire
