/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Where every field of a CM MAD lives: one constexpr table per message
// (IBA chapter 12, Tables 106 to 120), offsets counted from the start of the
// 256-byte MAD, bits numbered from the most significant bit of a byte as
// IBA numbers them. The kernel's include/rdma/ibta_vol1_c12.h gives the
// same fields relative to the end of the 24-byte MAD header; each offset
// here is that one plus 24. Codecs read and write through these tables
// and never compute an offset by hand; static_asserts check that no two
// fields of a message overlap and that every one fits the MAD.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace uroce::cm {

inline constexpr std::size_t kMadSize = 256;
inline constexpr std::size_t kMadHdrSize = 24;

/// One field of a MAD: `bits` wide, starting at bit `bit` (0 = MSB) of
/// byte `offset`. Fields wider than 64 bits are byte strings (GIDs,
/// private data) and start on a byte.
struct Field {
  std::string_view name;  ///< as IBA's table spells it
  std::uint16_t offset;
  std::uint8_t bit;
  std::uint16_t bits;

  constexpr std::size_t span_bytes() const { return (bit + bits + 7u) / 8u; }
  constexpr std::size_t end() const { return offset + span_bytes(); }
  constexpr bool is_bytes() const { return bits > 64; }
  constexpr std::size_t size() const { return bits / 8u; }  ///< bytes of a byte string
};

/// Reads an integer field (at most 64 bits) out of a MAD, big-endian.
constexpr std::uint64_t get_field(const std::uint8_t* mad, const Field& f) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < f.span_bytes(); ++i) v = v << 8 | mad[f.offset + i];
  const unsigned shift = static_cast<unsigned>(f.span_bytes() * 8 - f.bit - f.bits);
  const std::uint64_t mask = f.bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << f.bits) - 1;
  return (v >> shift) & mask;
}

/// Writes an integer field, leaving the other bits of its bytes as they
/// are; bits of `value` above the field's width are dropped, as the
/// kernel's IBA_SET masks them.
constexpr void set_field(std::uint8_t* mad, const Field& f, std::uint64_t value) {
  const std::size_t n = f.span_bytes();
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = v << 8 | mad[f.offset + i];
  const unsigned shift = static_cast<unsigned>(n * 8 - f.bit - f.bits);
  const std::uint64_t mask = f.bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << f.bits) - 1;
  v = (v & ~(mask << shift)) | ((value & mask) << shift);
  for (std::size_t i = n; i-- > 0;) {
    mad[f.offset + i] = static_cast<std::uint8_t>(v);
    v >>= 8;
  }
}

/// The common MAD header (ib_mad.h struct ib_mad_hdr).
namespace hdr {
inline constexpr Field kBaseVersion{"BaseVersion", 0, 0, 8};
inline constexpr Field kMgmtClass{"MgmtClass", 1, 0, 8};
inline constexpr Field kClassVersion{"ClassVersion", 2, 0, 8};
inline constexpr Field kMethod{"Method", 3, 0, 8};
inline constexpr Field kStatus{"Status", 4, 0, 16};
inline constexpr Field kClassSpecific{"ClassSpecific", 6, 0, 16};
inline constexpr Field kTransactionId{"TransactionID", 8, 0, 64};
inline constexpr Field kAttributeId{"AttributeID", 16, 0, 16};
inline constexpr Field kReserved{"Reserved", 18, 0, 16};
inline constexpr Field kAttributeModifier{"AttributeModifier", 20, 0, 32};
inline constexpr std::array kAll = {kBaseVersion, kMgmtClass,        kClassVersion,  kMethod,
                                    kStatus,      kClassSpecific,    kTransactionId, kAttributeId,
                                    kReserved,    kAttributeModifier};
}  // namespace hdr

