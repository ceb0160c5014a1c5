/* SPDX-License-Identifier: BSD-3-Clause */
// FaultPort over ports in memory: every frame accounted for (delivered +
// dropped + held = sent + duplicated), duplicates and reorders seen where
// they land, corrupted frames refused by the RoCEv2 parser, the same
// faults for the same seed, and a full inner port's backpressure kept.

#include "port/fault_port.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "support/pipe_port.h"
#include "support/wire_samples.h"
#include "wire/mac_control.h"
#include "wire/opcode.h"
#include "wire/roce_parser.h"

namespace uroce::port {
namespace {

const wire::MacAddr kMacA = {{0x02, 0xAA, 0, 0, 0, 1}};
const wire::MacAddr kMacB = {{0x02, 0xBB, 0, 0, 0, 2}};

// A RoCEv2 SEND whose payload carries its number.
std::vector<std::uint8_t> numbered(std::uint32_t i) {
  static const wire::RoceRoute route = test::sample_route(false);
  wire::Bth bth;
  bth.opcode = static_cast<std::uint8_t>(wire::Opcode::kRcSendOnly);
  bth.psn = wire::Psn(i);
  std::uint8_t payload[64] = {};
  wire::store_be32(payload, i);
  std::vector<std::uint8_t> f(
      wire::roce_frame_length(route, wire::opcode_info(bth.opcode), sizeof(payload)));
  wire::build_roce_frame(f, route, bth, {}, wire::ConstBytes(payload), 1);
  return f;
}

// The number a frame carries; -1 when the parser refuses it.
long number_of(wire::ConstBytes f) {
  wire::RocePacket pkt;
  if (wire::parse_roce_frame(f, pkt) != wire::DropReason::kNone) return -1;
  return wire::load_be32(pkt.payload.data());
}

std::uint64_t count(const FaultPort& p, ImpairmentCounter c) { return p.counters().get(c); }

// What arrived, in order, and how it relates to what was sent.
struct Arrivals {
  std::vector<long> numbers;
  std::size_t late = 0;      ///< arrived after a higher-numbered frame
  std::size_t repeated = 0;  ///< a number seen before
  std::size_t distinct = 0;
  std::size_t refused = 0;  ///< the parser refused them
};

Arrivals tally(const std::vector<std::vector<std::uint8_t>>& frames) {
  Arrivals a;
  std::map<long, int> seen;
  long highest = -1;
  for (const auto& f : frames) {
    const long n = number_of(f);
    a.numbers.push_back(n);
    if (n < 0) {
      ++a.refused;
      continue;
    }
    if (n < highest) ++a.late;
    highest = std::max(highest, n);
    if (seen[n]++ > 0) ++a.repeated;
  }
  a.distinct = seen.size();
  return a;
}

// Once nothing is held: every frame sent arrived once, but for those
// dropped and duplicated, and each held frame behind a later one (those
// still held when the input ended had none).
void expect_every_frame_accounted_for(const FaultPort& p,
                                      const std::vector<std::vector<std::uint8_t>>& got,
                                      std::uint32_t sent, std::size_t held_at_end) {
  const std::uint64_t dropped = count(p, ImpairmentCounter::kDropped);
  const std::uint64_t duplicated = count(p, ImpairmentCounter::kDuplicated);
  EXPECT_EQ(p.held(), 0u);
  EXPECT_EQ(got.size() + dropped, sent + duplicated);
  const Arrivals a = tally(got);
  EXPECT_EQ(a.refused, 0u);
  EXPECT_EQ(a.distinct, sent - dropped) << "every frame not dropped arrived";
  EXPECT_EQ(a.repeated, duplicated) << "each duplicate arrived";
  EXPECT_EQ(a.late, count(p, ImpairmentCounter::kReordered) - held_at_end)
      << "each held frame arrived behind a later one";
}

// A FaultPort whose inner port is a pipe to `peer`.
struct TxRig {
  test::PipePort* pipe;
  std::unique_ptr<FaultPort> port;
  test::PipePort peer{kMacB};

