/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The connection manager's MADs (IBA chapter 12, 16.7): the common MAD
// header, the REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP
// messages, the IP CM private-data header of IBA Annex A11 and the
// ServiceIDs of the rdma_cm port spaces. Each message is a plain struct;
// encode() writes one into the 256 bytes of a MAD through the field table
// of mad_fields.h and decode() reads one back after checking the header.
// decode() never reads outside the bytes it is given and never fails
// silently: a MAD it refuses gets a MadError, for a counter.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "cm/mad_fields.h"
#include "wire/bytes.h"
#include "wire/ip.h"

namespace uroce::cm {

inline constexpr std::uint8_t kMgmtBaseVersion = 1;  ///< IB_MGMT_BASE_VERSION
inline constexpr std::uint8_t kMgmtClassCm = 0x07;   ///< IB_MGMT_CLASS_CM
inline constexpr std::uint8_t kCmClassVersion = 2;   ///< IB_CM_CLASS_VERSION
inline constexpr std::uint8_t kMethodSend = 0x03;    ///< IB_MGMT_METHOD_SEND, every CM message

/// CM attribute IDs (ib_cm.h CM_*_ATTR_ID).
enum class AttrId : std::uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};

constexpr std::string_view name(AttrId a) {
  switch (a) {
    case AttrId::kClassPortInfo:
      return "ClassPortInfo";
    case AttrId::kReq:
      return "REQ";
    case AttrId::kMra:
      return "MRA";
    case AttrId::kRej:
      return "REJ";
    case AttrId::kRep:
      return "REP";
    case AttrId::kRtu:
      return "RTU";
    case AttrId::kDreq:
      return "DREQ";
    case AttrId::kDrep:
      return "DREP";
    case AttrId::kSidrReq:
      return "SIDR_REQ";
    case AttrId::kSidrRep:
      return "SIDR_REP";
    case AttrId::kLap:
      return "LAP";
    case AttrId::kApr:
      return "APR";
  }
  return {};
}

/// Why decode() refused a MAD. Each is counted (cm/counters.h).
enum class MadError : std::uint8_t {
  kTruncated,          ///< shorter than 256 bytes
  kOversized,          ///< longer than 256 bytes: a GSI receive buffer holds one MAD
  kBaseVersion,        ///< BaseVersion is not 1 (ib_mad.c validate_mad)
  kMgmtClass,          ///< not the CM class 0x07
  kClassVersion,       ///< not CM class version 2: no agent registered for it
  kMethod,             ///< not SEND, which every CM attribute but ClassPortInfo uses
  kUnknownAttribute,   ///< an attribute ID the CM does not define (cm_recv_handler drops it)
  kClassPortInfo,      ///< ClassPortInfo: the kernel's CM has no handler for it either
  kAlternatePath,      ///< LAP or APR: refused on RoCE (cm_lap_handler, cm_apr_handler)
  kMessageMraed,       ///< MRA with MessageMRAed 3 (reserved): it names no message
  kRejectInfoLength,   ///< REJ RejectInfoLength beyond the 72 bytes of ARI
  kSidrAddInfoLength,  ///< SIDR_REP AdditionalInformationLength beyond its 72 bytes
  kCount,
};

constexpr std::string_view name(MadError e) {
  switch (e) {
    case MadError::kTruncated:
      return "truncated";
    case MadError::kOversized:
      return "oversized";
    case MadError::kBaseVersion:
      return "bad_base_version";
    case MadError::kMgmtClass:
      return "bad_mgmt_class";
    case MadError::kClassVersion:
      return "bad_class_version";
    case MadError::kMethod:
      return "bad_method";
    case MadError::kUnknownAttribute:
      return "unknown_attribute";
    case MadError::kClassPortInfo:
      return "class_port_info";
    case MadError::kAlternatePath:
      return "alternate_path";
    case MadError::kMessageMraed:
      return "bad_message_mraed";
    case MadError::kRejectInfoLength:
      return "bad_reject_info_length";
    case MadError::kSidrAddInfoLength:
      return "bad_sidr_add_info_length";
    case MadError::kCount:
      break;
  }
  return {};
}

