/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the fuzz targets share with each other and with the program that
// writes their seed corpus (make_corpus.cc): a reader of the fuzzer's
// bytes and its mirror-image writer, resealing a frame's checksums and
// ICRC so that mutated frames reach the checks behind them, and one
// encoding of a RoCEv2 packet's fields (opcode, PSN, keys, addresses,
// payload) that both the engine and the transport targets decode.

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/bytes.h"
#include "wire/classify.h"
#include "wire/icrc.h"
#include "wire/ip.h"
#include "wire/opcode.h"
#include "wire/roce_frame.h"

namespace uroce::fuzz {

// A broken invariant: a crash, for libFuzzer to keep the input.
#define FUZZ_CHECK(cond)       \
  do {                         \
    if (!(cond)) std::abort(); \
  } while (0)

/// Reads the fuzzer's bytes; past their end every read is 0.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  std::size_t left() const { return n_; }
  std::uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() << 8 | u8()); }
  std::uint32_t u24() { return std::uint32_t{u8()} << 16 | u16(); }
  std::uint32_t u32() { return std::uint32_t{u16()} << 16 | u16(); }
  std::uint64_t u64() { return std::uint64_t{u32()} << 32 | u32(); }
  /// Up to `n` bytes, fewer at the end.
  wire::ConstBytes take(std::size_t n) {
    if (n > n_) n = n_;
    const wire::ConstBytes b(p_, n);
    p_ += n;
    n_ -= n;
    return b;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

/// Writes what Input reads, in the same order.
class Output {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    u8(static_cast<std::uint8_t>(v >> 8));
    u8(static_cast<std::uint8_t>(v));
  }
  void u24(std::uint32_t v) {
    u8(static_cast<std::uint8_t>(v >> 16));
    u16(static_cast<std::uint16_t>(v));
  }
  void u32(std::uint32_t v) {
    u16(static_cast<std::uint16_t>(v >> 16));
    u16(static_cast<std::uint16_t>(v));
  }
  void u64(std::uint64_t v) {
    u32(static_cast<std::uint32_t>(v >> 32));
    u32(static_cast<std::uint32_t>(v));
  }
  void bytes(wire::ConstBytes b) { out_.insert(out_.end(), b.begin(), b.end()); }
  const std::vector<std::uint8_t>& data() const { return out_; }

 private:
  std::vector<std::uint8_t> out_;
};

/// Recomputes, where the frame's own lengths say they are and as far as
/// the frame holds them, the IPv4 header checksum, the ICMPv6 checksum
/// and the RoCEv2 ICRC: mutated frames then get past those checks.
inline void reseal(std::vector<std::uint8_t>& f) {
  const wire::FrameClass c = wire::classify(f);
  if (!c.ip()) return;
  const std::size_t l3 = c.l3_offset();
  std::size_t ip_len;
  if (c.ip_version == 4) {
    wire::store_be16(f.data() + l3 + 10, 0);
    wire::store_be16(f.data() + l3 + 10, wire::inet_checksum(f.data() + l3, c.l3_len));
    ip_len = wire::load_be16(f.data() + l3 + 2);
  } else {
    ip_len = 40 + std::size_t{wire::load_be16(f.data() + l3 + 4)};
  }
  if (ip_len < c.l3_len + 8u || l3 + ip_len > f.size()) return;
  const std::size_t l4 = c.l4_offset();
  if (c.ip_version == 6 && c.l4_proto == wire::ip_proto::kIcmpv6) {
    wire::IpAddr src, dst;
    std::memcpy(src.bytes.data(), f.data() + l3 + 8, 16);
    std::memcpy(dst.bytes.data(), f.data() + l3 + 24, 16);
    wire::store_be16(f.data() + l4 + 2, 0);
    const wire::ConstBytes seg(f.data() + l4, l3 + ip_len - l4);
    wire::store_be16(f.data() + l4 + 2,
                     wire::ip6_checksum(src, dst, wire::ip_proto::kIcmpv6, std::span(&seg, 1)));
    return;
  }
  if (c.l4_proto != wire::ip_proto::kUdp || ip_len < 4) return;
  const std::size_t icrc_at = l3 + ip_len - 4;
  wire::icrc_store(f.data() + icrc_at,
                   wire::icrc_compute(wire::ConstBytes(f).subspan(l3, icrc_at - l3)));
}

/// The action bytes of fuzz_transport_rx (transport_rx_fuzz.cc), taken
/// modulo 8 there (0 to 2 all deliver a packet).
namespace transport_action {
inline constexpr std::uint8_t kPacket = 0;
inline constexpr std::uint8_t kPostRecv = 3;
inline constexpr std::uint8_t kPostSend = 4;
inline constexpr std::uint8_t kTransmit = 5;
inline constexpr std::uint8_t kTime = 6;
inline constexpr std::uint8_t kModify = 7;
}  // namespace transport_action

