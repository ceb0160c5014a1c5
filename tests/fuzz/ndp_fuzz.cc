/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for IPv6 neighbour discovery (lib/wire/ndp.cc): the
// checks of RFC 4861 7.1.1/7.1.2 and the option loop of
// parse_ndp_frame, and the Neighbor Advertisement built in reply.
//
// Built with ASan and UBSan. Crashes: a read past the frame; a parsed
// message that is neither a solicitation nor an advertisement, or names a
// multicast target; a reply to an accepted solicitation that the parser
// itself refuses, or that advertises another address or link address.
//
// The first byte picks how the rest becomes a frame: as it is; resealed
// (the ICMPv6 checksum recomputed); or a solicitation or advertisement
// from lib/wire's builder (addresses from the input) with options from
// the input appended, lengths and checksum made right, then resealed or
// not after a few byte flips.

#include <cstdint>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "wire/ndp.h"

using namespace uroce;
using namespace uroce::fuzz;

namespace {

const wire::MacAddr kOurMac = {{0x02, 0, 0, 0, 0, 0x77}};

std::vector<std::uint8_t> structured(Input& in, bool advertisement) {
  const std::uint8_t how = in.u8();
  wire::IpAddr src, target;
  for (auto& b : src.bytes) b = in.u8();
  for (auto& b : target.bytes) b = in.u8();
  if (how & 1) src = wire::IpAddr{};  // duplicate address detection's ::
  wire::MacAddr mac;
  for (auto& b : mac.bytes) b = in.u8();
  std::vector<std::uint8_t> f(128);
  std::size_t n;
  if (advertisement) {
    wire::NdpPacket ns;
    ns.src = src;
    ns.eth_src = mac;
    n = wire::build_neighbor_advertisement(f, ns, mac, target);
  } else {
    n = wire::build_neighbor_solicitation(f, mac, src, target);
  }
  FUZZ_CHECK(n > 0);
  f.resize(n);
  // More options: type, length in 8-byte units, value.
  const std::size_t l3 = wire::classify(f).l3_offset();
  const std::size_t options = in.u8() % 8;
  for (std::size_t i = 0; i < options; ++i) {
    const std::uint8_t type = in.u8();
    const std::uint8_t len = in.u8() % 4;
    f.push_back(type);
    f.push_back(len);
    for (std::size_t k = 2; k < std::size_t{len} * 8; ++k) f.push_back(in.u8());
  }
  wire::store_be16(f.data() + l3 + 4, static_cast<std::uint16_t>(f.size() - l3 - 40));
  reseal(f);
  const std::size_t flips = in.u8() % 4;
  for (std::size_t i = 0; i < flips; ++i) f[in.u16() % f.size()] ^= in.u8();
  if (how & 2) reseal(f);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const std::uint8_t mode = in.u8() % 4;
  std::vector<std::uint8_t> f;
  if (mode >= 2) {
    f = structured(in, mode == 3);
  } else {
    const wire::ConstBytes rest = in.take(in.left());
    f.assign(rest.begin(), rest.end());
    if (mode == 1) reseal(f);
  }
  f.shrink_to_fit();  // ASan sees a read one byte past it

  wire::NdpPacket p;
  if (!wire::parse_ndp_frame(f, p)) return 0;
  FUZZ_CHECK(p.type == wire::icmpv6_type::kNeighborSolicitation ||
             p.type == wire::icmpv6_type::kNeighborAdvertisement);
  FUZZ_CHECK(p.target.bytes[0] != 0xFF);
  if (p.type != wire::icmpv6_type::kNeighborSolicitation) return 0;
  // Answer it as the engine would, for the address it asked about.
  std::vector<std::uint8_t> reply(128);
  const std::size_t n = wire::build_neighbor_advertisement(reply, p, kOurMac, p.target);
  FUZZ_CHECK(n > 0 && n <= reply.size());
  reply.resize(n);
  wire::NdpPacket na;
  FUZZ_CHECK(wire::parse_ndp_frame(reply, na));
  FUZZ_CHECK(na.type == wire::icmpv6_type::kNeighborAdvertisement);
  FUZZ_CHECK(na.target == p.target && na.has_link_addr && na.link_addr == kOurMac);
  return 0;
}