/// REJ reasons (ib_cm.h enum ib_cm_rej_reason).
enum class RejReason : std::uint16_t {
  kNoQp = 1,
  kNoEec = 2,
  kNoResources = 3,
  kTimeout = 4,  ///< ARI carries the sender's CA GUID
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidCommInstance = 7,
  kInvalidServiceId = 8,  ///< no listener for the ServiceID
  kInvalidTransportType = 9,
  kStaleConn = 10,
  kRdcNotExist = 11,
  kInvalidGid = 12,
  kInvalidLid = 13,
  kInvalidSl = 14,
  kInvalidTrafficClass = 15,
  kInvalidHopLimit = 16,
  kInvalidPacketRate = 17,
  kInvalidAltGid = 18,
  kInvalidAltLid = 19,
  kInvalidAltSl = 20,
  kInvalidAltTrafficClass = 21,
  kInvalidAltHopLimit = 22,
  kInvalidAltPacketRate = 23,
  kPortCmRedirect = 24,
  kPortRedirect = 25,
  kInvalidMtu = 26,
  kInsufficientRespResources = 27,
  kConsumerDefined = 28,  ///< rdma_reject
  kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30,
  kInvalidClassVersion = 31,
  kInvalidFlowLabel = 32,
  kInvalidAltFlowLabel = 33,
  kVendorOptionNotSupported = 35,  ///< rdma_reject_ece
};

/// The reason as the kernel's ibcm_reject_msg() words it; empty when unknown.
constexpr std::string_view name(RejReason r) {
  switch (r) {
    case RejReason::kNoQp:
      return "no QP";
    case RejReason::kNoEec:
      return "no EEC";
    case RejReason::kNoResources:
      return "no resources";
    case RejReason::kTimeout:
      return "timeout";
    case RejReason::kUnsupported:
      return "unsupported";
    case RejReason::kInvalidCommId:
      return "invalid comm ID";
    case RejReason::kInvalidCommInstance:
      return "invalid comm instance";
    case RejReason::kInvalidServiceId:
      return "invalid service ID";
    case RejReason::kInvalidTransportType:
      return "invalid transport type";
    case RejReason::kStaleConn:
      return "stale conn";
    case RejReason::kRdcNotExist:
      return "RDC not exist";
    case RejReason::kInvalidGid:
      return "invalid GID";
    case RejReason::kInvalidLid:
      return "invalid LID";
    case RejReason::kInvalidSl:
      return "invalid SL";
    case RejReason::kInvalidTrafficClass:
      return "invalid traffic class";
    case RejReason::kInvalidHopLimit:
      return "invalid hop limit";
    case RejReason::kInvalidPacketRate:
      return "invalid packet rate";
    case RejReason::kInvalidAltGid:
      return "invalid alt GID";
    case RejReason::kInvalidAltLid:
      return "invalid alt LID";
    case RejReason::kInvalidAltSl:
      return "invalid alt SL";
    case RejReason::kInvalidAltTrafficClass:
      return "invalid alt traffic class";
    case RejReason::kInvalidAltHopLimit:
      return "invalid alt hop limit";
    case RejReason::kInvalidAltPacketRate:
      return "invalid alt packet rate";
    case RejReason::kPortCmRedirect:
      return "port CM redirect";
    case RejReason::kPortRedirect:
      return "port redirect";
    case RejReason::kInvalidMtu:
      return "invalid MTU";
    case RejReason::kInsufficientRespResources:
      return "insufficient resp resources";
    case RejReason::kConsumerDefined:
      return "consumer defined";
    case RejReason::kInvalidRnrRetry:
      return "invalid RNR retry";
    case RejReason::kDuplicateLocalCommId:
      return "duplicate local comm ID";
    case RejReason::kInvalidClassVersion:
      return "invalid class version";
    case RejReason::kInvalidFlowLabel:
      return "invalid flow label";
    case RejReason::kInvalidAltFlowLabel:
      return "invalid alt flow label";
    case RejReason::kVendorOptionNotSupported:
      return "vendor option is not supported";
  }
  return {};
}