  explicit TxRig(const FaultConfig& cfg) {
    auto p = std::make_unique<test::PipePort>(kMacA);
    pipe = p.get();
    test::PipePort::join(*pipe, peer);
    port = std::make_unique<FaultPort>(std::move(p), cfg);
  }
  // Sends frames first..first+n-1 as the engine does: built in the port's
  // buffers, handed over in batches, the port polled after each.
  void send(std::uint32_t first, std::uint32_t n) {
    for (std::uint32_t i = first; i < first + n;) {
      TxFrame batch[kTxBatch];
      std::uint16_t k = 0;
      for (; k < kTxBatch && i < first + n; ++k, ++i) {
        const auto f = numbered(i);
        ASSERT_TRUE(port->tx_alloc(static_cast<std::uint32_t>(f.size()), batch[k]));
        std::copy(f.begin(), f.end(), batch[k].room.begin());
        batch[k].length = static_cast<std::uint32_t>(f.size());
      }
      ASSERT_EQ(port->tx_burst(batch, k), k) << "a pipe takes everything";
      poll();
    }
  }
  void poll() {
    RxFrame f[kRxBurst];
    port->rx_release(f, port->rx_burst(f, kRxBurst));
  }
  std::vector<std::vector<std::uint8_t>> received() {
    std::vector<std::vector<std::uint8_t>> out;
    RxFrame f[kRxBurst];
    for (std::uint16_t n; (n = peer.rx_burst(f, kRxBurst)) > 0;) {
      for (std::uint16_t i = 0; i < n; ++i) out.emplace_back(f[i].data.begin(), f[i].data.end());
      peer.rx_release(f, n);
    }
    return out;
  }
};

// A FaultPort whose inner port receives what the test injects.
struct RxRig {
  test::PipePort* pipe;
  std::unique_ptr<FaultPort> port;

