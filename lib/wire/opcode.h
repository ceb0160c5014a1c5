/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// BTH opcodes and the table that describes each one: which extension
// headers follow the BTH and at which offsets, the total header length,
// which QP type may use it, its place in a message and whether it carries
// payload. Call sites never compute header offsets by hand; they ask this
// table (as rxe's rxe_opcode[] does). IBA 9.2 Table 35, ib_pack.h.

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::wire {

/// Every BTH opcode uroce sends or accepts. The top three bits name the
/// transport (RC 000, UC 001, UD 011, CNP 100, XRC 101), the low five the
/// operation. XRC's operations are RC's (IBA A14.8.1); they are not named
/// one by one here: with_transport() makes them from the RC ones.
enum class Opcode : std::uint8_t {
  kRcSendFirst = 0x00,
  kRcSendMiddle = 0x01,
  kRcSendLast = 0x02,
  kRcSendLastWithImmediate = 0x03,
  kRcSendOnly = 0x04,
  kRcSendOnlyWithImmediate = 0x05,
  kRcRdmaWriteFirst = 0x06,
  kRcRdmaWriteMiddle = 0x07,
  kRcRdmaWriteLast = 0x08,
  kRcRdmaWriteLastWithImmediate = 0x09,
  kRcRdmaWriteOnly = 0x0A,
  kRcRdmaWriteOnlyWithImmediate = 0x0B,
  kRcRdmaReadRequest = 0x0C,
  kRcRdmaReadResponseFirst = 0x0D,
  kRcRdmaReadResponseMiddle = 0x0E,
  kRcRdmaReadResponseLast = 0x0F,
  kRcRdmaReadResponseOnly = 0x10,
  kRcAcknowledge = 0x11,
  kRcAtomicAcknowledge = 0x12,
  kRcCompareSwap = 0x13,
  kRcFetchAdd = 0x14,
  kRcSendLastWithInvalidate = 0x16,
  kRcSendOnlyWithInvalidate = 0x17,

  kUcSendFirst = 0x20,
  kUcSendMiddle = 0x21,
  kUcSendLast = 0x22,
  kUcSendLastWithImmediate = 0x23,
  kUcSendOnly = 0x24,
  kUcSendOnlyWithImmediate = 0x25,
  kUcRdmaWriteFirst = 0x26,
  kUcRdmaWriteMiddle = 0x27,
  kUcRdmaWriteLast = 0x28,
  kUcRdmaWriteLastWithImmediate = 0x29,
  kUcRdmaWriteOnly = 0x2A,
  kUcRdmaWriteOnlyWithImmediate = 0x2B,

  kUdSendOnly = 0x64,
  kUdSendOnlyWithImmediate = 0x65,

  /// RoCEv2 Congestion Notification Packet (IBA Annex A17.9.2; ib_pack.h
  /// IB_OPCODE_CNP = 0x80 is the transport, the operation is 1).
  kCnp = 0x81,
  /// uroce's selective acknowledgement, for selective repeat between two
  /// uroce peers that both offer it (docs/transport.md). An opcode of the
  /// range IBA 9.2 leaves to manufacturers (transport 111): no other
  /// device is sent one, since only a requester that offers selective
  /// repeat is answered with it.
  kSelectiveAcknowledge = 0xE0,
};

/// Transport of an opcode: its top three bits.
enum class Transport : std::uint8_t {
  kRc = 0,
  kUc = 1,
  kRd = 2,
  kUd = 3,
  kCnp = 4,
  kXrc = 5,
  kManufacturer = 7,  ///< manufacturer-specific opcodes
};

constexpr Transport transport_of(std::uint8_t opcode) {
  return static_cast<Transport>(opcode >> 5);
}

/// The RC opcode `rc` moved to transport `t` (UC and XRC share RC's
/// operation codes).
constexpr std::uint8_t with_transport(Opcode rc, Transport t) {
  return static_cast<std::uint8_t>(static_cast<unsigned>(t) << 5 |
                                   (static_cast<std::uint8_t>(rc) & 0x1F));
}

/// Extension headers, in the order they follow the BTH (IBA 9.2):
/// RDETH, DETH, XRCETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH.
/// uroce has no RD, so RDETH is absent. kCnpReserved is the 16 zero bytes
/// of a CNP; kSackEth is uroce's own, after the AETH of a selective
/// acknowledgement.
enum class ExtHeader : std::uint8_t {
  kDeth,
  kXrcEth,  ///< XRC requests: the XRC SRQ the message is for (IBA A14.8.2)
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCnpReserved,
  kSackEth,  ///< the PSNs a selective acknowledgement says are held
  kCount,
};

inline constexpr std::size_t kBthSize = 12;
inline constexpr std::size_t kIcrcSize = 4;

/// Wire size of each extension header.
inline constexpr std::array<std::uint8_t, static_cast<std::size_t>(ExtHeader::kCount)>
    kExtHeaderSize = {8, 4, 16, 28, 4, 8, 4, 4, 16, 32};

constexpr std::uint16_t ext_bit(ExtHeader h) {
  return static_cast<std::uint16_t>(1u << static_cast<unsigned>(h));
}

/// Where a packet stands in its message.
enum class Position : std::uint8_t { kNone, kFirst, kMiddle, kLast, kOnly };

/// What the packet does; one value per family of opcodes.
enum class Operation : std::uint8_t {
  kInvalid,
  kSend,
  kRdmaWrite,
  kRdmaReadRequest,
  kRdmaReadResponse,
  kAcknowledge,
  kAtomicAcknowledge,
  kCompareSwap,
  kFetchAdd,
  kCnp,
  kSelectiveAcknowledge,
};

/// One row of the opcode table.
struct OpcodeInfo {
  std::string_view name;  ///< IBA name, as Wireshark and ib_pack.h spell it
  Operation operation = Operation::kInvalid;
  Position position = Position::kNone;
  std::uint16_t headers = 0;  ///< ext_bit() mask of the extension headers
  bool has_payload = false;
  /// Offset of each present extension header from the start of the BTH.
  std::array<std::uint8_t, static_cast<std::size_t>(ExtHeader::kCount)> offset{};
  std::uint8_t length = 0;  ///< BTH + extension headers

  constexpr bool valid() const { return operation != Operation::kInvalid; }
  constexpr bool has(ExtHeader h) const { return (headers & ext_bit(h)) != 0; }
  constexpr std::uint8_t offset_of(ExtHeader h) const {
    return offset[static_cast<std::size_t>(h)];
  }
  /// A request travels requester to responder; the rest are responses
  /// (acknowledgements, read responses) or CNPs.
  constexpr bool is_request() const {
    return operation == Operation::kSend || operation == Operation::kRdmaWrite ||
           operation == Operation::kRdmaReadRequest || operation == Operation::kCompareSwap ||
           operation == Operation::kFetchAdd;
  }
  constexpr bool is_response() const {
    return operation == Operation::kRdmaReadResponse || operation == Operation::kAcknowledge ||
           operation == Operation::kAtomicAcknowledge ||
           operation == Operation::kSelectiveAcknowledge;
  }
  constexpr bool is_atomic() const {
    return operation == Operation::kCompareSwap || operation == Operation::kFetchAdd;
  }
  constexpr bool has_immediate() const { return has(ExtHeader::kImmDt); }
  constexpr bool has_invalidate() const { return has(ExtHeader::kIeth); }
  /// First or only packet of a message: the one that opens it.
  constexpr bool starts_message() const {
    return position == Position::kFirst || position == Position::kOnly;
  }
  /// Last or only packet: the one that completes it.
  constexpr bool ends_message() const {
    return position == Position::kLast || position == Position::kOnly;
  }
};

namespace detail {

struct OpcodeRow {
  std::uint8_t opcode;
  std::string_view name;
  Operation operation;
  Position position;
  std::uint16_t headers;
  bool has_payload;
};

constexpr std::uint16_t kNoExt = 0;
constexpr std::uint16_t kImm = ext_bit(ExtHeader::kImmDt);
constexpr std::uint16_t kReth = ext_bit(ExtHeader::kReth);
constexpr std::uint16_t kAeth = ext_bit(ExtHeader::kAeth);

// The RC and UC send/write rows differ only in transport; written once.
constexpr std::array<OpcodeRow, 12> kSendWriteOps = {{
    {0x00, "SEND_FIRST", Operation::kSend, Position::kFirst, kNoExt, true},
    {0x01, "SEND_MIDDLE", Operation::kSend, Position::kMiddle, kNoExt, true},
    {0x02, "SEND_LAST", Operation::kSend, Position::kLast, kNoExt, true},
    {0x03, "SEND_LAST_WITH_IMMEDIATE", Operation::kSend, Position::kLast, kImm, true},
    {0x04, "SEND_ONLY", Operation::kSend, Position::kOnly, kNoExt, true},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE", Operation::kSend, Position::kOnly, kImm, true},
    {0x06, "RDMA_WRITE_FIRST", Operation::kRdmaWrite, Position::kFirst, kReth, true},
    {0x07, "RDMA_WRITE_MIDDLE", Operation::kRdmaWrite, Position::kMiddle, kNoExt, true},
    {0x08, "RDMA_WRITE_LAST", Operation::kRdmaWrite, Position::kLast, kNoExt, true},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", Operation::kRdmaWrite, Position::kLast, kImm, true},
    {0x0A, "RDMA_WRITE_ONLY", Operation::kRdmaWrite, Position::kOnly, kReth, true},
    {0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", Operation::kRdmaWrite, Position::kOnly, kReth | kImm,
     true},
}};

constexpr std::array<OpcodeRow, 13> kOtherOps = {{
    {0x0C, "RC_RDMA_READ_REQUEST", Operation::kRdmaReadRequest, Position::kOnly, kReth, false},
    {0x0D, "RC_RDMA_READ_RESPONSE_FIRST", Operation::kRdmaReadResponse, Position::kFirst, kAeth,
     true},
    {0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", Operation::kRdmaReadResponse, Position::kMiddle, kNoExt,
     true},
    {0x0F, "RC_RDMA_READ_RESPONSE_LAST", Operation::kRdmaReadResponse, Position::kLast, kAeth,
     true},
    {0x10, "RC_RDMA_READ_RESPONSE_ONLY", Operation::kRdmaReadResponse, Position::kOnly, kAeth,
     true},
    {0x11, "RC_ACKNOWLEDGE", Operation::kAcknowledge, Position::kOnly, kAeth, false},
    {0x12, "RC_ATOMIC_ACKNOWLEDGE", Operation::kAtomicAcknowledge, Position::kOnly,
     kAeth | ext_bit(ExtHeader::kAtomicAckEth), false},
    {0x13, "RC_CMP_SWAP", Operation::kCompareSwap, Position::kOnly, ext_bit(ExtHeader::kAtomicEth),
     false},
    {0x14, "RC_FETCH_ADD", Operation::kFetchAdd, Position::kOnly, ext_bit(ExtHeader::kAtomicEth),
     false},
    {0x16, "RC_SEND_LAST_INVAL", Operation::kSend, Position::kLast, ext_bit(ExtHeader::kIeth),
     true},
    {0x17, "RC_SEND_ONLY_INVAL", Operation::kSend, Position::kOnly, ext_bit(ExtHeader::kIeth),
     true},
    {0x64, "UD_SEND_ONLY", Operation::kSend, Position::kOnly, ext_bit(ExtHeader::kDeth), true},
    {0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", Operation::kSend, Position::kOnly,
     ext_bit(ExtHeader::kDeth) | kImm, true},
}};

constexpr OpcodeInfo make_info(std::string_view name, const OpcodeRow& row) {
  OpcodeInfo info;
  info.name = name;
  info.operation = row.operation;
  info.position = row.position;
  info.headers = row.headers;
  info.has_payload = row.has_payload;
  unsigned off = kBthSize;
  for (unsigned h = 0; h < static_cast<unsigned>(ExtHeader::kCount); ++h) {
    if (row.headers & (1u << h)) {
      info.offset[h] = static_cast<std::uint8_t>(off);
      off += kExtHeaderSize[h];
    }
  }
  info.length = static_cast<std::uint8_t>(off);
  return info;
}

// Names of the RC and UC rows, as in IBA (and Wireshark): "RC_" or "UC_"
// then the operation. Kept as literals so the table holds no runtime strings.
constexpr std::array<std::string_view, 12> kRcNames = {
    "RC_SEND_FIRST",       "RC_SEND_MIDDLE",
    "RC_SEND_LAST",        "RC_SEND_LAST_WITH_IMMEDIATE",
    "RC_SEND_ONLY",        "RC_SEND_ONLY_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
    "RC_RDMA_WRITE_LAST",  "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_ONLY",  "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
constexpr std::array<std::string_view, 12> kUcNames = {
    "UC_SEND_FIRST",       "UC_SEND_MIDDLE",
    "UC_SEND_LAST",        "UC_SEND_LAST_WITH_IMMEDIATE",
    "UC_SEND_ONLY",        "UC_SEND_ONLY_WITH_IMMEDIATE",
    "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE",
    "UC_RDMA_WRITE_LAST",  "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "UC_RDMA_WRITE_ONLY",  "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};

// XRC: every RC operation (IBA A14.8.1, ib_pack.h's IB_OPCODE_XRC_*), its
// requests with an XRCETH after the BTH; acknowledgements and responses
// carry none.
constexpr std::array<std::string_view, 12> kXrcNames = {
    "XRC_SEND_FIRST",       "XRC_SEND_MIDDLE",
    "XRC_SEND_LAST",        "XRC_SEND_LAST_WITH_IMMEDIATE",
    "XRC_SEND_ONLY",        "XRC_SEND_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_FIRST", "XRC_RDMA_WRITE_MIDDLE",
    "XRC_RDMA_WRITE_LAST",  "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_ONLY",  "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
constexpr std::array<std::string_view, 11> kXrcOtherNames = {"XRC_RDMA_READ_REQUEST",
                                                             "XRC_RDMA_READ_RESPONSE_FIRST",
                                                             "XRC_RDMA_READ_RESPONSE_MIDDLE",
                                                             "XRC_RDMA_READ_RESPONSE_LAST",
                                                             "XRC_RDMA_READ_RESPONSE_ONLY",
                                                             "XRC_ACKNOWLEDGE",
                                                             "XRC_ATOMIC_ACKNOWLEDGE",
                                                             "XRC_CMP_SWAP",
                                                             "XRC_FETCH_ADD",
                                                             "XRC_SEND_LAST_INVAL",
                                                             "XRC_SEND_ONLY_INVAL"};

constexpr OpcodeInfo make_xrc_info(std::string_view name, OpcodeRow row) {
  row.opcode = static_cast<std::uint8_t>(0xA0 | row.opcode);
  const bool request =
      row.operation == Operation::kSend || row.operation == Operation::kRdmaWrite ||
      row.operation == Operation::kRdmaReadRequest || row.operation == Operation::kCompareSwap ||
      row.operation == Operation::kFetchAdd;
  if (request) row.headers = static_cast<std::uint16_t>(row.headers | ext_bit(ExtHeader::kXrcEth));
  return make_info(name, row);
}

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
  for (std::size_t i = 0; i < kSendWriteOps.size(); ++i) {
    const OpcodeRow& row = kSendWriteOps[i];
    t[row.opcode] = make_info(kRcNames[i], row);
    t[0x20 | row.opcode] = make_info(kUcNames[i], row);
    t[0xA0 | row.opcode] = make_xrc_info(kXrcNames[i], row);
  }
  for (const OpcodeRow& row : kOtherOps) t[row.opcode] = make_info(row.name, row);
  for (std::size_t i = 0; i < kXrcOtherNames.size(); ++i)
    t[0xA0 | kOtherOps[i].opcode] = make_xrc_info(kXrcOtherNames[i], kOtherOps[i]);
  t[0x81] = make_info("CNP", {0x81, "CNP", Operation::kCnp, Position::kNone,
                              ext_bit(ExtHeader::kCnpReserved), false});
  t[0xE0] = make_info("SELECTIVE_ACKNOWLEDGE",
                      {0xE0, "SELECTIVE_ACKNOWLEDGE", Operation::kSelectiveAcknowledge,
                       Position::kOnly, kAeth | ext_bit(ExtHeader::kSackEth), false});
  return t;
}

}  // namespace detail

/// The opcode table, indexed by the BTH opcode byte. Rows of opcodes uroce
/// does not know have valid() == false.
inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_opcode_table();

constexpr const OpcodeInfo& opcode_info(std::uint8_t opcode) { return kOpcodeTable[opcode]; }
constexpr const OpcodeInfo& opcode_info(Opcode opcode) {
  return kOpcodeTable[static_cast<std::uint8_t>(opcode)];
}

// The table against IBA Table 35 and rxe_opcode.c.
static_assert(opcode_info(Opcode::kRcSendOnly).length == 12);
static_assert(opcode_info(Opcode::kRcRdmaWriteOnlyWithImmediate).length == 12 + 16 + 4);
static_assert(opcode_info(Opcode::kRcRdmaWriteOnlyWithImmediate).offset_of(ExtHeader::kImmDt) ==
              28);
static_assert(opcode_info(Opcode::kUcRdmaWriteFirst).offset_of(ExtHeader::kReth) == 12);
static_assert(opcode_info(Opcode::kRcRdmaReadRequest).length == 28);
static_assert(opcode_info(Opcode::kRcRdmaReadResponseMiddle).length == 12);
static_assert(opcode_info(Opcode::kRcAcknowledge).length == 16);
static_assert(opcode_info(Opcode::kSelectiveAcknowledge).length == 48);
static_assert(opcode_info(Opcode::kSelectiveAcknowledge).offset_of(ExtHeader::kSackEth) == 16);
static_assert(opcode_info(Opcode::kRcAtomicAcknowledge).length == 24);
static_assert(opcode_info(Opcode::kRcAtomicAcknowledge).offset_of(ExtHeader::kAtomicAckEth) == 16);
static_assert(opcode_info(Opcode::kRcCompareSwap).length == 40);
static_assert(opcode_info(Opcode::kRcSendOnlyWithInvalidate).offset_of(ExtHeader::kIeth) == 12);
static_assert(opcode_info(Opcode::kUdSendOnlyWithImmediate).length == 24);
static_assert(opcode_info(Opcode::kUdSendOnlyWithImmediate).offset_of(ExtHeader::kImmDt) == 20);
static_assert(opcode_info(Opcode::kCnp).length == 28 && !opcode_info(Opcode::kCnp).has_payload);
static_assert(!opcode_info(0x15).valid() && !opcode_info(0x2C).valid() &&
              !opcode_info(0x60).valid() && !opcode_info(0x80).valid());
static_assert(transport_of(0x64) == Transport::kUd && transport_of(0x81) == Transport::kCnp);
// XRC (IBA A14.8.1): the XRCETH follows the BTH in requests only.
static_assert(opcode_info(0xA4).length == 16 &&
              opcode_info(0xA4).offset_of(ExtHeader::kXrcEth) == 12);
static_assert(opcode_info(0xAB).length == 12 + 4 + 16 + 4 &&
              opcode_info(0xAB).offset_of(ExtHeader::kReth) == 16);
static_assert(opcode_info(0xB3).length == 12 + 4 + 28);
static_assert(opcode_info(0xB1).length == 16 && !opcode_info(0xB1).has(ExtHeader::kXrcEth));
static_assert(opcode_info(0xB0).operation == Operation::kRdmaReadResponse);
static_assert(!opcode_info(0xB5).valid() && !opcode_info(0xB8).valid());
static_assert(with_transport(Opcode::kRcAcknowledge, Transport::kXrc) == 0xB1);

// Rules that hold across the whole table.
consteval bool table_is_consistent() {
  for (unsigned op = 0; op < 256; ++op) {
    const OpcodeInfo& i = kOpcodeTable[op];
    if (!i.valid()) continue;
    // Every header lies inside the header length, in order, without overlap.
    unsigned end = kBthSize;
    for (unsigned h = 0; h < static_cast<unsigned>(ExtHeader::kCount); ++h) {
      if (!(i.headers & (1u << h))) continue;
      if (i.offset[h] != end) return false;
      end += kExtHeaderSize[h];
    }
    if (end != i.length) return false;
    // Only the first and only packets of a write carry a RETH; UC has no
    // reads, atomics or acknowledgements; UD has only SEND_ONLY.
    if (i.operation == Operation::kRdmaWrite && i.has(ExtHeader::kReth) != i.starts_message())
      return false;
    const Transport t = transport_of(static_cast<std::uint8_t>(op));
    if (t == Transport::kUc && i.operation != Operation::kSend &&
        i.operation != Operation::kRdmaWrite)
      return false;
    if (t == Transport::kUd && (i.operation != Operation::kSend || i.position != Position::kOnly ||
                                !i.has(ExtHeader::kDeth)))
      return false;
    // Immediate data and invalidate only end a message.
    if ((i.has_immediate() || i.has_invalidate()) && !i.ends_message()) return false;
    // Every XRC request, and nothing else, names its XRC SRQ.
    if (i.has(ExtHeader::kXrcEth) != (t == Transport::kXrc && i.is_request())) return false;
    if (t == Transport::kXrc) {
      const OpcodeInfo& rc = kOpcodeTable[op & 0x1F];
      if (!rc.valid() || rc.operation != i.operation || rc.position != i.position ||
          (rc.headers | ext_bit(ExtHeader::kXrcEth)) != (i.headers | ext_bit(ExtHeader::kXrcEth)))
        return false;
    }
  }
  return true;
}
static_assert(table_is_consistent());

}  // namespace uroce::wire