/// SIDR_REP status (ib_cm.h enum ib_cm_sidr_status).
enum class SidrStatus : std::uint8_t {
  kSuccess = 0,
  kUnsupported = 1,  ///< no listener for the ServiceID
  kReject = 2,       ///< rdma_reject, or the listener refused it
  kNoQp = 3,
  kRedirect = 4,
  kUnsupportedVersion = 5,
};

constexpr std::string_view name(SidrStatus s) {
  switch (s) {
    case SidrStatus::kSuccess:
      return "success";
    case SidrStatus::kUnsupported:
      return "unsupported";
    case SidrStatus::kReject:
      return "reject";
    case SidrStatus::kNoQp:
      return "no QP";
    case SidrStatus::kRedirect:
      return "redirect";
    case SidrStatus::kUnsupportedVersion:
      return "unsupported version";
  }
  return {};
}

/// Which message an MRA or REJ answers (IBA Tables 107/108; cm_msgs.h
/// enum cm_msg_response).
enum class MsgResponse : std::uint8_t { kReq = 0, kRep = 1, kOther = 2 };

/// REQ TransportServiceType (IBA Table 106): 0 RC, 1 UC, 3 with
/// ExtendedTransportType 1 XRC.
enum class TransportType : std::uint8_t { kRc = 0, kUc = 1, kReserved = 2, kExtended = 3 };

/// MRA ServiceTimeout flag of ib_send_cm_mra (ib_cm.h IB_CM_MRA_FLAG_DELAY):
/// send the MRA only in answer to a duplicate. Never on the wire.
inline constexpr std::uint8_t kMraFlagDelay = 0x80;

// ---------------------------------------------------------------------------
// Messages.

using Gid = wire::IpAddr;  ///< a RoCEv2 GID is the IP address (IPv4-mapped for IPv4)

/// The common MAD header, bytes 0-23.
struct MadHdr {
  std::uint8_t base_version = kMgmtBaseVersion;
  std::uint8_t mgmt_class = kMgmtClassCm;
  std::uint8_t class_version = kCmClassVersion;
  std::uint8_t method = kMethodSend;
  std::uint16_t status = 0;
  std::uint16_t class_specific = 0;
  std::uint64_t tid = 0;
  std::uint16_t attr_id = 0;
  std::uint16_t reserved = 0;
  std::uint32_t attr_mod = 0;  ///< ECE options on REQ/REP (kernel >= 5.8); uroce sends 0

  bool operator==(const MadHdr&) const = default;
};

/// The path fields of a REQ (primary or alternate).
struct ReqPath {
  std::uint16_t local_lid = 0;
  std::uint16_t remote_lid = 0;
  Gid local_gid;
  Gid remote_gid;
  std::uint32_t flow_label = 0;  ///< 20 bits
  std::uint8_t packet_rate = 0;  ///< 6 bits
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 0;
  std::uint8_t sl = 0;  ///< 4 bits
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  ///< 5 bits

  bool operator==(const ReqPath&) const = default;
};

struct ReqMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t vendor_id = 0;  ///< 24 bits
  std::uint64_t service_id = 0;
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  ///< 24 bits
  std::uint8_t responder_resources = 0;
  std::uint32_t local_eecn = 0;  ///< 24 bits
  std::uint8_t initiator_depth = 0;
  std::uint32_t remote_eecn = 0;                ///< 24 bits
  std::uint8_t remote_cm_response_timeout = 0;  ///< 5 bits
  TransportType transport_type = TransportType::kRc;
  bool end_to_end_flow_control = false;
  std::uint32_t starting_psn = 0;              ///< 24 bits
  std::uint8_t local_cm_response_timeout = 0;  ///< 5 bits
  std::uint8_t retry_count = 0;                ///< 3 bits
  std::uint16_t pkey = 0;
  std::uint8_t path_mtu = 0;  ///< 4 bits, IBV_MTU_* code
  bool rdc_exists = false;
  std::uint8_t rnr_retry_count = 0;  ///< 3 bits
  std::uint8_t max_cm_retries = 0;   ///< 4 bits
  bool srq = false;
  std::uint8_t extended_transport_type = 0;  ///< 3 bits
  ReqPath primary;
  ReqPath alternate;
  bool sap_supported = false;
  std::array<std::uint8_t, 92> private_data{};

  static constexpr AttrId kAttrId = AttrId::kReq;
  bool operator==(const ReqMsg&) const = default;
};

