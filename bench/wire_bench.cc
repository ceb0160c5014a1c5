/* SPDX-License-Identifier: BSD-3-Clause */
// lib/wire benchmark: ICRC throughput against the CRC-32 implementations a
// RoCE stack could use instead (zlib, DPDK's rte_net_crc, a plain table),
// and the cost of building and parsing headers. Prints one table.

#include <rte_eal.h>
#include <rte_net_crc.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "wire/crc32.h"
#include "wire/icrc.h"
#include "wire/roce_frame.h"
#include "wire/roce_parser.h"

using namespace uroce::wire;
using Clock = std::chrono::steady_clock;

namespace {

// Keeps the optimiser from discarding a result.
volatile std::uint64_t g_sink;

// Runs `op` in rounds of `batch` calls for at least 100 ms per trial and
// returns the best nanoseconds per call of 5 trials.
double ns_per_call(const std::function<std::uint64_t()>& op, int batch = 1000) {
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    std::uint64_t calls = 0, acc = 0;
    const auto start = Clock::now();
    auto now = start;
    do {
      for (int i = 0; i < batch; ++i) acc += op();
      calls += batch;
      now = Clock::now();
    } while (now - start < std::chrono::milliseconds(100));
    g_sink = acc;
    best = std::min(best, std::chrono::duration<double, std::nano>(now - start).count() / calls);
  }
  return best;
}

std::uint32_t table_crc32(const std::uint8_t* p, std::size_t n) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320 ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFF;
  while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

bool init_dpdk() {
  // rte_net_crc picks its SIMD path from EAL's max SIMD bit width, so EAL
  // must be up. No hugepages, no devices: nothing else is needed.
  const char* argv[] = {"wire_bench", "--no-huge", "--no-pci",          "--no-shconf",
                        "-m",         "64",        "--log-level=error", "--no-telemetry"};
  return rte_eal_init(static_cast<int>(std::size(argv)), const_cast<char**>(argv)) >= 0;
}

}  // namespace

int main() {
  const bool dpdk = init_dpdk();
  if (dpdk) rte_net_crc_set_alg(RTE_NET_CRC_SSE42);

  std::mt19937_64 rng(1);
  RoceRoute route;
  route.src_ip = IpAddr::from_v4(0x0A000001);
  route.dst_ip = IpAddr::from_v4(0x0A000002);

  std::printf("CRC-32 / ICRC throughput, GB/s on one core (higher is better)\n");
  std::printf("%-8s %12s %12s %12s %14s %12s\n", "bytes", "uroce ICRC", "ISA-L", "zlib",
              dpdk ? "rte_net_crc" : "rte_net_crc*", "table");
  for (std::size_t payload : {64u - 40u, 1024u - 40u, 4096u - 40u}) {
    // A RoCEv2 packet whose IP..pad span is 64 B, 1 KiB or 4 KiB.
    std::vector<std::uint8_t> pl(payload);
    for (auto& b : pl) b = static_cast<std::uint8_t>(rng());
    Bth bth;
    bth.opcode = static_cast<std::uint8_t>(Opcode::kRcSendOnly);
    std::vector<std::uint8_t> frame(roce_frame_length(route, opcode_info(bth.opcode), payload));
    build_roce_frame(frame, route, bth, {}, pl, 0);
    const ConstBytes span = ConstBytes(frame).subspan(14, frame.size() - 14 - 4);
    const double gb = static_cast<double>(span.size());

    // Through uroce's wrapper, which clears the AVX upper state ISA-L
    // leaves dirty (crc32.cc); without that every SSE column after this one
    // would be measured with a transition penalty.
    const double isal = ns_per_call([&] { return crc32(0, span); });
    const double icrc = ns_per_call([&] { return icrc_compute(span); });
    const double z =
        ns_per_call([&] { return ::crc32(0, span.data(), static_cast<uInt>(span.size())); });
    const double dp = dpdk ? ns_per_call([&] {
      return rte_net_crc_calc(span.data(), static_cast<std::uint32_t>(span.size()),
                              RTE_NET_CRC32_ETH);
    })
                           : 0;
    const double tb = ns_per_call([&] { return table_crc32(span.data(), span.size()); }, 100);
    std::printf("%-8zu %12.2f %12.2f %12.2f %14.2f %12.2f\n", span.size(), gb / icrc, gb / isal,
                gb / z, dpdk ? gb / dp : 0.0, gb / tb);
  }
  if (!dpdk) std::printf("* EAL did not initialise; rte_net_crc not measured\n");

  std::printf("\nHeader codec, ns per packet (lower is better)\n");
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kRcRdmaWriteFirst);
  bth.dest_qp = 0x123456;
  ExtHeaders ext;
  ext.reth = {0x7f0000001000, 0xABCD, 1 << 20};
  std::vector<std::uint8_t> buf(4200);
  std::printf("%-52s %8.1f\n", "build Eth+IPv4+UDP+BTH+RETH (RDMA WRITE FIRST)", ns_per_call([&] {
                bth.psn += 1;
                return write_roce_headers(buf, route, bth, ext, 4096, 7);
              }));
  RoceRoute route6 = route;
  route6.src_ip = *IpAddr::parse("fd00::1");
  route6.dst_ip = *IpAddr::parse("fd00::2");
  std::printf("%-52s %8.1f\n", "build Eth+IPv6+UDP+BTH+RETH (RDMA WRITE FIRST)", ns_per_call([&] {
                bth.psn += 1;
                return write_roce_headers(buf, route6, bth, ext, 4096, 7);
              }));

  for (std::size_t payload : {0u, 4096u}) {
    Bth b;
    b.opcode =
        static_cast<std::uint8_t>(payload ? Opcode::kRcRdmaWriteMiddle : Opcode::kRcAcknowledge);
    std::vector<std::uint8_t> pl(payload, 0x5A);
    std::vector<std::uint8_t> frame(roce_frame_length(route, opcode_info(b.opcode), payload));
    build_roce_frame(frame, route, b, ext, pl, 0);
    const std::string what = payload ? "parse+validate 4 KiB WRITE MIDDLE (with ICRC)"
                                     : "parse+validate ACK (with ICRC)";
    std::printf("%-52s %8.1f\n", what.c_str(), ns_per_call([&] {
                  RocePacket p;
                  return static_cast<std::uint64_t>(parse_roce_frame(frame, p));
                }));
  }
  std::vector<std::uint8_t> hdr(64);
  write_roce_headers(hdr, route, bth, ext, 4096, 7);
  std::printf("%-52s %8.1f\n", "decode BTH+RETH only", ns_per_call([&] {
                const Bth b = Bth::parse(hdr.data() + 42);
                const ExtHeaders e = ExtHeaders::parse(opcode_info(b.opcode), hdr.data() + 42);
                return b.psn.value() + e.reth.va;
              }));
  if (dpdk) rte_eal_cleanup();
  return 0;
}
