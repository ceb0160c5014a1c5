/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for what reads a frame's L2/L3 headers to decide its
// fate: lib/wire's classifier (wire::classify), lib/pfc's ingress
// classifier (pfc::frame_priority) and the switch's frame inspection and
// ECN marking (sw::inspect, sw::mark_ce).
//
// Built with ASan and UBSan. Crashes: a read past the frame; fields that
// disagree with the bytes they come from; a priority outside 0-7; a mark
// that changes more than the ECN field and the IPv4 checksum, breaks a
// valid IPv4 header checksum, or makes a valid RoCEv2 frame invalid (the
// ICRC masks the ECN bits).
//
// The first byte picks the priority map (trust PCP or DSCP, and how the
// DSCP map is rotated) and how the rest becomes a frame: as it is,
// resealed (fuzz_input.h), or a RoCEv2 frame built from the route fields
// that follow, with its payload.

#include <cstdint>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "pfc/classify.h"
#include "switch/frame.h"
#include "wire/roce_parser.h"

using namespace uroce;
using namespace uroce::fuzz;

namespace {

std::vector<std::uint8_t> structured(Input& in) {
  wire::RoceRoute r;
  const std::uint8_t how = in.u8();
  r.vlan = how & 1;
  r.pcp = (how >> 1) & 7;
  r.vid = in.u16() & 0x0FFF;
  r.ecn = static_cast<wire::Ecn>((how >> 4) & 3);
  r.dscp = in.u8() & 0x3F;
  r.hop_limit = in.u8();
  if (how & 0x40) {
    r.src_ip = *wire::IpAddr::parse("fd00::1");
    r.dst_ip = *wire::IpAddr::parse("fd00::2");
    r.flow_label = in.u24() & 0xFFFFF;
  } else {
    r.src_ip = wire::IpAddr::from_v4(in.u32());
    r.dst_ip = wire::IpAddr::from_v4(in.u32());
  }
  Targets t;
  t.max_payload = 9000;
  return frame_of(read_packet(in, t), r, in.u16());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const std::uint8_t how = in.u8();
  sw::PriorityMap map;
  map.trust_pcp = how & 1;
  for (unsigned d = 0; d < 64; ++d)
    map.dscp[d] = static_cast<std::uint8_t>((d + (how >> 3)) >> 3 & 7);
  std::vector<std::uint8_t> f;
  if ((how >> 1) % 3 == 2) {
    f = structured(in);
  } else {
    const wire::ConstBytes rest = in.take(in.left());
    f.assign(rest.begin(), rest.end());
    if ((how >> 1) % 3 == 1) reseal(f);
  }
  f.shrink_to_fit();  // ASan sees a read one byte past it

  const wire::FrameClass c = wire::classify(f);
  if (!c.valid()) {
    FUZZ_CHECK(c.ip_version == 0 && !c.tagged);
  } else {
    FUZZ_CHECK(c.l2_len == (c.tagged ? 18 : 14) && c.l2_len <= f.size());
    FUZZ_CHECK(c.ether_type == wire::load_be16(f.data() + c.l2_len - 2));
    if (c.tagged) {
      FUZZ_CHECK(c.pcp == f[14] >> 5 && c.vid == (wire::load_be16(f.data() + 14) & 0x0FFF));
    }
  }
  if (c.ip()) {
    const std::uint8_t* ip = f.data() + c.l3_offset();
    FUZZ_CHECK(c.l4_offset() <= f.size());
    if (c.ip_version == 4) {
      FUZZ_CHECK(c.ether_type == wire::ether_type::kIpv4 && ip[0] >> 4 == 4);
      FUZZ_CHECK(c.l3_len >= 20 && c.l3_len == (ip[0] & 0x0F) * 4);
      FUZZ_CHECK(c.tclass == ip[1] && c.l4_proto == ip[9]);
    } else {
      FUZZ_CHECK(c.ip_version == 6 && c.ether_type == wire::ether_type::kIpv6 && ip[0] >> 4 == 6);
      FUZZ_CHECK(c.l3_len == 40 && c.l4_proto == ip[6]);
      FUZZ_CHECK(c.tclass == ((ip[0] & 0x0F) << 4 | ip[1] >> 4));
    }
    (void)c.ip_dst(f);
  }
  FUZZ_CHECK(pfc::frame_priority(c) < 8);

  const sw::FrameInfo info = sw::inspect(f, map);
  FUZZ_CHECK(info.priority < 8);
  FUZZ_CHECK(info.l2_len == c.l2_len && info.tagged == c.tagged && info.pcp == c.pcp &&
             info.vid == c.vid && info.ether_type == c.ether_type &&
             info.ip_version == c.ip_version && info.l3_len == c.l3_len &&
             info.l4_proto == c.l4_proto && info.tclass == c.tclass);

  std::vector<std::uint8_t> g = f;
  if (!sw::mark_ce(g, info)) {
    FUZZ_CHECK(g == f);
    FUZZ_CHECK(!c.ip() || c.ecn() == wire::Ecn::kNotEct);
    return 0;
  }
  FUZZ_CHECK(c.ip() && c.ecn() != wire::Ecn::kNotEct);
  FUZZ_CHECK(wire::classify(g).ecn() == wire::Ecn::kCe);
  const std::size_t l3 = c.l3_offset();
  for (std::size_t i = 0; i < f.size(); ++i) {
    const bool may = i == l3 + 1 || (c.ip_version == 4 && (i == l3 + 10 || i == l3 + 11));
    FUZZ_CHECK(may || g[i] == f[i]);
  }
  if (c.ip_version == 4 && wire::inet_checksum(f.data() + l3, c.l3_len) == 0) {
    FUZZ_CHECK(wire::inet_checksum(g.data() + l3, c.l3_len) == 0);
  }
  wire::RocePacket before, after;
  if (wire::parse_roce_frame(f, before) == wire::DropReason::kNone) {
    FUZZ_CHECK(wire::parse_roce_frame(g, after) == wire::DropReason::kNone);
    FUZZ_CHECK(after.ecn == wire::Ecn::kCe);
  }
  return 0;
}