  explicit RxRig(const FaultConfig& cfg) {
    auto p = std::make_unique<test::PipePort>(kMacA);
    pipe = p.get();
    port = std::make_unique<FaultPort>(std::move(p), cfg);
  }
  // Polls as the engine does, `burst` at a time, until the port is idle.
  std::vector<std::vector<std::uint8_t>> receive(std::uint16_t burst = 32) {
    std::vector<std::vector<std::uint8_t>> out;
    RxFrame f[kRxBurst];
    for (int idle = 0; idle < 2;) {
      const std::uint16_t n = port->rx_burst(f, burst);
      idle = n == 0 ? idle + 1 : 0;
      for (std::uint16_t i = 0; i < n; ++i) out.emplace_back(f[i].data.begin(), f[i].data.end());
      port->rx_release(f, n);
    }
    return out;
  }
};

TEST(FaultPort, WithoutFaultsThePortIsItself) {
  auto pipe = std::make_unique<test::PipePort>(kMacA);
  Port* raw = pipe.get();
  EXPECT_EQ(with_faults(std::move(pipe), FaultConfig{}).get(), raw);
  FaultConfig cfg;
  cfg.rx.drop = 0.5;
  auto wrapped = with_faults(std::make_unique<test::PipePort>(kMacA), cfg);
  ASSERT_NE(dynamic_cast<FaultPort*>(wrapped.get()), nullptr);
  EXPECT_EQ(wrapped->mac(), kMacA) << "the rest is the inner port's";
  EXPECT_EQ(wrapped->speed_mbps(), 10000u);
}

TEST(FaultPort, OnTransmitEveryFrameIsAccountedFor) {
  FaultConfig cfg;
  cfg.tx = {.drop = 0.05, .duplicate = 0.05, .reorder = 0.05};
  cfg.seed = 9;
  TxRig rig(cfg);
  const std::uint32_t n = 3000;
  rig.send(0, n);
  const FaultPort& p = *rig.port;
  const std::uint64_t dropped = count(p, ImpairmentCounter::kDropped);
  const std::uint64_t duplicated = count(p, ImpairmentCounter::kDuplicated);
  const std::uint64_t reordered = count(p, ImpairmentCounter::kReordered);
  // Expect: the counts of this seed, on every machine.
  EXPECT_EQ(dropped, 147u);
  EXPECT_EQ(duplicated, 145u);
  EXPECT_EQ(reordered, 151u);
  EXPECT_EQ(count(p, ImpairmentCounter::kCorrupted), 0u);
  // Expect: delivered + dropped + held = sent + duplicated.
  auto got = rig.received();
  EXPECT_EQ(got.size() + dropped + p.held() + p.queued(), n + duplicated);
  // Expect: a poll without a transmit lets the held frames go.
  const std::size_t held_at_end = p.held();
  rig.poll();
  for (auto& f : rig.received()) got.push_back(std::move(f));
  expect_every_frame_accounted_for(p, got, n, held_at_end);
}

TEST(FaultPort, OnReceiveEveryFrameIsAccountedFor) {
  FaultConfig cfg;
  cfg.rx = {.drop = 0.05, .duplicate = 0.05, .reorder = 0.05};
  cfg.seed = 9;
  RxRig rig(cfg);
  const FaultPort& p = *rig.port;
  const std::uint32_t n = 3200;
  std::vector<std::vector<std::uint8_t>> got;
  for (std::uint32_t i = 0; i < n; i += 16) {
    for (std::uint32_t k = i; k < i + 16; ++k) rig.pipe->inject(numbered(k));
    // One burst takes all 16 (each may become two, and up to 16 held go
    // behind one of them).
    RxFrame f[kRxBurst];
    const std::uint16_t m = rig.port->rx_burst(f, kRxBurst);
    for (std::uint16_t j = 0; j < m; ++j) got.emplace_back(f[j].data.begin(), f[j].data.end());
    rig.port->rx_release(f, m);
    // Expect: delivered + dropped + held = sent + duplicated, every time.
    ASSERT_EQ(got.size() + count(p, ImpairmentCounter::kDropped) + p.held(),
              i + 16 + count(p, ImpairmentCounter::kDuplicated));
  }
  // Expect: an idle poll lets the held frames go.
  const std::size_t held_at_end = p.held();
  for (auto& f : rig.receive()) got.push_back(std::move(f));
  EXPECT_GT(count(p, ImpairmentCounter::kDropped), 100u);
  EXPECT_GT(count(p, ImpairmentCounter::kDuplicated), 100u);
  EXPECT_GT(count(p, ImpairmentCounter::kReordered), 100u);
  expect_every_frame_accounted_for(p, got, n, held_at_end);
}

TEST(FaultPort, PauseAndPfcFramesPassUnimpaired) {
  // Every rate at its highest: any impairment of a MAC control frame shows.
  FaultConfig cfg;
  cfg.rx = cfg.tx = {.drop = 1, .duplicate = 1, .reorder = 1, .corrupt = 1};
  std::uint8_t xoff[wire::kMinFrameSize];
  const std::array<std::uint16_t, 8> times = {0, 0, 0, 0xFFFF, 0, 0, 0, 0};
  ASSERT_EQ(wire::build_pfc_frame(xoff, kMacA, 0x08, times), sizeof(xoff));
  const std::vector<std::uint8_t> want(std::begin(xoff), std::end(xoff));

  // Expect: sent once, as built, not counted as a fault.
  TxRig tx(cfg);
  TxFrame f;
  ASSERT_TRUE(tx.port->tx_alloc(sizeof(xoff), f));
  std::copy(want.begin(), want.end(), f.room.begin());
  f.length = sizeof(xoff);
  ASSERT_EQ(tx.port->tx_burst(&f, 1), 1u);
  EXPECT_EQ(tx.received(), std::vector<std::vector<std::uint8_t>>{want});
  // Expect: received once, as sent.
  RxRig rx(cfg);
  rx.pipe->inject(want);
  EXPECT_EQ(rx.receive(), std::vector<std::vector<std::uint8_t>>{want});
  for (const FaultPort* p : {tx.port.get(), rx.port.get()})
    p->counters().for_each([](std::string_view name, std::uint64_t v) { EXPECT_EQ(v, 0u) << name; });
}

TEST(FaultPort, CorruptedFramesFailTheIcrc) {
  FaultConfig cfg;
  cfg.rx = {.corrupt = 0.1};
  cfg.tx = {.corrupt = 0.1};
  TxRig tx(cfg);
  tx.send(0, 2000);
  Arrivals a = tally(tx.received());
  EXPECT_EQ(a.numbers.size(), 2000u);
  EXPECT_NEAR(static_cast<double>(a.refused), 200.0, 60.0);
  EXPECT_EQ(a.refused, count(*tx.port, ImpairmentCounter::kCorrupted)) << "every flip is caught";

  RxRig rx(cfg);
  for (std::uint32_t i = 0; i < 2000; ++i) rx.pipe->inject(numbered(i));
  a = tally(rx.receive());
  EXPECT_EQ(a.numbers.size(), 2000u);
  EXPECT_NEAR(static_cast<double>(a.refused), 200.0, 60.0);
  EXPECT_EQ(a.refused, count(*rx.port, ImpairmentCounter::kCorrupted));
  for (std::size_t i = 0; i < a.numbers.size(); ++i) {
    if (a.numbers[i] >= 0) {
      EXPECT_EQ(a.numbers[i], static_cast<long>(i)) << "the rest intact";
    }
  }
}

TEST(FaultPort, TheSameSeedGivesTheSameFaults) {
  FaultConfig cfg;
  cfg.rx = {.drop = 0.02, .duplicate = 0.02, .reorder = 0.02, .corrupt = 0.02};
  cfg.tx = cfg.rx;
  cfg.seed = 5;
  auto run = [](const FaultConfig& c) {
    TxRig rig(c);
    rig.send(0, 1000);
    rig.poll();
    return tally(rig.received()).numbers;
  };
  const auto a = run(cfg);
  EXPECT_EQ(run(cfg), a);
  cfg.seed = 6;
  EXPECT_NE(run(cfg), a);
}

// A port whose ring takes `room` frames until the test makes room again.
class NarrowPort : public Port {
 public:
  std::uint16_t room = 0;
  std::vector<std::vector<std::uint8_t>> sent;

