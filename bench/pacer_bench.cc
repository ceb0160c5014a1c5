/* SPDX-License-Identifier: BSD-3-Clause */
// DCQCN's per-QP pacer (cc::QpCongestion as the transport's TxGate) on the
// real clock. A QP cut to a rate sends 1082-byte packets (1024 of payload)
// for 300 ms, driven two ways: a loop that spins (a program polling its
// CQ) and one that, like the engine's poll thread, naps 20 us after 256
// visits that sent nothing (Linux's timer slack makes a nap 60-80 us).
// Printed: the rate achieved against the rate set, and how far the gaps
// between departures stray from one packet time (a gap of 0 is a burst).
// rxe has no congestion control and no pacer to compare with.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "cc/qp_congestion.h"

using namespace uroce;
using cc::Nanos;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t kPacket = 1082;

Nanos now_ns() {
  return static_cast<Nanos>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

struct Result {
  double mbps;
  double p50_us, p99_us, max_us;
};

Result run(std::uint32_t mbps, bool nap) {
  cc::DcqcnParams p;
  p.rate_to_set_on_first_cnp_mbps = mbps;
  p.rpg_time_reset_us = 100'000'000;  // no increase during the run
  p.rpg_byte_reset = 0;
  cc::NotificationPoint np(p);
  cc::Counters counters;
  cc::QpCongestion gate(p, 100'000'000'000, true, true, np, counters, [] {});
  const Nanos t0 = now_ns();
  gate.on_cnp(1, t0);
  std::vector<Nanos> sent;
  sent.reserve(1'000'000);
  const Nanos end = t0 + 300'000'000;
  int idle = 0;
  for (Nanos now = t0; now < end; now = now_ns()) {
    Nanos retry = 0;
    bool any = false;
    while (gate.admit(kPacket, now, &retry)) {
      sent.push_back(now);
      any = true;
    }
    idle = any ? 0 : idle + 1;
    if (nap && idle > 256) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  Result r{};
  if (sent.size() < 2) return r;
  const double gap = kPacket * 8 * 1000.0 / mbps;  // ns
  std::vector<double> err;
  err.reserve(sent.size());
  for (std::size_t k = 1; k < sent.size(); ++k)
    err.push_back(std::abs(static_cast<double>(sent[k] - sent[k - 1]) - gap));
  std::sort(err.begin(), err.end());
  r.mbps = static_cast<double>(sent.size() - 1) * kPacket * 8 /
           (static_cast<double>(sent.back() - sent.front()) / 1e9) / 1e6;
  r.p50_us = err[err.size() / 2] / 1000;
  r.p99_us = err[err.size() * 99 / 100] / 1000;
  r.max_us = err.back() / 1000;
  return r;
}

}  // namespace

int main() {
  std::printf("DCQCN pacer, 1082-byte packets, 300 ms per rate, real clock\n");
  std::printf("%-18s %10s %12s %10s %12s %12s %12s\n", "loop", "set Mb/s", "got Mb/s", "got/set",
              "gap p50 dev", "gap p99 dev", "max (us)");
  for (bool nap : {false, true}) {
    for (std::uint32_t mbps : {10u, 100u, 1000u, 10000u}) {
      const Result r = run(mbps, nap);
      std::printf("%-18s %10u %12.1f %9.3fx %12.2f %12.2f %12.2f\n", nap ? "poll thread" : "spins",
                  mbps, r.mbps, r.mbps / mbps, r.p50_us, r.p99_us, r.max_us);
    }
  }
  return 0;
}
