/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The InfiniBand transport headers a RoCEv2 packet carries after UDP: the
// Base Transport Header and the extension headers (IBA 9.2-9.3). Each is a plain struct with
// parse() from and write() to wire bytes; sizes and offsets come from the opcode table.

#include <array>
#include <cstdint>

#include "wire/aeth_syndrome.h"
#include "wire/bytes.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace uroce::wire {

inline constexpr std::uint16_t kDefaultPkey = 0xFFFF;
inline constexpr std::uint32_t kGsiQkey = 0x80010000;
inline constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;
/// QP 1, the General Services Interface: where management datagrams (the
/// CM's MADs) go (IBA 3.10.1).
inline constexpr std::uint32_t kGsiQpn = 1;

/// Base Transport Header (12 bytes).
struct Bth {
  std::uint8_t opcode = 0;
  bool se = false;  ///< solicited event
  bool mig_req = false;
  std::uint8_t pad_count = 0;  ///< 0..3 bytes of pad before the ICRC
  std::uint8_t tver = 0;       ///< transport header version, must be 0
  std::uint16_t pkey = kDefaultPkey;
  bool fecn = false;          ///< RoCEv2: not used by uroce on send
  bool becn = false;          ///< RoCEv2: set in CNPs
  std::uint32_t dest_qp = 0;  ///< 24 bits
  bool ack_req = false;
  /// uroce: the requester offers selective repeat (docs/transport.md). The
  /// top bit of the 7 IBA reserves after AckReq; a receiver that does not
  /// know it ignores it (Linux rxe reads only AckReq from that byte).
  bool selective_repeat = false;
  Psn psn;

  static Bth parse(const std::uint8_t* p) {
    Bth b;
    b.opcode = p[0];
    b.se = (p[1] & 0x80) != 0;
    b.mig_req = (p[1] & 0x40) != 0;
    b.pad_count = (p[1] >> 4) & 3;
    b.tver = p[1] & 0x0F;
    b.pkey = load_be16(p + 2);
    b.fecn = (p[4] & 0x80) != 0;
    b.becn = (p[4] & 0x40) != 0;
    b.dest_qp = load_be24(p + 5);
    b.ack_req = (p[8] & 0x80) != 0;
    b.selective_repeat = (p[8] & 0x40) != 0;
    b.psn = Psn(load_be24(p + 9));
    return b;
  }
  void write(std::uint8_t* p) const {
    p[0] = opcode;
    p[1] = static_cast<std::uint8_t>((se ? 0x80 : 0) | (mig_req ? 0x40 : 0) | (pad_count & 3) << 4 |
                                     (tver & 0x0F));
    store_be16(p + 2, pkey);
    p[4] = static_cast<std::uint8_t>((fecn ? 0x80 : 0) | (becn ? 0x40 : 0));
    store_be24(p + 5, dest_qp);
    p[8] = static_cast<std::uint8_t>((ack_req ? 0x80 : 0) | (selective_repeat ? 0x40 : 0));
    store_be24(p + 9, psn.value());
  }
};

/// RDMA Extended Transport Header (16 bytes).
struct Reth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t dma_length = 0;

  static Reth parse(const std::uint8_t* p) {
    return {load_be64(p), load_be32(p + 8), load_be32(p + 12)};
  }
  void write(std::uint8_t* p) const {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be32(p + 12, dma_length);
  }
};

/// Atomic Extended Transport Header (28 bytes). For FETCH_ADD,
/// swap_add is the addend and compare is unused.
struct AtomicEth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0;
  std::uint64_t compare = 0;

  static AtomicEth parse(const std::uint8_t* p) {
    return {load_be64(p), load_be32(p + 8), load_be64(p + 12), load_be64(p + 20)};
  }
  void write(std::uint8_t* p) const {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be64(p + 12, swap_add);
    store_be64(p + 20, compare);
  }
};

/// ACK Extended Transport Header (4 bytes).
struct Aeth {
  AethSyndrome syndrome;
  std::uint32_t msn = 0;  ///< 24 bits

  static Aeth parse(const std::uint8_t* p) {
    return {AethSyndrome::decode(p[0]), load_be24(p + 1)};
  }
  void write(std::uint8_t* p) const {
    p[0] = syndrome.encode();
    store_be24(p + 1, msn);
  }
};

/// Atomic ACK Extended Transport Header (8 bytes): the remote value the
/// atomic found before it executed.
struct AtomicAckEth {
  std::uint64_t orig_remote_data = 0;

  static AtomicAckEth parse(const std::uint8_t* p) { return {load_be64(p)}; }
  void write(std::uint8_t* p) const { store_be64(p, orig_remote_data); }
};

/// uroce's Selective Acknowledgement Extended Transport Header (32 bytes),
/// after the AETH of a SELECTIVE_ACKNOWLEDGE: which of the 256 PSNs after
/// the BTH's the responder holds. Bit i stands for PSN (BTH PSN + 1 + i):
/// bit 7 - i % 8 of byte i / 8, the first PSN first.
///
/// A view of the 32 bytes (in the frame a packet was parsed from, or in
/// the sender's buffer until the frame is built), so that the headers of
/// every other packet do not carry them.
struct SackEth {
  static constexpr unsigned kBits = 256;
  static constexpr std::size_t kSize = kBits / 8;
  const std::uint8_t* bytes = nullptr;  ///< kSize bytes; null reads as all clear

  bool test(unsigned i) const { return bytes && (bytes[i / 8] >> (7 - i % 8) & 1) != 0; }
  static void set(std::uint8_t* buf, unsigned i) {
    buf[i / 8] = static_cast<std::uint8_t>(buf[i / 8] | 0x80u >> (i % 8));
  }

  static SackEth parse(const std::uint8_t* p) { return {p}; }
  void write(std::uint8_t* p) const {
    for (std::size_t k = 0; k < kSize; ++k) p[k] = bytes ? bytes[k] : 0;
  }
};

/// Datagram Extended Transport Header (8 bytes).
struct Deth {
  std::uint32_t qkey = 0;
  std::uint32_t src_qp = 0;  ///< 24 bits

  static Deth parse(const std::uint8_t* p) { return {load_be32(p), load_be24(p + 5)}; }
  void write(std::uint8_t* p) const {
    store_be32(p, qkey);
    p[4] = 0;
    store_be24(p + 5, src_qp);
  }
};

/// The extension headers of one packet. Which members are meaningful is
/// decided by the opcode (OpcodeInfo::headers); the others are ignored on
/// write and left default on parse.
struct ExtHeaders {
  Deth deth;
  std::uint32_t xrc_srqn = 0;  ///< XRCETH: the XRC SRQ's number (24 bits)
  Reth reth;
  AtomicEth atomic_eth;
  Aeth aeth;
  AtomicAckEth atomic_ack_eth;
  std::uint32_t imm_data = 0;   ///< ImmDt, kept in wire (big-endian) order as verbs does
  std::uint32_t ieth_rkey = 0;  ///< IETH: the R_Key to invalidate
  SackEth sack;

  /// Decodes the headers `info` lists from `bth`, the start of the BTH.
  static ExtHeaders parse(const OpcodeInfo& info, const std::uint8_t* bth);
  /// Writes the headers `info` lists after the BTH at `bth`.
  void write(const OpcodeInfo& info, std::uint8_t* bth) const;
};

}  // namespace uroce::wire