/// The record modes of fuzz_engine_rx (engine_rx_fuzz.cc), modulo 4.
namespace engine_record {
inline constexpr std::uint8_t kRaw = 0;
inline constexpr std::uint8_t kResealed = 1;
inline constexpr std::uint8_t kPacket = 2;
inline constexpr std::uint8_t kTime = 3;
}  // namespace engine_record

/// Every valid BTH opcode, in order: a packet names its opcode by index.
inline const std::vector<std::uint8_t>& opcodes() {
  static const std::vector<std::uint8_t> ops = [] {
    std::vector<std::uint8_t> v;
    for (unsigned op = 0; op < 256; ++op) {
      if (wire::opcode_info(static_cast<std::uint8_t>(op)).valid())
        v.push_back(static_cast<std::uint8_t>(op));
    }
    return v;
  }();
  return ops;
}

inline std::uint8_t opcode_index(std::uint8_t op) {
  const auto& ops = opcodes();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] == op) return static_cast<std::uint8_t>(i);
  }
  std::abort();
}

/// What a packet's fields are chosen from: the receiver's QPs, its keys
/// and the addresses of its memory. A selector byte below 0xF0 picks one
/// of these; 0xF0 and above read a raw value instead.
struct Targets {
  std::vector<std::uint32_t> qpns;       ///< dest_qp choices
  std::uint32_t psn_base = 0;            ///< PSN of a request: psn_base + delta
  std::uint32_t response_psn_base = 0;   ///< PSN of a response (ACK, READ response)
  std::vector<std::uint32_t> keys;       ///< R_Key choices (RETH, AtomicETH, IETH)
  std::vector<std::uint64_t> addresses;  ///< VA bases (RETH, AtomicETH)
  std::uint32_t qkey = 0;
  std::uint32_t max_payload = 4096;
  std::vector<std::uint32_t> srqns;  ///< XRCETH SRQ number choices
};

inline constexpr std::uint8_t kRaw = 0xF0;

/// A packet as the fuzzer describes it.
struct Packet {
  wire::Bth bth;
  wire::ExtHeaders ext;
  std::array<std::uint8_t, wire::SackEth::kSize> sack{};  ///< a SACKETH's (frame_of points at it)
  std::vector<std::uint8_t> payload;
};

/// The fields of one packet. Layout: opcode index, flags (ack_req, se,
/// mig_req, fecn, becn; the top three bits pick the QP, and the top one
/// also offers selective repeat), PSN delta (signed 16), then each extension header the opcode
/// has (an XRCETH's SRQ number picked from the targets' or raw; a
/// SACKETH's 32 bytes), then the
/// payload length (16 bits, modulo max_payload + 64) and as many payload
/// bytes as the input still holds (the rest a pattern).
inline Packet read_packet(Input& in, const Targets& t) {
  Packet p;
  const auto& ops = opcodes();
  p.bth.opcode = ops[in.u8() % ops.size()];
  const std::uint8_t flags = in.u8();
  p.bth.ack_req = flags & 1;
  p.bth.se = flags & 2;
  p.bth.mig_req = flags & 4;
  p.bth.fecn = flags & 8;
  p.bth.becn = flags & 16;
  p.bth.dest_qp = t.qpns.empty() ? 0 : t.qpns[(flags >> 5) % t.qpns.size()];
  p.bth.selective_repeat = flags & 128;
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  const bool response = info.has(wire::ExtHeader::kAeth) || info.operation == wire::Operation::kCnp;
  const auto delta = static_cast<std::int16_t>(in.u16());
  p.bth.psn = wire::Psn((response ? t.response_psn_base : t.psn_base) +
                        static_cast<std::uint32_t>(static_cast<std::int32_t>(delta)));
  auto key = [&] {
    const std::uint8_t sel = in.u8();
    return sel >= kRaw || t.keys.empty() ? in.u32() : t.keys[sel % t.keys.size()];
  };
  auto va = [&] {
    const std::uint8_t sel = in.u8();
    const auto off = static_cast<std::int32_t>(in.u32());
    if (sel >= kRaw || t.addresses.empty()) return in.u64();
    return t.addresses[sel % t.addresses.size()] + static_cast<std::uint64_t>(std::int64_t{off});
  };
  if (info.has(wire::ExtHeader::kXrcEth)) {
    const std::uint8_t sel = in.u8();
    p.ext.xrc_srqn = sel >= kRaw || t.srqns.empty() ? in.u24() : t.srqns[sel % t.srqns.size()];
  }
  if (info.has(wire::ExtHeader::kDeth)) {
    const std::uint8_t sel = in.u8();
    p.ext.deth.qkey = sel >= kRaw ? in.u32() : t.qkey;
    p.ext.deth.src_qp = in.u24();
  }
  if (info.has(wire::ExtHeader::kReth)) {
    p.ext.reth.rkey = key();
    p.ext.reth.va = va();
    p.ext.reth.dma_length = in.u32();
  }
  if (info.has(wire::ExtHeader::kAtomicEth)) {
    p.ext.atomic_eth.rkey = key();
    p.ext.atomic_eth.va = va();
    p.ext.atomic_eth.swap_add = in.u64();
    p.ext.atomic_eth.compare = in.u64();
  }
  if (info.has(wire::ExtHeader::kAeth)) {
    p.ext.aeth.syndrome = wire::AethSyndrome::decode(in.u8());
    p.ext.aeth.msn = in.u24();
  }
  if (info.has(wire::ExtHeader::kAtomicAckEth)) p.ext.atomic_ack_eth.orig_remote_data = in.u64();
  if (info.has(wire::ExtHeader::kImmDt)) p.ext.imm_data = in.u32();
  if (info.has(wire::ExtHeader::kIeth)) p.ext.ieth_rkey = key();
  if (info.has(wire::ExtHeader::kSackEth)) {
    for (std::uint8_t& b : p.sack) b = in.u8();
  }
  const std::size_t len = info.has_payload ? in.u16() % (t.max_payload + 64) : 0;
  p.payload.resize(len);
  const wire::ConstBytes given = in.take(len);
  for (std::size_t i = 0; i < len; ++i)
    p.payload[i] = i < given.size() ? given[i] : static_cast<std::uint8_t>(i * 7 + 1);
  return p;
}

