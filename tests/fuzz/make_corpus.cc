/* SPDX-License-Identifier: BSD-3-Clause */
// Writes the seed corpus of the fuzz targets, one directory per target:
//
//   make_fuzz_corpus DIR        (DIR/fuzz_wire_parser/..., DIR/fuzz_ndp/...)
//
// The seeds are what the targets should start from: every frame of the
// rxe capture (tests/data), a frame of every opcode from lib/wire's
// builder over IPv4, IPv6 and 802.1Q, jumbo frames up to 9216 bytes, the
// control frames (PFC, PAUSE, ARP, neighbour discovery, ICMP echo), and
// for the engine and transport targets whole exchanges in their input
// encodings (fuzz_input.h): a SEND into a posted receive, WRITEs, READs
// and atomics against each region, ACKs, NAKs and READ responses for
// posted WRs, timeouts. The output is the same on every run; ctest's
// fuzz.corpus_is_current checks that tests/fuzz/corpus is what it writes.

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "support/pcap.h"
#include "support/wire_samples.h"
#include "transport/types.h"
#include "wire/arp.h"
#include "wire/mac_control.h"
#include "wire/ndp.h"

using namespace uroce;
using namespace uroce::fuzz;
using Frame = std::vector<std::uint8_t>;
using wire::Opcode;