struct MraMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  MsgResponse message_mraed = MsgResponse::kReq;
  std::uint8_t service_timeout = 0;  ///< 5 bits
  std::array<std::uint8_t, 222> private_data{};

  static constexpr AttrId kAttrId = AttrId::kMra;
  bool operator==(const MraMsg&) const = default;
};

struct RejMsg {
  std::uint32_t local_comm_id = 0;  ///< 0 when rejecting a REQ not yet answered
  std::uint32_t remote_comm_id = 0;
  MsgResponse message_rejected = MsgResponse::kReq;
  std::uint8_t reject_info_length = 0;  ///< bytes of ARI, at most 72
  std::uint16_t reason = 0;             ///< RejReason
  std::array<std::uint8_t, 72> ari{};
  std::array<std::uint8_t, 148> private_data{};

  static constexpr AttrId kAttrId = AttrId::kRej;
  bool operator==(const RejMsg&) const = default;
};

struct RepMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;     ///< 24 bits
  std::uint32_t vendor_id = 0;     ///< 24 bits, split over three bytes on the wire
  std::uint32_t local_eecn = 0;    ///< 24 bits
  std::uint32_t starting_psn = 0;  ///< 24 bits
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t target_ack_delay = 0;   ///< 5 bits
  std::uint8_t failover_accepted = 0;  ///< 2 bits
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0;  ///< 3 bits
  bool srq = false;
  std::uint64_t local_ca_guid = 0;
  std::array<std::uint8_t, 196> private_data{};

  static constexpr AttrId kAttrId = AttrId::kRep;
  bool operator==(const RepMsg&) const = default;
};

struct RtuMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, 224> private_data{};

  static constexpr AttrId kAttrId = AttrId::kRtu;
  bool operator==(const RtuMsg&) const = default;
};

struct DreqMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t remote_qpn = 0;  ///< 24 bits: the receiver's QPN, which it checks
  std::array<std::uint8_t, 220> private_data{};

  static constexpr AttrId kAttrId = AttrId::kDreq;
  bool operator==(const DreqMsg&) const = default;
};

struct DrepMsg {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, 224> private_data{};

  static constexpr AttrId kAttrId = AttrId::kDrep;
  bool operator==(const DrepMsg&) const = default;
};

struct SidrReqMsg {
  std::uint32_t request_id = 0;
  std::uint16_t pkey = 0;
  std::uint64_t service_id = 0;
  std::array<std::uint8_t, 216> private_data{};

  static constexpr AttrId kAttrId = AttrId::kSidrReq;
  bool operator==(const SidrReqMsg&) const = default;
};

struct SidrRepMsg {
  std::uint32_t request_id = 0;
  std::uint8_t status = 0;           ///< SidrStatus
  std::uint8_t add_info_length = 0;  ///< at most 72
  std::uint32_t vendor_id = 0;       ///< 24 bits
  std::uint32_t qpn = 0;             ///< 24 bits
  std::uint64_t service_id = 0;
  std::uint32_t qkey = 0;
  std::array<std::uint8_t, 72> add_info{};
  std::array<std::uint8_t, 136> private_data{};

  static constexpr AttrId kAttrId = AttrId::kSidrRep;
  bool operator==(const SidrRepMsg&) const = default;
};