/// The generator's side of read_packet: `key_index`/`va_index` pick from
/// the targets (kRaw for the raw values given), the payload is `payload`.
struct PacketChoice {
  std::uint8_t opcode = 0;
  std::uint8_t flags = 0;  ///< as read_packet reads them; bits 5-7 the QP
  std::int16_t psn_delta = 0;
  std::uint8_t key_index = 0;
  std::uint32_t raw_key = 0;
  std::uint8_t va_index = 0;
  std::int32_t va_offset = 0;
  std::uint64_t raw_va = 0;
  std::uint32_t dma_length = 0;
  std::uint64_t swap_add = 0, compare = 0;
  std::uint8_t syndrome = 0;
  std::uint32_t msn = 0;
  std::uint64_t orig_remote_data = 0;
  std::uint32_t imm = 0;
  std::uint8_t qkey_index = 0;
  std::uint32_t raw_qkey = 0;
  std::uint32_t src_qp = 0;
  std::uint8_t srqn_index = 0;
  std::uint32_t raw_srqn = 0;
  std::array<std::uint8_t, wire::SackEth::kSize> sack{};  ///< the SACKETH's bytes
  std::vector<std::uint8_t> payload;
};

inline void write_packet(Output& out, const PacketChoice& c) {
  const wire::OpcodeInfo& info = wire::opcode_info(c.opcode);
  out.u8(opcode_index(c.opcode));
  out.u8(c.flags);
  out.u16(static_cast<std::uint16_t>(c.psn_delta));
  auto key = [&] {
    out.u8(c.key_index);
    if (c.key_index >= kRaw) out.u32(c.raw_key);
  };
  auto va = [&] {
    out.u8(c.va_index);
    out.u32(static_cast<std::uint32_t>(c.va_offset));
    if (c.va_index >= kRaw) out.u64(c.raw_va);
  };
  if (info.has(wire::ExtHeader::kXrcEth)) {
    out.u8(c.srqn_index);
    if (c.srqn_index >= kRaw) out.u24(c.raw_srqn);
  }
  if (info.has(wire::ExtHeader::kDeth)) {
    out.u8(c.qkey_index);
    if (c.qkey_index >= kRaw) out.u32(c.raw_qkey);
    out.u24(c.src_qp);
  }
  if (info.has(wire::ExtHeader::kReth)) {
    key();
    va();
    out.u32(c.dma_length);
  }
  if (info.has(wire::ExtHeader::kAtomicEth)) {
    key();
    va();
    out.u64(c.swap_add);
    out.u64(c.compare);
  }
  if (info.has(wire::ExtHeader::kAeth)) {
    out.u8(c.syndrome);
    out.u24(c.msn);
  }
  if (info.has(wire::ExtHeader::kAtomicAckEth)) out.u64(c.orig_remote_data);
  if (info.has(wire::ExtHeader::kImmDt)) out.u32(c.imm);
  if (info.has(wire::ExtHeader::kIeth)) key();
  if (info.has(wire::ExtHeader::kSackEth)) {
    for (std::uint8_t b : c.sack) out.u8(b);
  }
  if (info.has_payload) {
    out.u16(static_cast<std::uint16_t>(c.payload.size()));
    out.bytes(c.payload);
  }
}

/// The frame of `p` along `route` (built by lib/wire's one builder).
inline std::vector<std::uint8_t> frame_of(const Packet& p, const wire::RoceRoute& route,
                                          std::uint16_t ip_id = 1) {
  const wire::OpcodeInfo& info = wire::opcode_info(p.bth.opcode);
  std::vector<std::uint8_t> f(wire::roce_frame_length(route, info, p.payload.size()));
  wire::ExtHeaders ext = p.ext;
  ext.sack.bytes = p.sack.data();
  FUZZ_CHECK(wire::build_roce_frame(f, route, p.bth, ext, p.payload, ip_id) == f.size());
  return f;
}

}  // namespace uroce::fuzz