namespace {

std::string g_dir;

void write(const std::string& target, const std::string& name, const Frame& bytes) {
  const std::string d = g_dir + "/" + target;
  mkdir(d.c_str(), 0755);
  std::ofstream(d + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

Frame with_byte(std::uint8_t b, const Frame& f) {
  Frame out(1 + f.size());
  out[0] = b;
  std::copy(f.begin(), f.end(), out.begin() + 1);
  return out;
}

// Two digits at least. (Not "0" + std::to_string(i): GCC 12's -Wrestrict
// misreads that at -O3.)
std::string num(std::size_t i) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%02zu", i);
  return buf;
}

std::uint8_t op(Opcode o) { return static_cast<std::uint8_t>(o); }

// --- frames -----------------------------------------------------------------

const wire::MacAddr kMacA = {{0x02, 0xAA, 0, 0, 0, 1}};
const wire::MacAddr kMacB = {{0x02, 0xBB, 0, 0, 0, 2}};

// A frame of every opcode over IPv4, and of a few over IPv6 and tagged.
std::vector<std::pair<std::string, Frame>> builder_frames() {
  std::vector<std::pair<std::string, Frame>> out;
  std::mt19937_64 rng(2024);
  for (std::uint8_t o : test::all_opcodes()) {
    out.push_back({"op" + num(o) + "-v4",
                   test::build_frame(test::sample_route(false), test::sample_packet(o, rng))});
  }
  for (Opcode o : {Opcode::kRcSendOnly, Opcode::kRcRdmaWriteOnly, Opcode::kRcRdmaReadRequest,
                   Opcode::kRcAcknowledge, Opcode::kUdSendOnly, Opcode::kCnp}) {
    out.push_back({"op" + num(op(o)) + "-v6",
                   test::build_frame(test::sample_route(true), test::sample_packet(op(o), rng))});
    out.push_back(
        {"op" + num(op(o)) + "-v4-vlan",
         test::build_frame(test::sample_route(false, true), test::sample_packet(op(o), rng))});
  }
  return out;
}

// RoCEv2 jumbo frames: a 9000-byte WRITE over IPv4, an 8192-byte SEND over
// tagged IPv6; and a 9216-byte Ethernet frame that is UDP but not RoCEv2.
std::vector<std::pair<std::string, Frame>> jumbo_frames() {
  std::vector<std::pair<std::string, Frame>> out;
  std::mt19937_64 rng(9000);
  test::SamplePacket w = test::sample_packet(op(Opcode::kRcRdmaWriteOnly), rng);
  w.payload.assign(9000, 0x5A);
  out.push_back({"jumbo-write-9000", test::build_frame(test::sample_route(false), w)});
  test::SamplePacket s = test::sample_packet(op(Opcode::kRcSendOnly), rng);
  s.payload.assign(8192, 0x3C);
  out.push_back({"jumbo-send-8192-v6-vlan", test::build_frame(test::sample_route(true, true), s)});
  Frame udp(9216, 0);
  std::copy(kMacB.bytes.begin(), kMacB.bytes.end(), udp.begin());
  std::copy(kMacA.bytes.begin(), kMacA.bytes.end(), udp.begin() + 6);
  wire::store_be16(udp.data() + 12, wire::ether_type::kIpv4);
  wire::Ipv4Hdr ip;
  ip.total_length = 9216 - 14;
  ip.protocol = wire::ip_proto::kUdp;
  ip.src = 0x0A000002;
  ip.dst = 0x0A000001;
  ip.write(udp.data() + 14);
  wire::store_be16(udp.data() + 34, 5000);
  wire::store_be16(udp.data() + 36, 5001);
  wire::store_be16(udp.data() + 38, 9216 - 34);
  out.push_back({"jumbo-udp-9216", udp});
  return out;
}

// An ICMP echo request from 10.0.0.2 to 10.0.0.1.
Frame echo_request() {
  Frame f(14 + 20 + 8 + 32, 0);
  std::copy(kMacA.bytes.begin(), kMacA.bytes.end(), f.begin());
  std::copy(kMacB.bytes.begin(), kMacB.bytes.end(), f.begin() + 6);
  wire::store_be16(f.data() + 12, wire::ether_type::kIpv4);
  wire::Ipv4Hdr ip;
  ip.total_length = 20 + 8 + 32;
  ip.protocol = wire::ip_proto::kIcmp;
  ip.src = 0x0A000002;
  ip.dst = 0x0A000001;
  ip.write(f.data() + 14);
  std::uint8_t* icmp = f.data() + 34;
  icmp[0] = 8;  // echo request
  wire::store_be16(icmp + 4, 0x1234);
  wire::store_be16(icmp + 6, 1);
  for (int i = 0; i < 32; ++i) icmp[8 + i] = static_cast<std::uint8_t>(i);
  wire::store_be16(icmp + 2, wire::inet_checksum(icmp, 40));
  return f;
}

// ARP, neighbour discovery, ICMP echo, PFC and PAUSE, from 10.0.0.2 or
// fd00::2 to 10.0.0.1 or fd00::1 (the engine target's addresses).
std::vector<std::pair<std::string, Frame>> control_frames() {
  std::vector<std::pair<std::string, Frame>> out;
  Frame arp(wire::kMinFrameSize);
  wire::build_arp_request(arp, kMacB, 0x0A000002, 0x0A000001);
  out.push_back({"arp-request", arp});
  wire::ArpPacket req;
  if (wire::parse_arp_frame(arp, req)) {
    Frame reply(wire::kMinFrameSize);
    wire::build_arp_reply(reply, req, kMacA, 0x0A000001);
    out.push_back({"arp-reply", reply});
  }
  const wire::IpAddr us = *wire::IpAddr::parse("fd00::1"), peer = *wire::IpAddr::parse("fd00::2");
  Frame ns(128);
  ns.resize(wire::build_neighbor_solicitation(ns, kMacB, peer, us));
  out.push_back({"ndp-solicitation", ns});
  wire::NdpPacket sol;
  if (wire::parse_ndp_frame(ns, sol)) {
    Frame na(128);
    na.resize(wire::build_neighbor_advertisement(na, sol, kMacA, us));
    out.push_back({"ndp-advertisement", na});
  }
  out.push_back({"icmp-echo-request", echo_request()});
  Frame pfc(wire::kMinFrameSize);
  std::array<std::uint16_t, 8> times{};
  times[3] = 0xFFFF;
  wire::build_pfc_frame(pfc, kMacB, 1u << 3, times);
  out.push_back({"pfc-xoff-3", pfc});
  times[3] = 0;
  Frame xon(wire::kMinFrameSize);
  wire::build_pfc_frame(xon, kMacB, 1u << 3, times);
  out.push_back({"pfc-xon-3", xon});
  Frame pause(wire::kMinFrameSize);
  wire::build_pause_frame(pause, kMacB, 0x1234);
  out.push_back({"pause", pause});
  return out;
}

std::vector<std::pair<std::string, Frame>> rxe_frames() {
  std::vector<std::pair<std::string, Frame>> out;
  const auto frames = test::read_pcap(UROCE_TESTDATA_DIR "/rxe-send-rc-ud-ipv4-ipv6.pcap");
  for (std::size_t i = 0; i < frames.size(); ++i) out.push_back({"rxe-" + num(i + 1), frames[i]});
  return out;
}

std::vector<std::pair<std::string, Frame>> all_frames() {
  auto out = rxe_frames();
  for (auto* more : {builder_frames, jumbo_frames, control_frames}) {
    for (auto& f : more()) out.push_back(std::move(f));
  }
  return out;
}

// --- the frame targets ------------------------------------------------------

void wire_parser() {
  for (const auto& [name, f] : all_frames()) write("fuzz_wire_parser", name, with_byte(0, f));
  // Resealed and structured modes (wire_parser_fuzz.cc).
  write("fuzz_wire_parser", "resealed-send", with_byte(1, rxe_frames()[0].second));
  for (std::uint8_t o :
       {op(Opcode::kRcSendOnly), op(Opcode::kRcRdmaReadRequest), op(Opcode::kRcAcknowledge)}) {
    Frame s = {2, opcode_index(o), 0x12, 0, 0, 0x11, 0, 0x01, 0};
    for (int i = 0; i < 64; ++i) s.push_back(static_cast<std::uint8_t>(i));
    write("fuzz_wire_parser", "structured-op" + num(o), s);
  }
}

void classify() {
  // Mode byte: bit 0 trusts PCP; (byte >> 1) % 3 is raw, resealed, built.
  for (const auto& [name, f] : all_frames()) write("fuzz_classify", name, with_byte(0, f));
  for (const auto& [name, f] : builder_frames()) {
    if (name.find("vlan") != std::string::npos)
      write("fuzz_classify", name + "-pcp", with_byte(1, f));
  }
  // Built RoCEv2 with each ECN codepoint, IPv4 and IPv6, tagged or not.
  for (std::uint8_t ecn = 0; ecn < 4; ++ecn) {
    for (std::uint8_t v6 : {0, 1}) {
      Output o;
      o.u8(4);  // built
      o.u8(static_cast<std::uint8_t>(ecn << 4 | v6 << 6 | (ecn & 1) | 3 << 1));
      o.u16(100);  // VID
      o.u8(26);    // DSCP
      o.u8(64);    // hop limit
      if (v6) {
        o.u24(0x12345);
      } else {
        o.u32(0x0A000001);
        o.u32(0x0A000002);
      }
      PacketChoice c;
      c.opcode = op(Opcode::kRcRdmaWriteOnly);
      c.dma_length = 64;
      c.payload.assign(64, 0x42);
      write_packet(o, c);
      o.u16(0x4321);  // IP ID
      write("fuzz_classify", "built-ecn" + num(ecn) + (v6 ? "-v6" : "-v4"), o.data());
    }
  }
}

void ndp() {
  // Mode 0 raw, 1 resealed, 2 solicitation built, 3 advertisement built.
  for (const auto& [name, f] : control_frames()) {
    if (name.rfind("ndp-", 0) == 0) write("fuzz_ndp", name, with_byte(0, f));
  }
  for (std::uint8_t mode : {2, 3}) {
    Output o;
    o.u8(mode);
    o.u8(2);  // not from ::, reseal after the flips
    for (int i = 0; i < 16; ++i) o.u8(i == 0 ? 0xfd : i == 15 ? 2 : 0);  // fd00::2
    for (int i = 0; i < 16; ++i) o.u8(i == 0 ? 0xfd : i == 15 ? 1 : 0);  // fd00::1
    for (std::uint8_t b : kMacB.bytes) o.u8(b);
    o.u8(3);  // three more options: a nonce, an unknown one, a source address
    for (std::uint8_t t : {14, 200, 1}) {
      o.u8(t);
      o.u8(1);
      for (int k = 0; k < 6; ++k) o.u8(static_cast<std::uint8_t>(t + k));
    }
    o.u8(0);  // no flips
    write("fuzz_ndp", mode == 2 ? "built-solicitation" : "built-advertisement", o.data());
  }
}

// --- the engine target ------------------------------------------------------

// Its QPs by index (the packet flags' top bits): RC, UC, UD over IPv4, RC
// over IPv6; keys: 0 the whole buffer, 1 a remote-read kilobyte.
constexpr std::uint8_t kRcQp = 0, kUcQp = 1 << 5, kUdQp = 2 << 5, kRc6Qp = 3 << 5;

void engine() {
  auto raw = [](Output& o, const Frame& f) {
    o.u8(engine_record::kRaw);
    o.u16(static_cast<std::uint16_t>(f.size()));
    o.bytes(f);
  };
  auto packet = [](Output& o, std::uint8_t route, const PacketChoice& c) {
    o.u8(engine_record::kPacket);
    o.u8(route);
    write_packet(o, c);
  };
  for (const auto& [name, f] : control_frames()) {
    Output o;
    raw(o, f);
    write("fuzz_engine_rx", name, o.data());
  }
  for (const auto& [name, f] : jumbo_frames()) {
    Output o;
    raw(o, f);
    write("fuzz_engine_rx", name, o.data());
  }
  {
    Output o;  // rxe's frames: for other addresses and QPs
    for (const auto& [name, f] : rxe_frames()) raw(o, f);
    write("fuzz_engine_rx", "rxe-all", o.data());
  }
  auto send = [](std::uint8_t qp, Opcode o, std::int16_t delta, std::size_t len) {
    PacketChoice c;
    c.opcode = op(o);
    c.flags = static_cast<std::uint8_t>(qp | 1);  // ack_req
    c.psn_delta = delta;
    c.payload.assign(len, 0x11);
    return c;
  };
  {
    Output o;  // a SEND into each QP's receive, over each route
    packet(o, 0, send(kRcQp, Opcode::kRcSendOnly, 0, 100));
    packet(o, 0, send(kUcQp, Opcode::kUcSendOnly, 0, 100));
    PacketChoice ud = send(kUdQp, Opcode::kUdSendOnly, 0, 100);
    ud.src_qp = 0x222;
    packet(o, 0, ud);
    packet(o, 1, send(kRc6Qp, Opcode::kRcSendOnly, 0, 100));
    packet(o, 2, send(kRcQp, Opcode::kRcSendOnly, 1, 100));  // tagged
    packet(o, 4, send(kRcQp, Opcode::kRcSendOnly, 2, 100));  // not our address
    write("fuzz_engine_rx", "send-each-qp", o.data());
  }
  {
    Output o;  // a three-packet SEND, then a WRITE, a READ and the atomics
    packet(o, 0, send(kRcQp, Opcode::kRcSendFirst, 0, 1024));
    packet(o, 0, send(kRcQp, Opcode::kRcSendMiddle, 1, 1024));
    packet(o, 0, send(kRcQp, Opcode::kRcSendLast, 2, 10));
    PacketChoice w = send(kRcQp, Opcode::kRcRdmaWriteOnly, 3, 512);
    w.dma_length = 512;
    packet(o, 0, w);
    PacketChoice r = send(kRcQp, Opcode::kRcRdmaReadRequest, 4, 0);
    r.dma_length = 3000;
    packet(o, 0, r);
    PacketChoice cas = send(kRcQp, Opcode::kRcCompareSwap, 7, 0);
    cas.swap_add = 5;
    packet(o, 0, cas);
    PacketChoice faa = send(kRcQp, Opcode::kRcFetchAdd, 8, 0);
    faa.swap_add = 1;
    packet(o, 0, faa);
    o.u8(engine_record::kTime);
    o.u16(100);
    write("fuzz_engine_rx", "rc-operations", o.data());
  }
  {
    Output o;  // an ACK, a NAK and an out-of-sequence request
    PacketChoice ack = send(kRcQp, Opcode::kRcAcknowledge, 0, 0);
    ack.syndrome = 0x1F;
    packet(o, 0, ack);
    PacketChoice nak = send(kRcQp, Opcode::kRcAcknowledge, 0, 0);
    nak.syndrome = 0x60;
    packet(o, 0, nak);
    packet(o, 0, send(kRcQp, Opcode::kRcSendOnly, 5, 10));
    write("fuzz_engine_rx", "rc-acks-and-gaps", o.data());
  }
}

// --- the transport target ---------------------------------------------------

// Its keys by index: 0 page 1 (all access), 1 page 0's first 64 bytes
// (write), 2 page 0 (read), 3 page 2's last 1000 bytes (zero-based, all),
// 4 another PD's, 5 deregistered. Its VA bases: 0 page 1, 1 page 0, 2
// zero, 3 the zero-based region's last 8 bytes, 4 page 1's last 8, 5 just
// before page 0, 6 page 2.
struct Transport {
  Output o;
  explicit Transport(std::uint8_t setup) {
    o.u8(setup);
    o.u8(3);  // max_dest_rd_atomic 4
    o.u8(3);  // max_rd_atomic 4
  }
  void packet(const PacketChoice& c) {
    o.u8(transport_action::kPacket);
    write_packet(o, c);
  }
  void post_recv(std::uint16_t len) {
    o.u8(transport_action::kPostRecv);
    o.u8(1);  // one SGE
    o.u16(0);
    o.u16(len);
    o.u8(0);  // the local key
  }
  void post_send(transport::WrOpcode wr, std::uint16_t len, std::uint64_t remote = 0) {
    o.u8(transport_action::kPostSend);
    o.u8(static_cast<std::uint8_t>(wr));
    o.u8(transport::send_flags::kSignaled);
    o.u8(1);
    o.u16(0);
    o.u16(len);
    o.u8(0);
    o.u32(0x01020304);  // immediate
    o.u32(0);           // invalidate
    o.u64(remote);
    o.u32(0x1000);  // rkey
    o.u64(1);       // compare/add
    o.u64(2);       // swap
  }
  void transmit() {
    o.u8(transport_action::kTransmit);
    o.u8(63);
  }
  void time(std::uint16_t us) {
    o.u8(transport_action::kTime);
    o.u16(us);
  }
};

PacketChoice request(Opcode o, std::int16_t delta, std::size_t len, std::uint8_t key = 0,
                     std::uint8_t va = 0, std::int32_t off = 0, std::uint32_t dma = 0) {
  PacketChoice c;
  c.opcode = op(o);
  c.flags = 1;  // ack_req
  c.psn_delta = delta;
  c.key_index = key;
  c.va_index = va;
  c.va_offset = off;
  c.dma_length = dma;
  c.payload.assign(len, 0x77);
  return c;
}

PacketChoice response(Opcode o, std::int16_t delta, std::uint8_t syndrome, std::uint32_t msn,
                      std::size_t len = 0) {
  PacketChoice c;
  c.opcode = op(o);
  c.psn_delta = delta;
  c.syndrome = syndrome;
  c.msn = msn;
  c.payload.assign(len, 0x66);
  return c;
}

void transport_rx() {
  constexpr std::uint8_t kRc1024 = 0 | 2 << 2, kUc1024 = 1 | 2 << 2, kUd1024 = 2 | 2 << 2;
  constexpr std::uint8_t kRc256 = 0, kRc4096 = 0 | 4 << 2;
  using W = transport::WrOpcode;
  {
    Transport t(kRc1024);  // a SEND into a receive, ACKed
    t.post_recv(4096);
    t.packet(request(Opcode::kRcSendOnly, 0, 100));
    t.transmit();
    write("fuzz_transport_rx", "rc-send", t.o.data());
  }
  {
    Transport t(kRc1024);  // a WRITE of three packets, one with immediate
    t.post_recv(16);
    t.packet(request(Opcode::kRcRdmaWriteFirst, 0, 1024, 0, 0, 0, 2100));
    t.packet(request(Opcode::kRcRdmaWriteMiddle, 1, 1024));
    t.packet(request(Opcode::kRcRdmaWriteLastWithImmediate, 2, 52));
    t.transmit();
    write("fuzz_transport_rx", "rc-write-first-middle-last", t.o.data());
  }
  {
    Transport t(kRc256);  // READs from each readable region, and past one
    t.packet(request(Opcode::kRcRdmaReadRequest, 0, 0, 0, 0, 0, 3000));
    t.packet(request(Opcode::kRcRdmaReadRequest, 1, 0, 2, 1, 0, 4096));
    t.packet(request(Opcode::kRcRdmaReadRequest, 2, 0, 3, 2, 0, 1000));
    t.packet(request(Opcode::kRcRdmaReadRequest, 3, 0, 3, 3, 0, 16));
    t.transmit();
    t.transmit();
    write("fuzz_transport_rx", "rc-reads", t.o.data());
  }
  {
    Transport t(kRc1024);  // atomics, aligned and not, in bounds and not
    PacketChoice cas = request(Opcode::kRcCompareSwap, 0, 0, 0, 0, 8);
    cas.swap_add = 9;
    t.packet(cas);
    PacketChoice faa = request(Opcode::kRcFetchAdd, 1, 0, 3, 3, 0);
    faa.swap_add = 1;
    t.packet(faa);
    t.packet(request(Opcode::kRcFetchAdd, 2, 0, 0, 0, 3));
    t.packet(request(Opcode::kRcFetchAdd, 3, 0, 0, 4, 8));
    t.transmit();
    write("fuzz_transport_rx", "rc-atomics", t.o.data());
  }
  {
    Transport t(kRc4096);                                               // writes each key refuses
    t.packet(request(Opcode::kRcRdmaWriteOnly, 0, 100, 1, 1, 0, 100));  // past its 64 bytes
    t.packet(request(Opcode::kRcRdmaWriteOnly, 1, 64, 2, 1, 0, 64));    // a read-only key
    t.packet(request(Opcode::kRcRdmaWriteOnly, 2, 8, 4, 0, 0, 8));      // another PD's
    t.packet(request(Opcode::kRcRdmaWriteOnly, 3, 8, 5, 0, 0, 8));      // deregistered
    t.packet(request(Opcode::kRcRdmaWriteOnly, 4, 16, 3, 3, 0, 16));    // past the guard
    t.transmit();
    write("fuzz_transport_rx", "rc-refused-writes", t.o.data());
  }
  {
    Transport t(kRc1024);  // writes and reads that fill each region exactly
    t.packet(request(Opcode::kRcRdmaWriteOnly, 0, 64, 1, 1, 0, 64));      // page 0's head
    t.packet(request(Opcode::kRcRdmaWriteOnly, 1, 1000, 3, 2, 0, 1000));  // the zero-based tail
    t.packet(request(Opcode::kRcRdmaWriteOnly, 2, 8, 0, 4, 0, 8));        // page 1's last 8
    t.packet(request(Opcode::kRcRdmaReadRequest, 3, 0, 2, 1, 4088, 8));   // page 0's last 8
    PacketChoice cas = request(Opcode::kRcCompareSwap, 4, 0, 3, 3, 0);    // the tail's last 8
    cas.swap_add = 1;
    t.packet(cas);
    t.transmit();
    write("fuzz_transport_rx", "rc-exact-fits", t.o.data());
  }
  {
    Transport t(kRc1024);  // our WRITE and READ, ACKed and answered
    t.post_send(W::kRdmaWrite, 2000);
    t.post_send(W::kRdmaRead, 2500);
    t.post_send(W::kAtomicFetchAndAdd, 8);
    t.transmit();
    t.packet(response(Opcode::kRcAcknowledge, 1, 0x1F, 1));
    t.packet(response(Opcode::kRcRdmaReadResponseFirst, 2, 0x1F, 2, 1024));
    t.packet(response(Opcode::kRcRdmaReadResponseMiddle, 3, 0, 0, 1024));
    t.packet(response(Opcode::kRcRdmaReadResponseLast, 4, 0x1F, 2, 452));
    PacketChoice ack = response(Opcode::kRcAtomicAcknowledge, 5, 0x1F, 3);
    ack.orig_remote_data = 41;
    t.packet(ack);
    t.transmit();
    write("fuzz_transport_rx", "rc-requester-completions", t.o.data());
  }
  {
    Transport t(kRc1024);  // a sequence NAK, an RNR NAK, then timeouts
    t.post_send(W::kSend, 3000);
    t.post_send(W::kSendWithImm, 10);
    t.transmit();
    t.packet(response(Opcode::kRcAcknowledge, 0, 0x60, 0));
    t.transmit();
    t.packet(response(Opcode::kRcAcknowledge, 0, 0x2E, 0));
    t.time(2000);
    t.transmit();
    for (int i = 0; i < 4; ++i) {
      t.time(100);
      t.transmit();
    }
    write("fuzz_transport_rx", "rc-naks-and-timeouts", t.o.data());
  }
  {
    Transport t(kRc1024);  // flushed by a move to ERR
    t.post_recv(100);
    t.post_send(W::kSend, 10);
    t.o.u8(transport_action::kModify);
    t.o.u8(static_cast<std::uint8_t>(transport::QpState::kErr));
    t.o.u32(1);  // kState
    t.transmit();
    write("fuzz_transport_rx", "rc-error-flush", t.o.data());
  }
  {
    Transport t(kUc1024);  // UC: a SEND and a WRITE with immediate
    t.post_recv(4096);
    PacketChoice s = request(Opcode::kUcSendOnly, 0, 200);
    s.flags = 0;
    t.packet(s);
    PacketChoice w = request(Opcode::kUcRdmaWriteOnlyWithImmediate, 1, 64, 0, 0, 0, 64);
    w.flags = 0;
    t.packet(w);
    t.transmit();
    write("fuzz_transport_rx", "uc-send-write", t.o.data());
  }
  {
    Transport t(kUd1024);  // UD: a datagram with the right Q_Key and one without
    t.post_recv(2048);
    t.post_recv(2048);
    PacketChoice d = request(Opcode::kUdSendOnly, 0, 500);
    d.src_qp = 0x222;
    t.packet(d);
    d.qkey_index = kRaw;
    d.raw_qkey = 0xBAD;
    t.packet(d);
    t.post_send(W::kSend, 100);
    t.transmit();
    write("fuzz_transport_rx", "ud-datagrams", t.o.data());
  }
  // An XRC target: requests name an SRQ of its domain by index (0, 1),
  // one of another domain (2) or of none (3).
  constexpr std::uint8_t kXrcTgt1024 = 3 | 2 << 2;
  auto xrc = [](PacketChoice c, std::uint8_t srqn_index) {
    c.opcode = wire::with_transport(static_cast<Opcode>(c.opcode), wire::Transport::kXrc);
    c.srqn_index = srqn_index;
    return c;
  };
  auto srq_recv = [](Transport& t, std::uint16_t len, std::uint8_t srq) {
    t.post_recv(len);
    t.o.u8(srq);  // which SRQ of the domain
  };
  {
    Transport t(kXrcTgt1024);  // SENDs to both SRQs, a WRITE, a READ, an atomic
    srq_recv(t, 4096, 0);
    srq_recv(t, 4096, 1);
    t.packet(xrc(request(Opcode::kRcSendOnly, 0, 100), 0));
    t.packet(xrc(request(Opcode::kRcSendFirst, 1, 1024), 1));
    t.packet(xrc(request(Opcode::kRcSendLast, 2, 10), 1));
    t.packet(xrc(request(Opcode::kRcRdmaWriteOnly, 3, 64, 0, 0, 0, 64), 0));
    t.packet(xrc(request(Opcode::kRcRdmaReadRequest, 4, 0, 0, 0, 0, 2000), 1));
    t.packet(xrc(request(Opcode::kRcFetchAdd, 5, 0, 0, 0, 0), 0));
    t.transmit();
    write("fuzz_transport_rx", "xrc-target", t.o.data());
  }
  {
    Transport t(kXrcTgt1024);  // an SRQ of another domain, then of none
    srq_recv(t, 4096, 0);
    t.packet(xrc(request(Opcode::kRcSendOnly, 0, 100), 2));
    t.transmit();
    t.packet(xrc(request(Opcode::kRcSendOnly, 1, 100), 3));
    t.transmit();
    write("fuzz_transport_rx", "xrc-target-bad-srqs", t.o.data());
  }
  // An XRC initiator (RC with path MTU bits 7: 1024): each WR names an SRQ
  // by the same indexes; the responses are XRC's.
  constexpr std::uint8_t kXrcIni1024 = 0 | 7 << 2;
  auto ini_send = [](Transport& t, W wr, std::uint16_t len, std::uint8_t srq) {
    t.post_send(wr, len);
    t.o.u8(srq);
  };
  {
    Transport t(kXrcIni1024);  // a WRITE, a READ and an atomic, answered
    ini_send(t, W::kRdmaWrite, 2000, 0);
    ini_send(t, W::kRdmaRead, 2500, 1);
    ini_send(t, W::kAtomicFetchAndAdd, 8, 0);
    t.transmit();
    t.packet(xrc(response(Opcode::kRcAcknowledge, 1, 0x1F, 1), 0));
    t.packet(xrc(response(Opcode::kRcRdmaReadResponseFirst, 2, 0x1F, 2, 1024), 0));
    t.packet(xrc(response(Opcode::kRcRdmaReadResponseMiddle, 3, 0, 0, 1024), 0));
    t.packet(xrc(response(Opcode::kRcRdmaReadResponseLast, 4, 0x1F, 2, 452), 0));
    PacketChoice ack = xrc(response(Opcode::kRcAtomicAcknowledge, 5, 0x1F, 3), 0);
    ack.orig_remote_data = 41;
    t.packet(ack);
    t.transmit();
    write("fuzz_transport_rx", "xrc-initiator-completions", t.o.data());
  }
  {
    Transport t(kXrcIni1024);  // SENDs to an SRQ of none: NAKed, then flushed
    ini_send(t, W::kSend, 100, 3);
    ini_send(t, W::kSend, 3000, 0);
    t.transmit();
    t.packet(xrc(response(Opcode::kRcAcknowledge, 0, 0x61, 0), 0));  // invalid request
    t.transmit();
    t.time(100);
    t.transmit();
    write("fuzz_transport_rx", "xrc-initiator-nak", t.o.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus DIR\n");
    return 2;
  }
  g_dir = argv[1];
  mkdir(g_dir.c_str(), 0755);
  wire_parser();
  classify();
  ndp();
  engine();
  transport_rx();
  return 0;
}
