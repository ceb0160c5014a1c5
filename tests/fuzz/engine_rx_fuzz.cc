/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for the engine's receive dispatch: frames arrive on an
// in-memory port (tests/support/pipe_port.h) and one Engine classifies
// them (ARP, ICMP echo, IPv6 neighbour discovery, PAUSE and PFC, RoCEv2)
// and hands RoCEv2 to the QP it names: RC, UC and UD QPs over IPv4 and an
// RC QP over IPv6 are attached, with receives posted, so that frames reach
// Qp::receive and the QPs answer.
//
// Built with ASan and UBSan. Crashes: any memory error; a frame the
// engine sends that lib/wire would refuse (RoCEv2 that does not parse,
// an ARP reply or Neighbor Advertisement that does not decode, an ICMP
// echo reply with a bad IPv4 header checksum).
//
// The input is a sequence of records, each a mode byte and its fields;
// the engine runs one iteration after each, 1 us later:
//   0 a frame as it is (length, bytes)
//   1 the same, its checksums and ICRC resealed (fuzz_input.h)
//   2 a RoCEv2 packet built from fields (fuzz_input.h's encoding) to one
//     of the QPs, over one of four routes (IPv4, IPv6, tagged, not ours)
//   3 time passing (up to 65 ms), the QPs' timers running

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "fuzz/fuzz_input.h"
#include "support/pipe_port.h"
#include "support/sim_memory.h"
#include "wire/arp.h"
#include "wire/ndp.h"
#include "wire/roce_parser.h"

using namespace uroce;
using namespace uroce::fuzz;
using transport::Qp;
using transport::QpAttr;
using transport::QpState;
namespace acc = transport::access;