/// REQ (IBA Table 106).
namespace req {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kVendorId{"VendorID", 29, 0, 24};  ///< ECE; uroce sends 0
inline constexpr Field kServiceId{"ServiceID", 32, 0, 64};
inline constexpr Field kLocalCaGuid{"LocalCAGUID", 40, 0, 64};
inline constexpr Field kLocalQkey{"LocalQKey", 52, 0, 32};
inline constexpr Field kLocalQpn{"LocalQPN", 56, 0, 24};
inline constexpr Field kResponderResources{"ResponderResources", 59, 0, 8};
inline constexpr Field kLocalEecn{"LocalEECN", 60, 0, 24};
inline constexpr Field kInitiatorDepth{"InitiatorDepth", 63, 0, 8};
inline constexpr Field kRemoteEecn{"RemoteEECN", 64, 0, 24};
inline constexpr Field kRemoteCmResponseTimeout{"RemoteCMResponseTimeout", 67, 0, 5};
inline constexpr Field kTransportServiceType{"TransportServiceType", 67, 5, 2};
inline constexpr Field kEndToEndFlowControl{"EndToEndFlowControl", 67, 7, 1};
inline constexpr Field kStartingPsn{"StartingPSN", 68, 0, 24};
inline constexpr Field kLocalCmResponseTimeout{"LocalCMResponseTimeout", 71, 0, 5};
inline constexpr Field kRetryCount{"RetryCount", 71, 5, 3};
inline constexpr Field kPartitionKey{"PartitionKey", 72, 0, 16};
inline constexpr Field kPathMtu{"PathPacketPayloadMTU", 74, 0, 4};
inline constexpr Field kRdcExists{"RDCExists", 74, 4, 1};
inline constexpr Field kRnrRetryCount{"RNRRetryCount", 74, 5, 3};
inline constexpr Field kMaxCmRetries{"MaxCMRetries", 75, 0, 4};
inline constexpr Field kSrq{"SRQ", 75, 4, 1};
inline constexpr Field kExtendedTransportType{"ExtendedTransportType", 75, 5, 3};
inline constexpr Field kPrimaryLocalLid{"PrimaryLocalPortLID", 76, 0, 16};
inline constexpr Field kPrimaryRemoteLid{"PrimaryRemotePortLID", 78, 0, 16};
inline constexpr Field kPrimaryLocalGid{"PrimaryLocalPortGID", 80, 0, 128};
inline constexpr Field kPrimaryRemoteGid{"PrimaryRemotePortGID", 96, 0, 128};
inline constexpr Field kPrimaryFlowLabel{"PrimaryFlowLabel", 112, 0, 20};
inline constexpr Field kPrimaryPacketRate{"PrimaryPacketRate", 115, 2, 6};
inline constexpr Field kPrimaryTrafficClass{"PrimaryTrafficClass", 116, 0, 8};
inline constexpr Field kPrimaryHopLimit{"PrimaryHopLimit", 117, 0, 8};
inline constexpr Field kPrimarySl{"PrimarySL", 118, 0, 4};
inline constexpr Field kPrimarySubnetLocal{"PrimarySubnetLocal", 118, 4, 1};
inline constexpr Field kPrimaryLocalAckTimeout{"PrimaryLocalACKTimeout", 119, 0, 5};
inline constexpr Field kAlternateLocalLid{"AlternateLocalPortLID", 120, 0, 16};
inline constexpr Field kAlternateRemoteLid{"AlternateRemotePortLID", 122, 0, 16};
inline constexpr Field kAlternateLocalGid{"AlternateLocalPortGID", 124, 0, 128};
inline constexpr Field kAlternateRemoteGid{"AlternateRemotePortGID", 140, 0, 128};
inline constexpr Field kAlternateFlowLabel{"AlternateFlowLabel", 156, 0, 20};
inline constexpr Field kAlternatePacketRate{"AlternatePacketRate", 159, 2, 6};
inline constexpr Field kAlternateTrafficClass{"AlternateTrafficClass", 160, 0, 8};
inline constexpr Field kAlternateHopLimit{"AlternateHopLimit", 161, 0, 8};
inline constexpr Field kAlternateSl{"AlternateSL", 162, 0, 4};
inline constexpr Field kAlternateSubnetLocal{"AlternateSubnetLocal", 162, 4, 1};
inline constexpr Field kAlternateLocalAckTimeout{"AlternateLocalACKTimeout", 163, 0, 5};
inline constexpr Field kSapSupported{"SAPSupported", 163, 5, 1};
inline constexpr Field kPrivateData{"PrivateData", 164, 0, 92 * 8};
inline constexpr std::array kAll = {kLocalCommId,
                                    kVendorId,
                                    kServiceId,
                                    kLocalCaGuid,
                                    kLocalQkey,
                                    kLocalQpn,
                                    kResponderResources,
                                    kLocalEecn,
                                    kInitiatorDepth,
                                    kRemoteEecn,
                                    kRemoteCmResponseTimeout,
                                    kTransportServiceType,
                                    kEndToEndFlowControl,
                                    kStartingPsn,
                                    kLocalCmResponseTimeout,
                                    kRetryCount,
                                    kPartitionKey,
                                    kPathMtu,
                                    kRdcExists,
                                    kRnrRetryCount,
                                    kMaxCmRetries,
                                    kSrq,
                                    kExtendedTransportType,
                                    kPrimaryLocalLid,
                                    kPrimaryRemoteLid,
                                    kPrimaryLocalGid,
                                    kPrimaryRemoteGid,
                                    kPrimaryFlowLabel,
                                    kPrimaryPacketRate,
                                    kPrimaryTrafficClass,
                                    kPrimaryHopLimit,
                                    kPrimarySl,
                                    kPrimarySubnetLocal,
                                    kPrimaryLocalAckTimeout,
                                    kAlternateLocalLid,
                                    kAlternateRemoteLid,
                                    kAlternateLocalGid,
                                    kAlternateRemoteGid,
                                    kAlternateFlowLabel,
                                    kAlternatePacketRate,
                                    kAlternateTrafficClass,
                                    kAlternateHopLimit,
                                    kAlternateSl,
                                    kAlternateSubnetLocal,
                                    kAlternateLocalAckTimeout,
                                    kSapSupported,
                                    kPrivateData};
}  // namespace req

