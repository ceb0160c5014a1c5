/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/roce_frame.h"

#include <cstring>

#include "wire/icrc.h"

namespace uroce::wire {

std::size_t roce_frame_length(const RoceRoute& route, const OpcodeInfo& info,
                              std::size_t payload_len) {
  return route.bth_offset() + info.length + payload_len + pad_count(payload_len) + kIcrcSize;
}

std::size_t write_roce_headers(Bytes out, const RoceRoute& route, Bth bth, const ExtHeaders& ext,
                               std::size_t payload_len, std::uint16_t ip_id, bool ipv4_checksum) {
  const OpcodeInfo& info = opcode_info(bth.opcode);
  if (!info.valid()) return 0;
  const std::size_t frame_len = roce_frame_length(route, info, payload_len);
  const std::size_t hdr_len = route.bth_offset() + info.length;
  if (out.size() < hdr_len || frame_len > 0xFFFF) return 0;
  std::uint8_t* p = out.data();
  const bool ipv6 = route.ipv6();

  EthHdr eth{route.dst_mac, route.src_mac, ipv6 ? ether_type::kIpv6 : ether_type::kIpv4};
  if (route.vlan) {
    VlanTag tag{route.pcp, false, route.vid, eth.ether_type};
    eth.ether_type = ether_type::kVlan;
    tag.write(p + EthHdr::kSize);
  }
  eth.write(p);

  const std::size_t l3 = route.l3_offset();
  const std::size_t l3_len = frame_len - l3;
  std::size_t udp_off;
  if (ipv6) {
    Ipv6Hdr ip;
    ip.traffic_class =
        static_cast<std::uint8_t>(route.dscp << 2 | static_cast<unsigned>(route.ecn));
    ip.flow_label = route.flow_label;
    ip.payload_length = static_cast<std::uint16_t>(l3_len - Ipv6Hdr::kSize);
    ip.hop_limit = route.hop_limit;
    ip.src = route.src_ip;
    ip.dst = route.dst_ip;
    ip.write(p + l3);
    udp_off = l3 + Ipv6Hdr::kSize;
  } else {
    Ipv4Hdr ip;
    ip.dscp = route.dscp;
    ip.ecn = route.ecn;
    ip.total_length = static_cast<std::uint16_t>(l3_len);
    ip.id = ip_id;
    ip.ttl = route.hop_limit;
    ip.src = route.src_ip.v4();
    ip.dst = route.dst_ip.v4();
    ip.write(p + l3, ipv4_checksum);
    udp_off = l3 + Ipv4Hdr::kMinSize;
  }
  UdpHdr udp{route.udp_sport, kRoceV2Port, static_cast<std::uint16_t>(frame_len - udp_off), 0};
  udp.write(p + udp_off);

  bth.pad_count = pad_count(payload_len);
  std::uint8_t* bth_p = p + route.bth_offset();
  bth.write(bth_p);
  ext.write(info, bth_p);
  return hdr_len;
}

std::size_t build_roce_frame(Bytes out, const RoceRoute& route, const Bth& bth,
                             const ExtHeaders& ext, std::span<const ConstBytes> payload,
                             std::uint16_t ip_id, bool offload_ipv4_checksum) {
  const OpcodeInfo& info = opcode_info(bth.opcode);
  if (!info.valid()) return 0;
  std::size_t payload_len = 0;
  for (const ConstBytes& seg : payload) payload_len += seg.size();
  const std::size_t frame_len = roce_frame_length(route, info, payload_len);
  if (out.size() < frame_len) return 0;
  const std::size_t hdr_len = write_roce_headers(out, route, bth, ext, payload_len, ip_id,
                                                 !offload_ipv4_checksum || route.ipv6());
  if (hdr_len == 0) return 0;

  std::uint8_t* p = out.data() + hdr_len;
  for (const ConstBytes& seg : payload) {
    if (seg.empty()) continue;
    std::memcpy(p, seg.data(), seg.size());
    p += seg.size();
  }
  std::memset(p, 0, pad_count(payload_len));

  const std::size_t l3 = route.l3_offset();
  const std::size_t icrc_at = frame_len - kIcrcSize;
  icrc_store(out.data() + icrc_at, icrc_compute(ConstBytes(out.data() + l3, icrc_at - l3)));
  if (route.ipv6()) {
    const std::size_t udp = l3 + Ipv6Hdr::kSize;
    const ConstBytes datagram(out.data() + udp, frame_len - udp);
    store_be16(out.data() + udp + 6, udp6_checksum(route.src_ip, route.dst_ip,
                                                   std::span<const ConstBytes>(&datagram, 1)));
  }
  return frame_len;
}

}  // namespace uroce::wire