namespace {

const wire::MacAddr kMac = {{0x02, 0xAA, 0, 0, 0, 1}};
const wire::MacAddr kPeerMac = {{0x02, 0xBB, 0, 0, 0, 2}};
const wire::IpAddr kIp4 = wire::IpAddr::from_v4(0x0A000001);      // 10.0.0.1
const wire::IpAddr kPeerIp4 = wire::IpAddr::from_v4(0x0A000002);  // 10.0.0.2
const wire::IpAddr kIp6 = *wire::IpAddr::parse("fd00::1");
const wire::IpAddr kPeerIp6 = *wire::IpAddr::parse("fd00::2");
constexpr std::uint32_t kPeerQpn = 0x000222;
constexpr std::uint32_t kQkey = 0x11111111;
// RC, UC and UD over IPv4, RC over IPv6.
constexpr std::uint32_t kQpns[] = {0x000111, 0x000112, 0x000113, 0x000114};
constexpr std::uint32_t kRqPsn = 0x000100;
constexpr std::uint32_t kSqPsn = 0x000200;

wire::RoceRoute route(bool ipv6, bool to_peer) {
  wire::RoceRoute r;
  r.src_mac = to_peer ? kMac : kPeerMac;
  r.dst_mac = to_peer ? kPeerMac : kMac;
  const wire::IpAddr us = ipv6 ? kIp6 : kIp4, peer = ipv6 ? kPeerIp6 : kPeerIp4;
  r.src_ip = to_peer ? us : peer;
  r.dst_ip = to_peer ? peer : us;
  return r;
}

void bring_up(Qp& qp, const wire::RoceRoute& to_peer) {
  namespace m = transport::attr_mask;
  const bool rc = qp.type() == transport::QpType::kRc, ud = qp.type() == transport::QpType::kUd;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = acc::kRemoteWrite | acc::kRemoteRead | acc::kRemoteAtomic;
  a.qkey = kQkey;
  FUZZ_CHECK(qp.modify(a, m::kState | m::kPkeyIndex | m::kPort | (ud ? m::kQkey : m::kAccessFlags),
                       0) == 0);
  a.qp_state = QpState::kRtr;
  a.route = to_peer;
  a.route.udp_sport = wire::roce_udp_sport(qp.qpn(), kPeerQpn);
  a.path_mtu = wire::Mtu::k1024;
  a.dest_qp_num = kPeerQpn;
  a.rq_psn = kRqPsn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  FUZZ_CHECK(qp.modify(a,
                       ud ? m::kState
                          : m::kState | m::kAv | m::kPathMtu | m::kDestQpn | m::kRqPsn |
                                (rc ? m::kMaxDestRdAtomic | m::kMinRnrTimer : 0),
                       0) == 0);
  a.qp_state = QpState::kRts;
  a.sq_psn = kSqPsn;
  a.timeout = 4;  // 65 us
  a.retry_cnt = 2;
  a.rnr_retry = 1;
  a.max_rd_atomic = 4;
  FUZZ_CHECK(qp.modify(a,
                       m::kState | m::kSqPsn |
                           (rc ? m::kTimeout | m::kRetryCnt | m::kRnrRetry | m::kMaxQpRdAtomic : 0),
                       0) == 0);
}

// What the engine sent must be what lib/wire accepts.
void check_sent(const std::vector<std::vector<std::uint8_t>>& sent) {
  for (const auto& f : sent) {
    const wire::FrameClass c = wire::classify(f);
    FUZZ_CHECK(c.valid());
    if (c.ether_type == wire::ether_type::kArp) {
      wire::ArpPacket arp;
      FUZZ_CHECK(wire::parse_arp_frame(f, arp));
    } else if (c.ip_version == 6 && c.l4_proto == wire::ip_proto::kIcmpv6 &&
               f.size() > c.l4_offset() &&
               f[c.l4_offset()] == wire::icmpv6_type::kNeighborAdvertisement) {
      wire::NdpPacket na;
      FUZZ_CHECK(wire::parse_ndp_frame(f, na));
    } else if (c.ip_version == 4 && c.l4_proto == wire::ip_proto::kIcmp) {
      FUZZ_CHECK(wire::inet_checksum(f.data() + c.l3_offset(), c.l3_len) == 0);
    } else if (c.ip() && c.l4_proto == wire::ip_proto::kUdp) {
      wire::RocePacket p;
      FUZZ_CHECK(wire::parse_roce_frame(f, p) == wire::DropReason::kNone);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The memory the peer may reach; the QPs' receives land in it too.
  static std::vector<std::uint8_t> buffer(64 * 1024);
  test::PipePort port(kMac);
  port.keep_sent = true;
  engine::EngineConfig cfg;
  cfg.addresses = {kIp4, kIp6};
  engine::Engine engine(port, cfg);
  test::SimMemory mem;  // its keys are the same in every run
  const unsigned all = acc::kLocalWrite | acc::kRemoteWrite | acc::kRemoteRead | acc::kRemoteAtomic;
  const std::uint32_t key = mem.reg(buffer.data(), buffer.size(), all);
  const std::uint32_t half = mem.reg(buffer.data() + 32 * 1024, 1024, acc::kRemoteRead);
  transport::Cq scq(64), rcq(64);
  std::vector<std::unique_ptr<Qp>> qps;
  for (std::uint32_t qpn : kQpns) {
    transport::QpInit init;
    init.type = qpn == 0x000112   ? transport::QpType::kUc
                : qpn == 0x000113 ? transport::QpType::kUd
                                  : transport::QpType::kRc;
    init.qpn = qpn;
    init.max_send_wr = 8;
    init.max_recv_wr = 8;
    init.send_cq = &scq;
    init.recv_cq = &rcq;
    init.memory = &mem;
    qps.push_back(std::make_unique<Qp>(init));
    bring_up(*qps.back(), route(qpn == 0x000114, true));
    for (std::uint32_t i = 0; i < 4; ++i) {
      transport::RecvWr r;
      r.wr_id = i;
      r.num_sge = 1;
      r.sg_list[0] = {reinterpret_cast<std::uint64_t>(buffer.data() + (qpn & 3) * 8192 + i * 2048),
                      2048, key};
      FUZZ_CHECK(qps.back()->post_recv(r) == 0);
    }
    engine.attach(*qps.back());
  }

  Targets t;
  t.qpns = {std::begin(kQpns), std::end(kQpns)};
  t.qpns.push_back(0x000999);  // nobody's
  t.psn_base = kRqPsn;
  t.response_psn_base = kSqPsn;
  t.keys = {key, half};
  t.addresses = {reinterpret_cast<std::uint64_t>(buffer.data()),
                 reinterpret_cast<std::uint64_t>(buffer.data() + 32 * 1024),
                 reinterpret_cast<std::uint64_t>(buffer.data() + buffer.size() - 8)};
  t.qkey = kQkey;
  t.max_payload = 1024;

  Input in(data, size);
  transport::Nanos now = 1'000'000'000;
  std::uint16_t ip_id = 0;
  while (!in.empty()) {
    const std::uint8_t mode = in.u8() % 4;
    if (mode == engine_record::kRaw || mode == engine_record::kResealed) {
      const std::size_t len = in.u16() % 9300;
      const wire::ConstBytes b = in.take(len);
      std::vector<std::uint8_t> f(b.begin(), b.end());
      if (mode == engine_record::kResealed) reseal(f);
      port.inject(std::move(f));
    } else if (mode == engine_record::kPacket) {
      const std::uint8_t which = in.u8();
      const Packet p = read_packet(in, t);
      wire::RoceRoute r = route(which & 1, false);
      if (which & 2) {
        r.vlan = true;
        r.pcp = 3;
      }
      if (which & 4) r.dst_ip = r.src_ip;  // not one of ours
      port.inject(frame_of(p, r, ++ip_id));
    } else {
      now += std::uint64_t{in.u16()} * 1000;
    }
    engine.poll(now);
    now += 1000;
  }
  // Let the QPs answer and their timers run out.
  for (int i = 0; i < 8; ++i) {
    engine.poll(now);
    now += 10'000'000;
  }
  check_sent(port.sent);
  for (auto& qp : qps) engine.detach(qp->qpn());
  return 0;
}