/// MRA (IBA Table 107).
namespace mra {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kMessageMraed{"MessageMRAed", 32, 0, 2};
inline constexpr Field kServiceTimeout{"ServiceTimeout", 33, 0, 5};
inline constexpr Field kPrivateData{"PrivateData", 34, 0, 222 * 8};
inline constexpr std::array kAll = {kLocalCommId, kRemoteCommId, kMessageMraed, kServiceTimeout,
                                    kPrivateData};
}  // namespace mra

/// REJ (IBA Table 108).
namespace rej {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kMessageRejected{"MessageRejected", 32, 0, 2};
inline constexpr Field kRejectedInfoLength{"RejectInfoLength", 33, 0, 7};
inline constexpr Field kReason{"Reason", 34, 0, 16};
inline constexpr Field kAri{"AdditionalRejectionInformation", 36, 0, 72 * 8};
inline constexpr Field kPrivateData{"PrivateData", 108, 0, 148 * 8};
inline constexpr std::array kAll = {kLocalCommId,        kRemoteCommId, kMessageRejected,
                                    kRejectedInfoLength, kReason,       kAri,
                                    kPrivateData};
}  // namespace rej

/// REP (IBA Table 110).
namespace rep {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kLocalQkey{"LocalQKey", 32, 0, 32};
inline constexpr Field kLocalQpn{"LocalQPN", 36, 0, 24};
inline constexpr Field kVendorIdH{"VendorID[23:16]", 39, 0, 8};  ///< ECE
inline constexpr Field kLocalEecn{"LocalEEContext", 40, 0, 24};
inline constexpr Field kVendorIdM{"VendorID[15:8]", 43, 0, 8};
inline constexpr Field kStartingPsn{"StartingPSN", 44, 0, 24};
inline constexpr Field kVendorIdL{"VendorID[7:0]", 47, 0, 8};
inline constexpr Field kResponderResources{"ResponderResources", 48, 0, 8};
inline constexpr Field kInitiatorDepth{"InitiatorDepth", 49, 0, 8};
inline constexpr Field kTargetAckDelay{"TargetACKDelay", 50, 0, 5};
inline constexpr Field kFailoverAccepted{"FailoverAccepted", 50, 5, 2};
inline constexpr Field kEndToEndFlowControl{"EndToEndFlowControl", 50, 7, 1};
inline constexpr Field kRnrRetryCount{"RNRRetryCount", 51, 0, 3};
inline constexpr Field kSrq{"SRQ", 51, 3, 1};
inline constexpr Field kLocalCaGuid{"LocalCAGUID", 52, 0, 64};
inline constexpr Field kPrivateData{"PrivateData", 60, 0, 196 * 8};
inline constexpr std::array kAll = {
    kLocalCommId,      kRemoteCommId,        kLocalQkey,      kLocalQpn,
    kVendorIdH,        kLocalEecn,           kVendorIdM,      kStartingPsn,
    kVendorIdL,        kResponderResources,  kInitiatorDepth, kTargetAckDelay,
    kFailoverAccepted, kEndToEndFlowControl, kRnrRetryCount,  kSrq,
    kLocalCaGuid,      kPrivateData};
}  // namespace rep