using CmMessage =
    std::variant<ReqMsg, MraMsg, RejMsg, RepMsg, RtuMsg, DreqMsg, DrepMsg, SidrReqMsg, SidrRepMsg>;

/// A decoded CM MAD: header and message.
struct Mad {
  MadHdr hdr;
  CmMessage msg;
};

/// The attribute ID of a message.
AttrId attr_id_of(const CmMessage& msg);

/// Writes `msg` under `hdr` into a 256-byte MAD. The header's attribute
/// ID is taken from the message; every reserved bit is written 0.
void encode(const MadHdr& hdr, const CmMessage& msg, std::span<std::uint8_t, kMadSize> out);

/// Reads the header (bytes 0-23) of at least 24 bytes.
MadHdr decode_hdr(const std::uint8_t* mad);

/// Checks and decodes a received MAD. Returns false and sets `error` when
/// the MAD is refused; `out` is then unspecified.
bool decode(wire::ConstBytes bytes, Mad& out, MadError& error);

// ---------------------------------------------------------------------------
// rdma_cm addressing: port spaces, ServiceIDs, the IP CM header.

/// rdma_cm port spaces (rdma_user_cm.h enum rdma_ucm_port_space).
enum class PortSpace : std::uint16_t {
  kIpoib = 0x0002,
  kTcp = 0x0106,
  kUdp = 0x0111,
  kIb = 0x013F
};

/// The ServiceID of a port in a port space (the kernel's
/// rdma_get_service_id): 0x0000000001060000 | port for TCP, ...1110000 for UDP.
constexpr std::uint64_t service_id(PortSpace ps, std::uint16_t port) {
  return std::uint64_t{static_cast<std::uint16_t>(ps)} << 16 | port;
}
/// The port space and port a ServiceID names (rdma_ps_from_service_id,
/// cma_port_from_service_id).
constexpr std::uint16_t service_id_ps(std::uint64_t sid) {
  return static_cast<std::uint16_t>(sid >> 16);
}
constexpr std::uint16_t service_id_port(std::uint64_t sid) {
  return static_cast<std::uint16_t>(sid);
}
/// RDMA_IB_IP_PS_MASK: the ServiceIDs of the IP port spaces share their top 48 bits.
inline constexpr std::uint64_t kIpServiceIdMask = 0xFFFFFFFFFFFF0000;
/// True for a ServiceID of the rdma_cm TCP or UDP port space.
constexpr bool is_ip_service_id(std::uint64_t sid) {
  return (sid & kIpServiceIdMask) == service_id(PortSpace::kTcp, 0) ||
         (sid & kIpServiceIdMask) == service_id(PortSpace::kUdp, 0);
}
static_assert(service_id(PortSpace::kTcp, 7174) == 0x0000000001061C06);
static_assert(service_id(PortSpace::kUdp, 0) == 0x0000000001110000);

/// The IP CM private-data header (IBA Annex A11; the kernel's struct
/// cma_hdr): the first 36 bytes of REQ and SIDR_REQ private data.
struct IpCmHdr {
  static constexpr std::size_t kSize = 36;
  static constexpr std::uint8_t kVersion = 0;  ///< CMA_VERSION (A11 MajV 0, MinV 0)

  std::uint8_t ip_version = 4;  ///< 4 or 6
  std::uint16_t src_port = 0;   ///< the active side's bound port
  wire::IpAddr src;             ///< IPv4 kept IPv4-mapped here, as everywhere in uroce
  wire::IpAddr dst;

  bool operator==(const IpCmHdr&) const = default;
};

/// Writes the header into 36 bytes. IPv4 addresses go out as 12 zero
/// bytes and the address (union cma_ip_addr), not IPv4-mapped.
void encode(const IpCmHdr& h, std::uint8_t* out);

/// Reads the header; false when the version is not 0 or the IP version
/// neither 4 nor 6 (cma_save_ip_info refuses both).
bool decode(const std::uint8_t* in, IpCmHdr& out);

}  // namespace uroce::cm
