/* SPDX-License-Identifier: BSD-3-Clause */
#include "rdmacm/abi.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace uroce::rdmacm {

static_assert(kAfIb == AF_IB);

namespace {

// IB_SA_EQ: the path's values exactly (cma_resolve_iboe_route sets it).
constexpr std::uint8_t kSaEq = 2;

}  // namespace

std::optional<SockAddr> from_sockaddr(const void* sa, std::size_t size) {
  if (size < sizeof(sa_family_t)) return std::nullopt;
  sa_family_t family;
  std::memcpy(&family, sa, sizeof(family));
  SockAddr out;
  if (family == AF_INET && size >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof(in));
    out.ip = wire::IpAddr::from_v4(ntohl(in.sin_addr.s_addr));
    out.port = ntohs(in.sin_port);
    return out;
  }
  if (family == AF_INET6 && size >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof(in6));
    out.ip = wire::IpAddr::from_v6_bytes(in6.sin6_addr.s6_addr);
    out.port = ntohs(in6.sin6_port);
    return out;
  }
  return std::nullopt;
}

std::size_t to_sockaddr(const wire::IpAddr& ip, std::uint16_t port, void* out) {
  if (ip.is_v4()) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(ip.v4());
    std::memcpy(out, &in, sizeof(in));
    return sizeof(in);
  }
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  std::memcpy(in6.sin6_addr.s6_addr, ip.bytes.data(), 16);
  std::memcpy(out, &in6, sizeof(in6));
  return sizeof(in6);
}

void to_user_path(const cm::PathRecord& p, ib_user_path_rec* out) {
  *out = {};
  std::memcpy(out->dgid, p.dgid.bytes.data(), 16);
  std::memcpy(out->sgid, p.sgid.bytes.data(), 16);
  // RoCE paths have no LIDs (sa_path_get_dlid of a RoCE record is 0).
  out->flow_label = htobe32(p.flow_label);
  out->reversible = 1;
  out->mtu = static_cast<std::uint32_t>(p.mtu);
  out->pkey = htobe16(p.pkey);
  out->hop_limit = p.hop_limit;
  out->traffic_class = p.traffic_class;
  out->numb_path = 1;
  out->sl = p.sl;
  out->mtu_selector = kSaEq;
  out->rate_selector = kSaEq;
  out->rate = p.rate;
  out->packet_life_time_selector = kSaEq;
  out->packet_life_time = p.packet_life_time;
}

void to_path_data(const cm::PathRecord& p, std::uint64_t service_id, ib_path_rec_data* out) {
  *out = {};
  out->flags = IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL;
  // The SA PathRecord on the wire (IBA 15.2.5.16), as ib_sa_pack_path
  // packs it: big-endian fields at fixed offsets.
  std::uint8_t r[64] = {};
  const std::uint64_t sid = htobe64(service_id);
  std::memcpy(r, &sid, 8);
  std::memcpy(r + 8, p.dgid.bytes.data(), 16);
  std::memcpy(r + 24, p.sgid.bytes.data(), 16);
  const std::uint32_t fl_hop = htobe32((p.flow_label & 0xFFFFF) << 8 | p.hop_limit);
  std::memcpy(r + 44, &fl_hop, 4);
  r[48] = p.traffic_class;
  r[49] = 0x80 | 1;  // reversible, one path
  const std::uint16_t pkey = htobe16(p.pkey);
  std::memcpy(r + 50, &pkey, 2);
  r[53] = p.sl & 0xF;
  r[54] = static_cast<std::uint8_t>(kSaEq << 6 | (static_cast<unsigned>(p.mtu) & 0x3F));
  r[55] = static_cast<std::uint8_t>(kSaEq << 6 | (p.rate & 0x3F));
  r[56] = static_cast<std::uint8_t>(kSaEq << 6 | (p.packet_life_time & 0x3F));
  std::memcpy(out->path_rec, r, sizeof(r));
}

void to_uverbs_ah(const cm::AhAttr& a, ib_uverbs_ah_attr* out) {
  *out = {};
  std::memcpy(out->grh.dgid, a.grh.dgid.bytes.data(), 16);
  out->grh.flow_label = a.grh.flow_label;
  out->grh.sgid_index = a.grh.sgid_index;
  out->grh.hop_limit = a.grh.hop_limit;
  out->grh.traffic_class = a.grh.traffic_class;
  out->dlid = a.dlid;
  out->sl = a.sl;
  out->src_path_bits = a.src_path_bits;
  out->static_rate = a.static_rate;
  out->is_global = a.is_global;
  out->port_num = a.port_num;
}

void to_uverbs_qp_attr(const cm::QpAttr& a, unsigned mask, ib_uverbs_qp_attr* out) {
  *out = {};
  out->qp_attr_mask = mask;
  out->qp_state = static_cast<std::uint32_t>(a.qp_state);
  out->path_mtu = static_cast<std::uint32_t>(a.path_mtu);
  out->qkey = a.qkey;
  out->rq_psn = a.rq_psn;
  out->sq_psn = a.sq_psn;
  out->dest_qp_num = a.dest_qp_num;
  out->qp_access_flags = a.qp_access_flags;
  to_uverbs_ah(a.ah_attr, &out->ah_attr);
  out->pkey_index = a.pkey_index;
  out->max_rd_atomic = a.max_rd_atomic;
  out->max_dest_rd_atomic = a.max_dest_rd_atomic;
  out->min_rnr_timer = a.min_rnr_timer;
  out->port_num = a.port_num;
  out->timeout = a.timeout;
  out->retry_cnt = a.retry_cnt;
  out->rnr_retry = a.rnr_retry;
}

cm::ConnParam to_conn_param(const rdma_ucm_conn_param& in) {
  cm::ConnParam p;
  p.private_data = std::span<const std::uint8_t>(
      in.private_data, std::min<std::size_t>(in.private_data_len, sizeof(in.private_data)));
  p.responder_resources = in.responder_resources;
  p.initiator_depth = in.initiator_depth;
  p.flow_control = in.flow_control;
  p.retry_count = in.retry_count;
  p.rnr_retry_count = in.rnr_retry_count;
  p.srq = in.srq;
  p.qp_num = in.qp_num;
  // ucma_copy_conn_param: the Q_Key is the program's only with AF_IB.
  p.qkey = 0;
  return p;
}

void to_event_resp(const cm::CmaEvent& e, bool ud, rdma_ucm_event_resp* out) {
  out->event = static_cast<std::uint32_t>(e.event);
  out->status = static_cast<std::uint32_t>(e.status);
  const std::size_t len = std::min<std::size_t>(e.private_data_len, e.private_data.size());
  if (ud) {
    rdma_ucm_ud_param& u = out->param.ud;
    u.qp_num = e.ud.qp_num;
    u.qkey = e.ud.qkey;
    to_uverbs_ah(e.ud.ah_attr, &u.ah_attr);
    std::memcpy(u.private_data, e.private_data.data(), len);
    u.private_data_len = static_cast<std::uint8_t>(len);
  } else {
    rdma_ucm_conn_param& c = out->param.conn;
    c.qp_num = e.conn.qp_num;
    std::memcpy(c.private_data, e.private_data.data(), len);
    c.private_data_len = static_cast<std::uint8_t>(len);
    c.srq = e.conn.srq;
    c.responder_resources = e.conn.responder_resources;
    c.initiator_depth = e.conn.initiator_depth;
    c.flow_control = e.conn.flow_control;
    c.retry_count = e.conn.retry_count;
    c.rnr_retry_count = e.conn.rnr_retry_count;
  }
}

}  // namespace uroce::rdmacm