/// RTU (IBA Table 111).
namespace rtu {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kPrivateData{"PrivateData", 32, 0, 224 * 8};
inline constexpr std::array kAll = {kLocalCommId, kRemoteCommId, kPrivateData};
}  // namespace rtu

/// DREQ (IBA Table 112).
namespace dreq {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kRemoteQpn{"RemoteQPN/EECN", 32, 0, 24};
inline constexpr Field kPrivateData{"PrivateData", 36, 0, 220 * 8};
inline constexpr std::array kAll = {kLocalCommId, kRemoteCommId, kRemoteQpn, kPrivateData};
}  // namespace dreq

/// DREP (IBA Table 113).
namespace drep {
inline constexpr Field kLocalCommId{"LocalCommID", 24, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 28, 0, 32};
inline constexpr Field kPrivateData{"PrivateData", 32, 0, 224 * 8};
inline constexpr std::array kAll = {kLocalCommId, kRemoteCommId, kPrivateData};
}  // namespace drep

/// SIDR_REQ (IBA Table 119).
namespace sidr_req {
inline constexpr Field kRequestId{"RequestID", 24, 0, 32};
inline constexpr Field kPartitionKey{"PartitionKey", 28, 0, 16};
inline constexpr Field kServiceId{"ServiceID", 32, 0, 64};
inline constexpr Field kPrivateData{"PrivateData", 40, 0, 216 * 8};
inline constexpr std::array kAll = {kRequestId, kPartitionKey, kServiceId, kPrivateData};
}  // namespace sidr_req

/// SIDR_REP (IBA Table 120).
namespace sidr_rep {
inline constexpr Field kRequestId{"RequestID", 24, 0, 32};
inline constexpr Field kStatus{"Status", 28, 0, 8};
inline constexpr Field kAddInfoLength{"AdditionalInformationLength", 29, 0, 8};
inline constexpr Field kVendorIdH{"VendorID[23:8]", 30, 0, 16};  ///< ECE
inline constexpr Field kQpn{"QPN", 32, 0, 24};
inline constexpr Field kVendorIdL{"VendorID[7:0]", 35, 0, 8};
inline constexpr Field kServiceId{"ServiceID", 36, 0, 64};
inline constexpr Field kQkey{"Q_Key", 44, 0, 32};
inline constexpr Field kAddInfo{"AdditionalInformation", 48, 0, 72 * 8};
inline constexpr Field kPrivateData{"PrivateData", 120, 0, 136 * 8};
inline constexpr std::array kAll = {kRequestId, kStatus,     kAddInfoLength, kVendorIdH,
                                    kQpn,       kVendorIdL,  kServiceId,     kQkey,
                                    kAddInfo,   kPrivateData};
}  // namespace sidr_rep

