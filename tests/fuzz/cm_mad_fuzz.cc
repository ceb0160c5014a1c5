/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target for lib/cm: the MAD decoder and the connection
// manager behind it. Built with ASan and UBSan: a read outside the MAD,
// undefined behaviour or a broken invariant is a crash.
//
// The first input byte picks what the rest is:
//   0: one MAD as received: decode it, and a MAD that decodes must encode
//      to bytes that decode to the same message;
//   1: a script run against two connection managers that connect to each
//      other: each step either delivers a MAD one of them sent (possibly
//      mutated, duplicated or dropped), hands one side raw input bytes as
//      a MAD, or moves time on; and calls of the rdma_cm API in between.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "cm/cma.h"
#include "cm/mad.h"

using namespace uroce;
using namespace uroce::cm;

namespace {

#define FUZZ_CHECK(cond)       \
  do {                         \
    if (!(cond)) std::abort(); \
  } while (0)

void fuzz_decode(const std::uint8_t* d, std::size_t n) {
  std::vector<std::uint8_t> bytes(d, d + n);
  bytes.shrink_to_fit();  // ASan catches a read one byte past it
  Mad m;
  MadError e{};
  if (!decode(bytes, m, e)) {
    FUZZ_CHECK(e < MadError::kCount);
    return;
  }
  std::vector<std::uint8_t> again(kMadSize);
  encode(m.hdr, m.msg, std::span<std::uint8_t, kMadSize>(again.data(), kMadSize));
  Mad back;
  FUZZ_CHECK(decode(again, back, e));
  FUZZ_CHECK(back.hdr == m.hdr && back.msg == m.msg);
}

class Rand : public RandomSource {
 public:
  std::uint32_t u32() override { return x_ = x_ * 1664525u + 1013904223u; }

 private:
  std::uint32_t x_ = 1;
};

struct Wire : MadSender {
  std::deque<OutMad> out;
  void send_mad(const OutMad& m) override {
    if (out.size() < 256) out.push_back(m);
  }
};

struct Host {
  explicit Host(const char* ip) {
    device.gids.push_back(*wire::IpAddr::parse(ip));
    device.node_guid = device.gids[0].v4();
    cma = std::make_unique<Cma>(device, wire, random);
  }
  CmaDevice device;
  Wire wire;
  Rand random;
  std::unique_ptr<Cma> cma;
};

struct QpSink : QpControl {
  int modify_qp(std::uint32_t, const QpAttr& a, unsigned mask) override {
    FUZZ_CHECK(mask & qp_attr_mask::kState);
    FUZZ_CHECK(a.qp_state <= QpState::kErr);
    return 0;
  }
};

void fuzz_script(const std::uint8_t* d, std::size_t n) {
  Host a("10.0.0.2"), b("10.0.0.1");
  QpSink qps;
  Nanos now = 1;
  const std::uint32_t l = b.cma->create_id(0, PortSpace::kTcp, QpType::kRc);
  b.cma->bind(l, wire::IpAddr::from_v4(0), 7174);
  b.cma->listen(l, 4);
  const std::uint32_t u = b.cma->create_id(0, PortSpace::kUdp, QpType::kUd);
  b.cma->bind(u, wire::IpAddr::from_v4(0), 7174);
  b.cma->listen(u, 4);
  std::vector<std::uint32_t> active;
  for (PortSpace ps : {PortSpace::kTcp, PortSpace::kUdp}) {
    const std::uint32_t x =
        a.cma->create_id(0, ps, ps == PortSpace::kUdp ? QpType::kUd : QpType::kRc);
    a.cma->resolve_addr(x, std::nullopt, b.device.gids[0], 7174);
    a.cma->addr_resolved(x, {a.device.gids[0], std::nullopt, 64});
    a.cma->resolve_route(x);
    a.cma->attach_qp(x, 0x100 + x, false, qps);
    a.cma->connect(x, ConnParam{}, now);
    active.push_back(x);
  }
  auto from = [](Host& s, Host& to) {
    GsiAddress g;
    g.local_ip = to.device.gids[0];
    g.remote_ip = s.device.gids[0];
    return g;
  };
  auto react = [&](Host& h) {
    CmaEvent e;
    while (h.cma->get_event(0, e)) {
      FUZZ_CHECK(e.private_data_len <= e.private_data.size());
      switch (e.event) {
        case CmaEventType::kConnectRequest:
          h.cma->attach_qp(e.id, 0x200 + e.id, false, qps);
          h.cma->accept(e.id, ConnParam{}, now);
          break;
        case CmaEventType::kConnectResponse:
          h.cma->accept(e.id, std::nullopt, now);
          break;
        case CmaEventType::kDisconnected:
          h.cma->disconnect(e.id, now);
          break;
        default:
          break;
      }
    }
  };
  while (n >= 2) {
    const std::uint8_t op = d[0];
    const std::uint8_t arg = d[1];
    d += 2;
    n -= 2;
    Host& s = (op & 1) ? b : a;
    Host& t = (op & 1) ? a : b;
    switch ((op >> 1) % 6) {
      case 0:
      case 1:  // deliver the oldest MAD, mutated at one byte by arg
        if (!s.wire.out.empty()) {
          OutMad m = s.wire.out.front();
          if (op & 0x80) m.mad[arg] ^= static_cast<std::uint8_t>(op | 1);
          if (!(op & 0x40)) s.wire.out.pop_front();  // else deliver it again later
          t.cma->receive(m.mad, from(s, t), now);
        }
        break;
      case 2:  // drop one
        if (!s.wire.out.empty()) s.wire.out.pop_front();
        break;
      case 3: {  // raw bytes as a MAD
        const std::size_t len = std::min<std::size_t>(n, arg);
        std::vector<std::uint8_t> raw(d, d + len);
        raw.shrink_to_fit();
        t.cma->receive(raw, from(s, t), now);
        d += len;
        n -= len;
        break;
      }
      case 4:  // time passes, up to the next deadline or a bit beyond
        if (const Nanos next = t.cma->next_deadline(); next && (arg & 1))
          now = std::max(now, next);
        else
          now += Nanos{arg} * 100 * kNanosPerMs;
        a.cma->on_timer(now);
        b.cma->on_timer(now);
        break;
      default:  // an API call on an active id
        if (arg & 1)
          a.cma->disconnect(active[arg % active.size()], now);
        else if (arg & 2)
          a.cma->reject(active[arg % active.size()], {}, now);
        else
          b.cma->destroy_id(l, now);
        break;
    }
    react(a);
    react(b);
    const Nanos next = std::min(a.cma->next_deadline(), b.cma->next_deadline());
    FUZZ_CHECK(next == 0 || next + 1 > 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    fuzz_script(data + 1, size - 1);
  else
    fuzz_decode(data + 1, size - 1);
  return 0;
}
