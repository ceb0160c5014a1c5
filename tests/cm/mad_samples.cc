/* SPDX-License-Identifier: BSD-3-Clause */
#include "cm/mad_samples.h"

namespace uroce::test {

using namespace uroce::cm;

namespace {

template <typename T>
T bits(std::mt19937_64& rng, unsigned n) {
  const std::uint64_t v = rng();
  return static_cast<T>(n >= 64 ? v : v & ((std::uint64_t{1} << n) - 1));
}

template <std::size_t N>
void fill(std::mt19937_64& rng, std::array<std::uint8_t, N>& a) {
  for (auto& b : a) b = static_cast<std::uint8_t>(rng());
}

Gid random_gid(std::mt19937_64& rng) {
  Gid g;
  fill(rng, g.bytes);
  return g;
}

ReqPath random_path(std::mt19937_64& rng) {
  ReqPath p;
  p.local_lid = bits<std::uint16_t>(rng, 16);
  p.remote_lid = bits<std::uint16_t>(rng, 16);
  p.local_gid = random_gid(rng);
  p.remote_gid = random_gid(rng);
  p.flow_label = bits<std::uint32_t>(rng, 20);
  p.packet_rate = bits<std::uint8_t>(rng, 6);
  p.traffic_class = bits<std::uint8_t>(rng, 8);
  p.hop_limit = bits<std::uint8_t>(rng, 8);
  p.sl = bits<std::uint8_t>(rng, 4);
  p.subnet_local = rng() & 1;
  p.local_ack_timeout = bits<std::uint8_t>(rng, 5);
  return p;
}

}  // namespace

ReqMsg random_req(std::mt19937_64& rng) {
  ReqMsg r;
  r.local_comm_id = bits<std::uint32_t>(rng, 32);
  r.vendor_id = bits<std::uint32_t>(rng, 24);
  r.service_id = rng();
  r.local_ca_guid = rng();
  r.local_qkey = bits<std::uint32_t>(rng, 32);
  r.local_qpn = bits<std::uint32_t>(rng, 24);
  r.responder_resources = bits<std::uint8_t>(rng, 8);
  r.local_eecn = bits<std::uint32_t>(rng, 24);
  r.initiator_depth = bits<std::uint8_t>(rng, 8);
  r.remote_eecn = bits<std::uint32_t>(rng, 24);
  r.remote_cm_response_timeout = bits<std::uint8_t>(rng, 5);
  r.transport_type = static_cast<TransportType>(bits<std::uint8_t>(rng, 2));
  r.end_to_end_flow_control = rng() & 1;
  r.starting_psn = bits<std::uint32_t>(rng, 24);
  r.local_cm_response_timeout = bits<std::uint8_t>(rng, 5);
  r.retry_count = bits<std::uint8_t>(rng, 3);
  r.pkey = bits<std::uint16_t>(rng, 16);
  r.path_mtu = bits<std::uint8_t>(rng, 4);
  r.rdc_exists = rng() & 1;
  r.rnr_retry_count = bits<std::uint8_t>(rng, 3);
  r.max_cm_retries = bits<std::uint8_t>(rng, 4);
  r.srq = rng() & 1;
  r.extended_transport_type = bits<std::uint8_t>(rng, 3);
  r.primary = random_path(rng);
  r.alternate = random_path(rng);
  r.sap_supported = rng() & 1;
  fill(rng, r.private_data);
  return r;
}

MraMsg random_mra(std::mt19937_64& rng) {
  MraMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  m.message_mraed = static_cast<MsgResponse>(rng() % 3);
  m.service_timeout = bits<std::uint8_t>(rng, 5);
  fill(rng, m.private_data);
  return m;
}

RejMsg random_rej(std::mt19937_64& rng) {
  RejMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  m.message_rejected = static_cast<MsgResponse>(rng() % 3);
  m.reject_info_length = static_cast<std::uint8_t>(rng() % 73);
  m.reason = bits<std::uint16_t>(rng, 16);
  fill(rng, m.ari);
  fill(rng, m.private_data);
  return m;
}

RepMsg random_rep(std::mt19937_64& rng) {
  RepMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  m.local_qkey = bits<std::uint32_t>(rng, 32);
  m.local_qpn = bits<std::uint32_t>(rng, 24);
  m.vendor_id = bits<std::uint32_t>(rng, 24);
  m.local_eecn = bits<std::uint32_t>(rng, 24);
  m.starting_psn = bits<std::uint32_t>(rng, 24);
  m.responder_resources = bits<std::uint8_t>(rng, 8);
  m.initiator_depth = bits<std::uint8_t>(rng, 8);
  m.target_ack_delay = bits<std::uint8_t>(rng, 5);
  m.failover_accepted = bits<std::uint8_t>(rng, 2);
  m.end_to_end_flow_control = rng() & 1;
  m.rnr_retry_count = bits<std::uint8_t>(rng, 3);
  m.srq = rng() & 1;
  m.local_ca_guid = rng();
  fill(rng, m.private_data);
  return m;
}

RtuMsg random_rtu(std::mt19937_64& rng) {
  RtuMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  fill(rng, m.private_data);
  return m;
}

DreqMsg random_dreq(std::mt19937_64& rng) {
  DreqMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_qpn = bits<std::uint32_t>(rng, 24);
  fill(rng, m.private_data);
  return m;
}

DrepMsg random_drep(std::mt19937_64& rng) {
  DrepMsg m;
  m.local_comm_id = bits<std::uint32_t>(rng, 32);
  m.remote_comm_id = bits<std::uint32_t>(rng, 32);
  fill(rng, m.private_data);
  return m;
}

SidrReqMsg random_sidr_req(std::mt19937_64& rng) {
  SidrReqMsg m;
  m.request_id = bits<std::uint32_t>(rng, 32);
  m.pkey = bits<std::uint16_t>(rng, 16);
  m.service_id = rng();
  fill(rng, m.private_data);
  return m;
}

SidrRepMsg random_sidr_rep(std::mt19937_64& rng) {
  SidrRepMsg m;
  m.request_id = bits<std::uint32_t>(rng, 32);
  m.status = bits<std::uint8_t>(rng, 8);
  m.add_info_length = static_cast<std::uint8_t>(rng() % 73);
  m.vendor_id = bits<std::uint32_t>(rng, 24);
  m.qpn = bits<std::uint32_t>(rng, 24);
  m.service_id = rng();
  m.qkey = bits<std::uint32_t>(rng, 32);
  fill(rng, m.add_info);
  fill(rng, m.private_data);
  return m;
}

std::vector<CmMessage> random_messages(std::mt19937_64& rng) {
  return {random_req(rng),  random_mra(rng),      random_rej(rng),
          random_rep(rng),  random_rtu(rng),      random_dreq(rng),
          random_drep(rng), random_sidr_req(rng), random_sidr_rep(rng)};
}

MadHdr random_hdr(std::mt19937_64& rng) {
  MadHdr h;
  h.tid = rng();
  return h;
}

std::vector<std::uint8_t> encode_mad(const MadHdr& hdr, const CmMessage& msg) {
  std::vector<std::uint8_t> m(kMadSize);
  encode(hdr, msg, std::span<std::uint8_t, kMadSize>(m.data(), kMadSize));
  return m;
}

std::vector<std::uint8_t> gsi_frame(const wire::RoceRoute& route, wire::ConstBytes mad,
                                    std::uint32_t psn) {
  const wire::OpcodeInfo& info = wire::opcode_info(0x64);
  wire::Bth bth;
  bth.opcode = 0x64;
  bth.pkey = wire::kDefaultPkey;
  bth.dest_qp = 1;
  bth.psn = wire::Psn(psn);
  wire::ExtHeaders ext;
  ext.deth = {wire::kGsiQkey, 1};
  std::vector<std::uint8_t> frame(wire::roce_frame_length(route, info, mad.size()));
  const std::size_t n = wire::build_roce_frame(frame, route, bth, ext, mad, 0x4D41);
  frame.resize(n);
  return frame;
}

}  // namespace uroce::test