namespace detail {

template <std::size_t N>
constexpr bool fields_fit(const std::array<Field, N>& fields) {
  for (const Field& f : fields) {
    if (f.end() > kMadSize) return false;
    if (f.is_bytes() && (f.bit != 0 || f.bits % 8 != 0)) return false;
    if (!f.is_bytes() && f.span_bytes() > 8) return false;
    if (f.bits == 0 || f.bit > 7) return false;
  }
  return true;
}

template <std::size_t N>
constexpr bool fields_disjoint(const std::array<Field, N>& fields, std::size_t first_bit) {
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t a = fields[i].offset * 8u + fields[i].bit;
    if (a < first_bit) return false;
    for (std::size_t j = i + 1; j < N; ++j) {
      const std::size_t b = fields[j].offset * 8u + fields[j].bit;
      if (a < b + fields[j].bits && b < a + fields[i].bits) return false;
    }
  }
  return true;
}

// A message's fields start after the MAD header and end at the MAD's end;
// the header's own fields tile bytes 0..23.
template <std::size_t N>
constexpr bool valid_message(const std::array<Field, N>& fields) {
  return fields_fit(fields) && fields_disjoint(fields, kMadHdrSize * 8) &&
         fields.back().end() == kMadSize;
}

}  // namespace detail

static_assert(detail::fields_fit(hdr::kAll) && detail::fields_disjoint(hdr::kAll, 0) &&
              hdr::kAll.back().end() == kMadHdrSize);
static_assert(detail::valid_message(req::kAll));
static_assert(detail::valid_message(mra::kAll));
static_assert(detail::valid_message(rej::kAll));
static_assert(detail::valid_message(rep::kAll));
static_assert(detail::valid_message(rtu::kAll));
static_assert(detail::valid_message(dreq::kAll));
static_assert(detail::valid_message(drep::kAll));
static_assert(detail::valid_message(sidr_req::kAll));
static_assert(detail::valid_message(sidr_rep::kAll));

// The absolute offsets research/rdma-cm.md 3.3 lists, and which a kernel
// peer reads: a wrong one here breaks interop, so they are pinned.
static_assert(req::kLocalQpn.offset == 56 && req::kStartingPsn.offset == 68 &&
              req::kPrimaryLocalGid.offset == 80 && req::kPrimaryRemoteGid.offset == 96 &&
              req::kPrimaryFlowLabel.offset == 112 && req::kPrivateData.offset == 164 &&
              req::kPrivateData.size() == 92);
static_assert(mra::kPrivateData.size() == 222 && rej::kAri.size() == 72 &&
              rej::kPrivateData.size() == 148 && rep::kPrivateData.offset == 60 &&
              rep::kPrivateData.size() == 196 && rtu::kPrivateData.size() == 224 &&
              dreq::kPrivateData.size() == 220 && drep::kPrivateData.size() == 224 &&
              sidr_req::kPrivateData.size() == 216 && sidr_rep::kPrivateData.size() == 136 &&
              sidr_rep::kAddInfo.size() == 72);

// get_field and set_field agree on a multi-byte field that starts mid-byte.
static_assert([] {
  std::array<std::uint8_t, kMadSize> m{};
  set_field(m.data(), req::kPrimaryPacketRate, 0x2A);
  set_field(m.data(), req::kPrimaryFlowLabel, 0xABCDE);
  return m[112] == 0xAB && m[113] == 0xCD && m[114] == 0xE0 && m[115] == 0x2A &&
         get_field(m.data(), req::kPrimaryFlowLabel) == 0xABCDE &&
         get_field(m.data(), req::kPrimaryPacketRate) == 0x2A;
}());

}  // namespace uroce::cm
