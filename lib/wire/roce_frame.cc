/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/roce_frame.h"

#include <cstring>

#include "wire/icrc.h"

namespace uroce::wire {

std::size_t roce_frame_length(const RoceRoute& route, const OpcodeInfo& info,
                              std::size_t payload_len) {
  return route.bth_offset() + info.length + payload_len + pad_count(payload_len) + kIcrcSize;
}

RouteTemplate::RouteTemplate(const RoceRoute& route)
    : len_(static_cast<std::uint8_t>(route.bth_offset())),
      l3_(static_cast<std::uint8_t>(route.l3_offset())),
      ipv6_(route.ipv6()) {
  std::uint8_t* p = bytes_.data();
  EthHdr eth{route.dst_mac, route.src_mac, ipv6_ ? ether_type::kIpv6 : ether_type::kIpv4};
  if (route.vlan) {
    VlanTag tag{route.pcp, false, route.vid, eth.ether_type};
    eth.ether_type = ether_type::kVlan;
    tag.write(p + EthHdr::kSize);
  }
  eth.write(p);

  // The lengths and the IPv4 identification are written per frame.
  std::size_t udp_off;
  if (ipv6_) {
    Ipv6Hdr ip;
    ip.traffic_class =
        static_cast<std::uint8_t>(route.dscp << 2 | static_cast<unsigned>(route.ecn));
    ip.flow_label = route.flow_label;
    ip.hop_limit = route.hop_limit;
    ip.src = route.src_ip;
    ip.dst = route.dst_ip;
    ip.write(p + l3_);
    udp_off = l3_ + Ipv6Hdr::kSize;
  } else {
    Ipv4Hdr ip;
    ip.dscp = route.dscp;
    ip.ecn = route.ecn;
    ip.ttl = route.hop_limit;
    ip.src = route.src_ip.v4();
    ip.dst = route.dst_ip.v4();
    ip.write(p + l3_, false);
    ipv4_sum_ = static_cast<std::uint16_t>(~inet_checksum(p + l3_, Ipv4Hdr::kMinSize));
    udp_off = l3_ + Ipv4Hdr::kMinSize;
  }
  UdpHdr{route.udp_sport, kRoceV2Port, 0, 0}.write(p + udp_off);
}

IpAddr RouteTemplate::src_ip() const {
  if (!ipv6_) return IpAddr::from_v4(load_be32(bytes_.data() + l3_ + 12));
  IpAddr a;
  std::memcpy(a.bytes.data(), bytes_.data() + l3_ + 8, 16);
  return a;
}

IpAddr RouteTemplate::dst_ip() const {
  if (!ipv6_) return IpAddr::from_v4(load_be32(bytes_.data() + l3_ + 16));
  IpAddr a;
  std::memcpy(a.bytes.data(), bytes_.data() + l3_ + 24, 16);
  return a;
}

void RouteTemplate::write(std::uint8_t* p, std::size_t frame_len, std::uint16_t ip_id,
                          bool ipv4_checksum) const {
  std::memcpy(p, bytes_.data(), len_);
  const std::size_t l3_len = frame_len - l3_;
  std::uint8_t* ip = p + l3_;
  if (ipv6_) {
    store_be16(ip + 4, static_cast<std::uint16_t>(l3_len - Ipv6Hdr::kSize));
    store_be16(ip + Ipv6Hdr::kSize + 4, static_cast<std::uint16_t>(l3_len - Ipv6Hdr::kSize));
    return;
  }
  store_be16(ip + 2, static_cast<std::uint16_t>(l3_len));
  store_be16(ip + 4, ip_id);
  if (ipv4_checksum) {
    store_be16(ip + 10, inet_checksum(nullptr, 0, std::uint32_t{ipv4_sum_} + l3_len + ip_id));
  }
  store_be16(ip + Ipv4Hdr::kMinSize + 4, static_cast<std::uint16_t>(l3_len - Ipv4Hdr::kMinSize));
}

std::size_t write_roce_headers(Bytes out, const RouteTemplate& route, Bth bth,
                               const ExtHeaders& ext, std::size_t payload_len, std::uint16_t ip_id,
                               bool ipv4_checksum) {
  const OpcodeInfo& info = opcode_info(bth.opcode);
  if (!info.valid()) return 0;
  const std::size_t frame_len = roce_frame_length(route, info, payload_len);
  const std::size_t hdr_len = route.bth_offset() + info.length;
  if (out.size() < hdr_len || frame_len > 0xFFFF) return 0;
  route.write(out.data(), frame_len, ip_id, ipv4_checksum);
  bth.pad_count = pad_count(payload_len);
  std::uint8_t* bth_p = out.data() + route.bth_offset();
  bth.write(bth_p);
  ext.write(info, bth_p);
  return hdr_len;
}

namespace {

// The frame builder over either kind of payload segment.
template <typename Seg>
std::size_t build_frame(Bytes out, const RouteTemplate& route, const Bth& bth,
                        const ExtHeaders& ext, std::span<const Seg> payload, std::uint16_t ip_id,
                        bool offload_ipv4_checksum) {
  const OpcodeInfo& info = opcode_info(bth.opcode);
  if (!info.valid()) return 0;
  std::size_t payload_len = 0;
  for (const Seg& seg : payload) payload_len += seg.size();
  const std::size_t frame_len = roce_frame_length(route, info, payload_len);
  if (out.size() < frame_len) return 0;
  const std::size_t hdr_len = write_roce_headers(out, route, bth, ext, payload_len, ip_id,
                                                 !offload_ipv4_checksum || route.ipv6());
  if (hdr_len == 0) return 0;

  std::uint8_t* p = out.data() + hdr_len;
  for (const Seg& seg : payload) {
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
    store_be16(out.data() + udp + 6, udp6_checksum(route.src_ip(), route.dst_ip(),
                                                   std::span<const ConstBytes>(&datagram, 1)));
  }
  return frame_len;
}

}  // namespace

std::size_t build_roce_frame(Bytes out, const RouteTemplate& route, const Bth& bth,
                             const ExtHeaders& ext, std::span<const ConstBytes> payload,
                             std::uint16_t ip_id, bool offload_ipv4_checksum) {
  return build_frame(out, route, bth, ext, payload, ip_id, offload_ipv4_checksum);
}

std::size_t build_roce_frame(Bytes out, const RouteTemplate& route, const Bth& bth,
                             const ExtHeaders& ext, std::span<const GatherSeg> payload,
                             std::uint16_t ip_id, bool offload_ipv4_checksum) {
  return build_frame(out, route, bth, ext, payload, ip_id, offload_ipv4_checksum);
}

}  // namespace uroce::wire
