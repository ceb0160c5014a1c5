/* SPDX-License-Identifier: BSD-3-Clause */
#include "cm/mad.h"

#include <algorithm>
#include <cstring>

namespace uroce::cm {

namespace {

using wire::IpAddr;

template <std::size_t N>
void put_bytes(std::uint8_t* mad, const Field& f, const std::array<std::uint8_t, N>& v) {
  static_assert(N > 0);
  std::memcpy(mad + f.offset, v.data(), std::min<std::size_t>(N, f.size()));
}
template <std::size_t N>
void get_bytes(const std::uint8_t* mad, const Field& f, std::array<std::uint8_t, N>& v) {
  std::memcpy(v.data(), mad + f.offset, std::min<std::size_t>(N, f.size()));
}
void put_gid(std::uint8_t* mad, const Field& f, const Gid& g) { put_bytes(mad, f, g.bytes); }
Gid get_gid(const std::uint8_t* mad, const Field& f) {
  Gid g;
  get_bytes(mad, f, g.bytes);
  return g;
}

template <typename T>
T get(const std::uint8_t* mad, const Field& f) {
  return static_cast<T>(get_field(mad, f));
}

// --- REQ ---------------------------------------------------------------------

struct PathFields {
  Field local_lid, remote_lid, local_gid, remote_gid, flow_label, packet_rate, traffic_class,
      hop_limit, sl, subnet_local, local_ack_timeout;
};
constexpr PathFields kPrimary = {
    req::kPrimaryLocalLid,     req::kPrimaryRemoteLid,      req::kPrimaryLocalGid,
    req::kPrimaryRemoteGid,    req::kPrimaryFlowLabel,      req::kPrimaryPacketRate,
    req::kPrimaryTrafficClass, req::kPrimaryHopLimit,       req::kPrimarySl,
    req::kPrimarySubnetLocal,  req::kPrimaryLocalAckTimeout};
constexpr PathFields kAlternate = {
    req::kAlternateLocalLid,     req::kAlternateRemoteLid,      req::kAlternateLocalGid,
    req::kAlternateRemoteGid,    req::kAlternateFlowLabel,      req::kAlternatePacketRate,
    req::kAlternateTrafficClass, req::kAlternateHopLimit,       req::kAlternateSl,
    req::kAlternateSubnetLocal,  req::kAlternateLocalAckTimeout};

void put_path(std::uint8_t* m, const PathFields& f, const ReqPath& p) {
  set_field(m, f.local_lid, p.local_lid);
  set_field(m, f.remote_lid, p.remote_lid);
  put_gid(m, f.local_gid, p.local_gid);
  put_gid(m, f.remote_gid, p.remote_gid);
  set_field(m, f.flow_label, p.flow_label);
  set_field(m, f.packet_rate, p.packet_rate);
  set_field(m, f.traffic_class, p.traffic_class);
  set_field(m, f.hop_limit, p.hop_limit);
  set_field(m, f.sl, p.sl);
  set_field(m, f.subnet_local, p.subnet_local);
  set_field(m, f.local_ack_timeout, p.local_ack_timeout);
}

ReqPath get_path(const std::uint8_t* m, const PathFields& f) {
  ReqPath p;
  p.local_lid = get<std::uint16_t>(m, f.local_lid);
  p.remote_lid = get<std::uint16_t>(m, f.remote_lid);
  p.local_gid = get_gid(m, f.local_gid);
  p.remote_gid = get_gid(m, f.remote_gid);
  p.flow_label = get<std::uint32_t>(m, f.flow_label);
  p.packet_rate = get<std::uint8_t>(m, f.packet_rate);
  p.traffic_class = get<std::uint8_t>(m, f.traffic_class);
  p.hop_limit = get<std::uint8_t>(m, f.hop_limit);
  p.sl = get<std::uint8_t>(m, f.sl);
  p.subnet_local = get_field(m, f.subnet_local) != 0;
  p.local_ack_timeout = get<std::uint8_t>(m, f.local_ack_timeout);
  return p;
}

void put(std::uint8_t* m, const ReqMsg& r) {
  using namespace req;
  set_field(m, kLocalCommId, r.local_comm_id);
  set_field(m, kVendorId, r.vendor_id);
  set_field(m, kServiceId, r.service_id);
  set_field(m, kLocalCaGuid, r.local_ca_guid);
  set_field(m, kLocalQkey, r.local_qkey);
  set_field(m, kLocalQpn, r.local_qpn);
  set_field(m, kResponderResources, r.responder_resources);
  set_field(m, kLocalEecn, r.local_eecn);
  set_field(m, kInitiatorDepth, r.initiator_depth);
  set_field(m, kRemoteEecn, r.remote_eecn);
  set_field(m, kRemoteCmResponseTimeout, r.remote_cm_response_timeout);
  set_field(m, kTransportServiceType, static_cast<std::uint8_t>(r.transport_type));
  set_field(m, kEndToEndFlowControl, r.end_to_end_flow_control);
  set_field(m, kStartingPsn, r.starting_psn);
  set_field(m, kLocalCmResponseTimeout, r.local_cm_response_timeout);
  set_field(m, kRetryCount, r.retry_count);
  set_field(m, kPartitionKey, r.pkey);
  set_field(m, kPathMtu, r.path_mtu);
  set_field(m, kRdcExists, r.rdc_exists);
  set_field(m, kRnrRetryCount, r.rnr_retry_count);
  set_field(m, kMaxCmRetries, r.max_cm_retries);
  set_field(m, kSrq, r.srq);
  set_field(m, kExtendedTransportType, r.extended_transport_type);
  put_path(m, kPrimary, r.primary);
  put_path(m, kAlternate, r.alternate);
  set_field(m, kSapSupported, r.sap_supported);
  put_bytes(m, kPrivateData, r.private_data);
}

void get(const std::uint8_t* m, ReqMsg& r) {
  using namespace req;
  r.local_comm_id = get<std::uint32_t>(m, kLocalCommId);
  r.vendor_id = get<std::uint32_t>(m, kVendorId);
  r.service_id = get_field(m, kServiceId);
  r.local_ca_guid = get_field(m, kLocalCaGuid);
  r.local_qkey = get<std::uint32_t>(m, kLocalQkey);
  r.local_qpn = get<std::uint32_t>(m, kLocalQpn);
  r.responder_resources = get<std::uint8_t>(m, kResponderResources);
  r.local_eecn = get<std::uint32_t>(m, kLocalEecn);
  r.initiator_depth = get<std::uint8_t>(m, kInitiatorDepth);
  r.remote_eecn = get<std::uint32_t>(m, kRemoteEecn);
  r.remote_cm_response_timeout = get<std::uint8_t>(m, kRemoteCmResponseTimeout);
  r.transport_type = get<TransportType>(m, kTransportServiceType);
  r.end_to_end_flow_control = get_field(m, kEndToEndFlowControl) != 0;
  r.starting_psn = get<std::uint32_t>(m, kStartingPsn);
  r.local_cm_response_timeout = get<std::uint8_t>(m, kLocalCmResponseTimeout);
  r.retry_count = get<std::uint8_t>(m, kRetryCount);
  r.pkey = get<std::uint16_t>(m, kPartitionKey);
  r.path_mtu = get<std::uint8_t>(m, kPathMtu);
  r.rdc_exists = get_field(m, kRdcExists) != 0;
  r.rnr_retry_count = get<std::uint8_t>(m, kRnrRetryCount);
  r.max_cm_retries = get<std::uint8_t>(m, kMaxCmRetries);
  r.srq = get_field(m, kSrq) != 0;
  r.extended_transport_type = get<std::uint8_t>(m, kExtendedTransportType);
  r.primary = get_path(m, kPrimary);
  r.alternate = get_path(m, kAlternate);
  r.sap_supported = get_field(m, kSapSupported) != 0;
  get_bytes(m, kPrivateData, r.private_data);
}

// --- MRA, REJ ----------------------------------------------------------------

void put(std::uint8_t* m, const MraMsg& r) {
  set_field(m, mra::kLocalCommId, r.local_comm_id);
  set_field(m, mra::kRemoteCommId, r.remote_comm_id);
  set_field(m, mra::kMessageMraed, static_cast<std::uint8_t>(r.message_mraed));
  set_field(m, mra::kServiceTimeout, r.service_timeout);
  put_bytes(m, mra::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, MraMsg& r) {
  r.local_comm_id = get<std::uint32_t>(m, mra::kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, mra::kRemoteCommId);
  r.message_mraed = get<MsgResponse>(m, mra::kMessageMraed);
  r.service_timeout = get<std::uint8_t>(m, mra::kServiceTimeout);
  get_bytes(m, mra::kPrivateData, r.private_data);
}

void put(std::uint8_t* m, const RejMsg& r) {
  set_field(m, rej::kLocalCommId, r.local_comm_id);
  set_field(m, rej::kRemoteCommId, r.remote_comm_id);
  set_field(m, rej::kMessageRejected, static_cast<std::uint8_t>(r.message_rejected));
  set_field(m, rej::kRejectedInfoLength, r.reject_info_length);
  set_field(m, rej::kReason, r.reason);
  put_bytes(m, rej::kAri, r.ari);
  put_bytes(m, rej::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, RejMsg& r) {
  r.local_comm_id = get<std::uint32_t>(m, rej::kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, rej::kRemoteCommId);
  r.message_rejected = get<MsgResponse>(m, rej::kMessageRejected);
  r.reject_info_length = get<std::uint8_t>(m, rej::kRejectedInfoLength);
  r.reason = get<std::uint16_t>(m, rej::kReason);
  get_bytes(m, rej::kAri, r.ari);
  get_bytes(m, rej::kPrivateData, r.private_data);
}

// --- REP, RTU, DREQ, DREP ------------------------------------------------------

void put(std::uint8_t* m, const RepMsg& r) {
  using namespace rep;
  set_field(m, kLocalCommId, r.local_comm_id);
  set_field(m, kRemoteCommId, r.remote_comm_id);
  set_field(m, kLocalQkey, r.local_qkey);
  set_field(m, kLocalQpn, r.local_qpn);
  set_field(m, kVendorIdH, r.vendor_id >> 16);
  set_field(m, kLocalEecn, r.local_eecn);
  set_field(m, kVendorIdM, r.vendor_id >> 8);
  set_field(m, kStartingPsn, r.starting_psn);
  set_field(m, kVendorIdL, r.vendor_id);
  set_field(m, kResponderResources, r.responder_resources);
  set_field(m, kInitiatorDepth, r.initiator_depth);
  set_field(m, kTargetAckDelay, r.target_ack_delay);
  set_field(m, kFailoverAccepted, r.failover_accepted);
  set_field(m, kEndToEndFlowControl, r.end_to_end_flow_control);
  set_field(m, kRnrRetryCount, r.rnr_retry_count);
  set_field(m, kSrq, r.srq);
  set_field(m, kLocalCaGuid, r.local_ca_guid);
  put_bytes(m, kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, RepMsg& r) {
  using namespace rep;
  r.local_comm_id = get<std::uint32_t>(m, kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, kRemoteCommId);
  r.local_qkey = get<std::uint32_t>(m, kLocalQkey);
  r.local_qpn = get<std::uint32_t>(m, kLocalQpn);
  r.vendor_id = get<std::uint32_t>(m, kVendorIdH) << 16 | get<std::uint32_t>(m, kVendorIdM) << 8 |
                get<std::uint32_t>(m, kVendorIdL);
  r.local_eecn = get<std::uint32_t>(m, kLocalEecn);
  r.starting_psn = get<std::uint32_t>(m, kStartingPsn);
  r.responder_resources = get<std::uint8_t>(m, kResponderResources);
  r.initiator_depth = get<std::uint8_t>(m, kInitiatorDepth);
  r.target_ack_delay = get<std::uint8_t>(m, kTargetAckDelay);
  r.failover_accepted = get<std::uint8_t>(m, kFailoverAccepted);
  r.end_to_end_flow_control = get_field(m, kEndToEndFlowControl) != 0;
  r.rnr_retry_count = get<std::uint8_t>(m, kRnrRetryCount);
  r.srq = get_field(m, kSrq) != 0;
  r.local_ca_guid = get_field(m, kLocalCaGuid);
  get_bytes(m, kPrivateData, r.private_data);
}

void put(std::uint8_t* m, const RtuMsg& r) {
  set_field(m, rtu::kLocalCommId, r.local_comm_id);
  set_field(m, rtu::kRemoteCommId, r.remote_comm_id);
  put_bytes(m, rtu::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, RtuMsg& r) {
  r.local_comm_id = get<std::uint32_t>(m, rtu::kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, rtu::kRemoteCommId);
  get_bytes(m, rtu::kPrivateData, r.private_data);
}

void put(std::uint8_t* m, const DreqMsg& r) {
  set_field(m, dreq::kLocalCommId, r.local_comm_id);
  set_field(m, dreq::kRemoteCommId, r.remote_comm_id);
  set_field(m, dreq::kRemoteQpn, r.remote_qpn);
  put_bytes(m, dreq::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, DreqMsg& r) {
  r.local_comm_id = get<std::uint32_t>(m, dreq::kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, dreq::kRemoteCommId);
  r.remote_qpn = get<std::uint32_t>(m, dreq::kRemoteQpn);
  get_bytes(m, dreq::kPrivateData, r.private_data);
}

void put(std::uint8_t* m, const DrepMsg& r) {
  set_field(m, drep::kLocalCommId, r.local_comm_id);
  set_field(m, drep::kRemoteCommId, r.remote_comm_id);
  put_bytes(m, drep::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, DrepMsg& r) {
  r.local_comm_id = get<std::uint32_t>(m, drep::kLocalCommId);
  r.remote_comm_id = get<std::uint32_t>(m, drep::kRemoteCommId);
  get_bytes(m, drep::kPrivateData, r.private_data);
}

// --- SIDR ----------------------------------------------------------------------

void put(std::uint8_t* m, const SidrReqMsg& r) {
  set_field(m, sidr_req::kRequestId, r.request_id);
  set_field(m, sidr_req::kPartitionKey, r.pkey);
  set_field(m, sidr_req::kServiceId, r.service_id);
  put_bytes(m, sidr_req::kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, SidrReqMsg& r) {
  r.request_id = get<std::uint32_t>(m, sidr_req::kRequestId);
  r.pkey = get<std::uint16_t>(m, sidr_req::kPartitionKey);
  r.service_id = get_field(m, sidr_req::kServiceId);
  get_bytes(m, sidr_req::kPrivateData, r.private_data);
}

void put(std::uint8_t* m, const SidrRepMsg& r) {
  using namespace sidr_rep;
  set_field(m, kRequestId, r.request_id);
  set_field(m, kStatus, r.status);
  set_field(m, kAddInfoLength, r.add_info_length);
  set_field(m, kVendorIdH, r.vendor_id >> 8);
  set_field(m, kQpn, r.qpn);
  set_field(m, kVendorIdL, r.vendor_id);
  set_field(m, kServiceId, r.service_id);
  set_field(m, kQkey, r.qkey);
  put_bytes(m, kAddInfo, r.add_info);
  put_bytes(m, kPrivateData, r.private_data);
}
void get(const std::uint8_t* m, SidrRepMsg& r) {
  using namespace sidr_rep;
  r.request_id = get<std::uint32_t>(m, kRequestId);
  r.status = get<std::uint8_t>(m, kStatus);
  r.add_info_length = get<std::uint8_t>(m, kAddInfoLength);
  r.vendor_id = get<std::uint32_t>(m, kVendorIdH) << 8 | get<std::uint32_t>(m, kVendorIdL);
  r.qpn = get<std::uint32_t>(m, kQpn);
  r.service_id = get_field(m, kServiceId);
  r.qkey = get<std::uint32_t>(m, kQkey);
  get_bytes(m, kAddInfo, r.add_info);
  get_bytes(m, kPrivateData, r.private_data);
}

template <typename T>
bool decode_as(const std::uint8_t* m, CmMessage& out) {
  T msg;
  get(m, msg);
  out = msg;
  return true;
}

}  // namespace

AttrId attr_id_of(const CmMessage& msg) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kAttrId; }, msg);
}

void encode(const MadHdr& hdr, const CmMessage& msg, std::span<std::uint8_t, kMadSize> out) {
  std::uint8_t* m = out.data();
  std::memset(m, 0, kMadSize);
  set_field(m, hdr::kBaseVersion, hdr.base_version);
  set_field(m, hdr::kMgmtClass, hdr.mgmt_class);
  set_field(m, hdr::kClassVersion, hdr.class_version);
  set_field(m, hdr::kMethod, hdr.method);
  set_field(m, hdr::kStatus, hdr.status);
  set_field(m, hdr::kClassSpecific, hdr.class_specific);
  set_field(m, hdr::kTransactionId, hdr.tid);
  set_field(m, hdr::kAttributeId, static_cast<std::uint16_t>(attr_id_of(msg)));
  set_field(m, hdr::kReserved, hdr.reserved);
  set_field(m, hdr::kAttributeModifier, hdr.attr_mod);
  std::visit([m](const auto& v) { put(m, v); }, msg);
}

MadHdr decode_hdr(const std::uint8_t* m) {
  MadHdr h;
  h.base_version = get<std::uint8_t>(m, hdr::kBaseVersion);
  h.mgmt_class = get<std::uint8_t>(m, hdr::kMgmtClass);
  h.class_version = get<std::uint8_t>(m, hdr::kClassVersion);
  h.method = get<std::uint8_t>(m, hdr::kMethod);
  h.status = get<std::uint16_t>(m, hdr::kStatus);
  h.class_specific = get<std::uint16_t>(m, hdr::kClassSpecific);
  h.tid = get_field(m, hdr::kTransactionId);
  h.attr_id = get<std::uint16_t>(m, hdr::kAttributeId);
  h.reserved = get<std::uint16_t>(m, hdr::kReserved);
  h.attr_mod = get<std::uint32_t>(m, hdr::kAttributeModifier);
  return h;
}

bool decode(wire::ConstBytes bytes, Mad& out, MadError& error) {
  // A GSI QP's receive buffer holds the GRH and one 256-byte MAD: a
  // shorter payload is not a MAD, a longer one would not fit (rxe
  // completes it with a local length error).
  if (bytes.size() < kMadSize) {
    error = MadError::kTruncated;
    return false;
  }
  if (bytes.size() > kMadSize) {
    error = MadError::kOversized;
    return false;
  }
  const std::uint8_t* m = bytes.data();
  out.hdr = decode_hdr(m);
  const MadHdr& h = out.hdr;
  // ib_mad.c validate_mad and find_mad_agent: the base version, then an
  // agent registered for class 0x07 version 2, method SEND (validate_mad:
  // every CM attribute but ClassPortInfo uses Send).
  if (h.base_version != kMgmtBaseVersion) {
    error = MadError::kBaseVersion;
    return false;
  }
  if (h.mgmt_class != kMgmtClassCm) {
    error = MadError::kMgmtClass;
    return false;
  }
  if (h.class_version != kCmClassVersion) {
    error = MadError::kClassVersion;
    return false;
  }
  if (h.attr_id == static_cast<std::uint16_t>(AttrId::kClassPortInfo)) {
    error = MadError::kClassPortInfo;
    return false;
  }
  if (h.method != kMethodSend) {
    error = MadError::kMethod;
    return false;
  }
  switch (static_cast<AttrId>(h.attr_id)) {
    case AttrId::kReq:
      return decode_as<ReqMsg>(m, out.msg);
    case AttrId::kMra:
      // cm_acquire_mraed_id: a MessageMRAed of 3 names no message.
      if (get_field(m, mra::kMessageMraed) > static_cast<unsigned>(MsgResponse::kOther)) {
        error = MadError::kMessageMraed;
        return false;
      }
      return decode_as<MraMsg>(m, out.msg);
    case AttrId::kRej:
      if (get_field(m, rej::kRejectedInfoLength) > rej::kAri.size()) {
        error = MadError::kRejectInfoLength;
        return false;
      }
      return decode_as<RejMsg>(m, out.msg);
    case AttrId::kRep:
      return decode_as<RepMsg>(m, out.msg);
    case AttrId::kRtu:
      return decode_as<RtuMsg>(m, out.msg);
    case AttrId::kDreq:
      return decode_as<DreqMsg>(m, out.msg);
    case AttrId::kDrep:
      return decode_as<DrepMsg>(m, out.msg);
    case AttrId::kSidrReq:
      return decode_as<SidrReqMsg>(m, out.msg);
    case AttrId::kSidrRep:
      if (get_field(m, sidr_rep::kAddInfoLength) > sidr_rep::kAddInfo.size()) {
        error = MadError::kSidrAddInfoLength;
        return false;
      }
      return decode_as<SidrRepMsg>(m, out.msg);
    case AttrId::kLap:
    case AttrId::kApr:
      // Alternate paths are not supported on RoCE (cm_lap_handler and
      // cm_apr_handler return -EINVAL for a RoCE port).
      error = MadError::kAlternatePath;
      return false;
    case AttrId::kClassPortInfo:
      break;
  }
  error = MadError::kUnknownAttribute;
  return false;
}

// --- IP CM header (Annex A11) --------------------------------------------------

namespace {

void put_ip(std::uint8_t* p, const IpAddr& a) {
  if (a.is_v4()) {
    std::memset(p, 0, 12);
    wire::store_be32(p + 12, a.v4());
  } else {
    std::memcpy(p, a.bytes.data(), 16);
  }
}

}  // namespace

void encode(const IpCmHdr& h, std::uint8_t* out) {
  out[0] = IpCmHdr::kVersion;
  out[1] = static_cast<std::uint8_t>(h.ip_version << 4);
  wire::store_be16(out + 2, h.src_port);
  put_ip(out + 4, h.src);
  put_ip(out + 20, h.dst);
}

bool decode(const std::uint8_t* in, IpCmHdr& out) {
  if (in[0] != IpCmHdr::kVersion) return false;
  out.ip_version = in[1] >> 4;
  out.src_port = wire::load_be16(in + 2);
  switch (out.ip_version) {
    case 4:
      out.src = IpAddr::from_v4(wire::load_be32(in + 16));
      out.dst = IpAddr::from_v4(wire::load_be32(in + 32));
      return true;
    case 6:
      std::memcpy(out.src.bytes.data(), in + 4, 16);
      std::memcpy(out.dst.bytes.data(), in + 20, 16);
      return true;
    default:
      return false;
  }
}

}  // namespace uroce::cm