  std::uint16_t rx_burst(RxFrame*, std::uint16_t) override { return 0; }
  void rx_release(RxFrame*, std::uint16_t) override {}
  bool tx_alloc(std::uint32_t size, TxFrame& out) override {
    auto* b = new std::vector<std::uint8_t>(size);
    out.room = wire::Bytes(b->data(), b->size());
    out.handle = b;
    return true;
  }
  std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) override {
    const std::uint16_t k = std::min(n, room);
    for (std::uint16_t i = 0; i < k; ++i) {
      auto* b = static_cast<std::vector<std::uint8_t>*>(frames[i].handle);
      b->resize(frames[i].length);
      sent.push_back(std::move(*b));
      delete b;
    }
    room = static_cast<std::uint16_t>(room - k);
    return k;
  }
  void tx_free(TxFrame& f) override { delete static_cast<std::vector<std::uint8_t>*>(f.handle); }
  wire::MacAddr mac() const override { return kMacA; }
  std::uint32_t mtu() const override { return 1500; }
  bool link_up() const override { return true; }
  std::uint32_t speed_mbps() const override { return 0; }
};

TEST(FaultPort, AFullInnerPortPushesBackAndKeepsTheOrder) {
  auto inner = std::make_unique<NarrowPort>();
  NarrowPort& narrow = *inner;
  FaultConfig cfg;
  cfg.tx.duplicate = 1e-9;  // enabled, but it never happens
  FaultPort p(std::move(inner), cfg);
  auto batch = [&](std::uint32_t first, std::uint16_t n, TxFrame* out) {
    for (std::uint16_t k = 0; k < n; ++k) {
      const auto f = numbered(first + k);
      ASSERT_TRUE(p.tx_alloc(static_cast<std::uint32_t>(f.size()), out[k]));
      std::copy(f.begin(), f.end(), out[k].room.begin());
      out[k].length = static_cast<std::uint32_t>(f.size());
    }
  };
  TxFrame f[kTxBatch];
  batch(0, kTxBatch, f);
  narrow.room = 10;
  // Expect: FaultPort takes the whole batch and keeps what the port did not.
  EXPECT_EQ(p.tx_burst(f, kTxBatch), kTxBatch);
  EXPECT_EQ(narrow.sent.size(), 10u);
  EXPECT_EQ(p.queued(), kTxBatch - 10u);
  // Expect: while its queue waits, it takes nothing more.
  batch(kTxBatch, kTxBatch, f);
  EXPECT_EQ(p.tx_burst(f, kTxBatch), 0u);
  // Expect: once the port has room, the queue goes first, then the rest.
  narrow.room = 1000;
  EXPECT_EQ(p.tx_burst(f, kTxBatch), kTxBatch);
  EXPECT_EQ(p.queued(), 0u);
  ASSERT_EQ(narrow.sent.size(), 2u * kTxBatch);
  for (std::size_t i = 0; i < narrow.sent.size(); ++i)
    EXPECT_EQ(number_of(narrow.sent[i]), static_cast<long>(i));
  // Expect: a poll sends what waits even when nothing new comes.
  batch(0, 4, f);
  narrow.room = 0;
  EXPECT_EQ(p.tx_burst(f, 4), 4u);
  narrow.room = 4;
  RxFrame none[1];
  EXPECT_EQ(p.rx_burst(none, 1), 0u);
  EXPECT_EQ(p.queued(), 0u);
}

TEST(FaultPort, ReceivedCopiesAreReused) {
  // Every frame duplicated: each duplicate is a buffer of FaultPort's own,
  // back in its pool when released.
  FaultConfig cfg;
  cfg.rx.duplicate = 1;
  RxRig rig(cfg);
  for (std::uint32_t i = 0; i < 20 * kFaultCopies; ++i) rig.pipe->inject(numbered(i));
  const Arrivals a = tally(rig.receive());
  EXPECT_EQ(a.numbers.size(), 40u * kFaultCopies);
  EXPECT_EQ(count(*rig.port, ImpairmentCounter::kDuplicated), 20u * kFaultCopies);
  EXPECT_EQ(a.repeated, 20u * kFaultCopies);
}

}  // namespace
}  // namespace uroce::port
