/* SPDX-License-Identifier: BSD-3-Clause */
// What one packet costs the datapath: two engines joined in memory (the
// engine tests' two hosts, tests/engine/hosts.h), one RC QP each, a fixed
// transfer of RDMA WRITEs polled from one thread, so that everything a
// packet goes through is counted (post, the requester, frame building and
// the ICRC, the port, parsing, the responder, the ACK and the completer)
// and no wait is. Prints "result NAME VALUE" lines: the packets each way
// and the rate on one core. bench/datapath_cost.sh runs it under callgrind,
// which counts the instructions of the transfer alone (the client requests
// below), and takes the payload copy and the CRC apart.
//
//   datapath_cost [--size BYTES] [--count WRITES] [--step-ns NS] [--lcores 2]
//
// --lcores 2 runs each host's engine on two lcores (engine/handoff.h),
// still polled from one thread, with the sender's QP on lcore 0 and the
// receiver's on lcore 1: every frame arrives on the queue of the lcore
// that does not own its QP and is handed over, what spreading the QPs
// over lcores costs at worst.
//
// --step-ns runs the engines on virtual time, NS per iteration of the
// loop, instead of the clock: under callgrind, which runs a program about
// fifty times slower, the clock would have the timer wheel walk fifty
// times the slots it walks at full speed. The script gives it the
// iteration time of a run at full speed.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
constexpr int kInstrumented = 1;
#else
constexpr int kInstrumented = 0;
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include "engine/counters.h"
#include "hosts.h"

using namespace uroce;
using namespace uroce::engine;

namespace {

constexpr int kInFlight = 64;  // WRITEs posted and not yet completed
constexpr int kSignalEvery = 16;

std::uint64_t counter(const Host& h, EngineCounter c) { return h.engine.counters().get(c); }
std::uint64_t counter(const TwoLcoreHost& h, EngineCounter c) {
  return h.engine0.counters().get(c) + h.engine1.counters().get(c);
}

template <typename H>
int transfer(std::size_t size, long count, Nanos step) {
  H a(kMacA, kIpA), b(kMacB, kIpB);
  test::PipePort::join(a.port, b.port);
  // QPN 0x4242 is lcore 0's, 0x7373 lcore 1's (on two lcores).
  connect(a, b, 0x4242, 0x7373);
  if (::testing::Test::HasFatalFailure() || a.qp->state() != QpState::kRts) {
    std::fprintf(stderr, "datapath_cost: the QPs did not connect\n");
    return 1;
  }
  std::vector<std::uint8_t> src(size, 0x5a), dst(size, 0);
  const auto lkey = a.memory.reg(src.data(), src.size(), kAll);
  const auto rkey = b.memory.reg(dst.data(), dst.size(), kAll);
  transport::SendWr w;
  w.opcode = transport::WrOpcode::kRdmaWrite;
  w.num_sge = 1;
  w.sg_list[0] = {reinterpret_cast<std::uint64_t>(src.data()), static_cast<std::uint32_t>(size),
                  lkey};
  w.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  w.rkey = rkey;

  // Unsignaled WRITEs but every 16th, as perftest posts them: a completion
  // stands for 16.
  long posted = 0, completed = 0, iterations = 0;
  Nanos virtual_now = now_ns();
  transport::Wc wc[16];
  const auto t0 = std::chrono::steady_clock::now();
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
  while (completed < count) {
    while (posted < count && posted - completed < kInFlight) {
      w.wr_id = static_cast<std::uint64_t>(posted);
      w.send_flags = (posted + 1) % kSignalEvery == 0 ? transport::send_flags::kSignaled : 0;
      if (a.qp->post_send(w) != 0) break;
      ++posted;
    }
    ++iterations;
    const Nanos now = step != 0 ? (virtual_now += step) : now_ns();
    a.poll(now);
    b.poll(now);
    const std::size_t n = a.scq.poll(wc, 16);
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != transport::WcStatus::kSuccess) {
        std::fprintf(stderr, "datapath_cost: WRITE %llu failed, status %d\n",
                     static_cast<unsigned long long>(wc[i].wr_id), static_cast<int>(wc[i].status));
        return 1;
      }
      completed += kSignalEvery;
    }
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (std::memcmp(src.data(), dst.data(), size) != 0) {
    std::fprintf(stderr, "datapath_cost: the bytes did not arrive intact\n");
    return 1;
  }
  const std::uint64_t data = counter(a, EngineCounter::kTxFrames);
  const std::uint64_t acks = counter(b, EngineCounter::kTxFrames);
  std::printf("result instrumented %d\n", kInstrumented);
  std::printf("result size %zu\n", size);
  std::printf("result writes %ld\n", count);
  std::printf("result data_packets %llu\n", static_cast<unsigned long long>(data));
  std::printf("result ack_packets %llu\n", static_cast<unsigned long long>(acks));
  std::printf("result seconds %.6f\n", secs);
  std::printf("result mpps %.3f\n", static_cast<double>(data) / secs / 1e6);
  std::printf("result ns_per_iteration %.0f\n", secs * 1e9 / static_cast<double>(iterations));
  std::printf("result handed_off %llu\n",
              static_cast<unsigned long long>(counter(a, EngineCounter::kRxHandedOff) +
                                              counter(b, EngineCounter::kRxHandedOff)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t size = 64;
  long count = 200000;
  Nanos step = 0;
  int lcores = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--size") {
      size = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (a == "--count") {
      count = std::strtol(argv[i + 1], nullptr, 10);
    } else if (a == "--step-ns") {
      step = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--lcores") {
      lcores = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr,
                   "usage: datapath_cost [--size BYTES] [--count WRITES] [--step-ns NS] "
                   "[--lcores 1|2]\n");
      return 2;
    }
  }
  if (size == 0 || count < kSignalEvery || (lcores != 1 && lcores != 2)) {
    std::fprintf(stderr, "datapath_cost: --size above 0, --count at least %d, --lcores 1 or 2\n",
                 kSignalEvery);
    return 2;
  }
  count -= count % kSignalEvery;
  return lcores == 1 ? transfer<Host>(size, count, step)
                     : transfer<TwoLcoreHost>(size, count, step);
}
