/* SPDX-License-Identifier: BSD-3-Clause */
// One end of a two-process RoCEv2 test over a real DPDK port, written
// against uroce's public C++ API (include/uroce/uroce.h). Two of these
// run in two network namespaces joined by a veth pair, or side by side on
// net_memif (see two_process_test.cc). Role "a" WRITEs and READs back
// 0 B to 4 MiB, SENDs with immediate data and runs FETCH_ADDs; role "b"
// checks what arrived. Exit status 0 means every byte and every
// completion was right.
//
//   rdma_peer --role a|b --device DEV --ip IP --peer IP --dir DIR
//             [--drop P --duplicate P --reorder P --corrupt P --seed N]
//             [--expect-peer-death] [--hugepages] [--srq] [--ud] [--mtu N]
//             [--pfc] [--pfc-watchdog-ms N] [--xoff-kb N] [--rx-rate MBPS]
//             [--rx-buffer-kb N]
//             [--priority-tag] [--vlan ID] [--ecn] [--timeout N]
//             [--selective-repeat]
//
// --pfc: PFC on priority 3 (the traffic's DSCP 26); --rx-rate and
// --rx-buffer-kb make this end a slow receiver (fault.rx_rate_mbps).
// --srq: role b's RC QP takes its receives from a shared receive queue.
// --ud: role a also sends UD datagrams that role b checks, GRH included.

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/rdma_endpoint.h"

using namespace uroce;
using test::fail;

namespace {

struct Options {
  test::EndpointOptions endpoint;
  bool expect_peer_death = false;
  bool ud = false;
};

Options parse(int argc, char** argv) {
  Options o;
  test::EndpointOptions& e = o.endpoint;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value for " + a);
      return argv[++i];
    };
    if (a == "--role") {
      e.role = next();
    } else if (a == "--device") {
      e.device = next();
    } else if (a == "--ip") {
      e.ip = next();
    } else if (a == "--peer") {
      e.peer = next();
    } else if (a == "--dir") {
      e.dir = next();
    } else if (a == "--drop") {
      e.fault.rx_drop = e.fault.tx_drop = std::stod(next());
    } else if (a == "--duplicate") {
      e.fault.rx_duplicate = e.fault.tx_duplicate = std::stod(next());
    } else if (a == "--reorder") {
      e.fault.rx_reorder = e.fault.tx_reorder = std::stod(next());
    } else if (a == "--corrupt") {
      e.fault.rx_corrupt = e.fault.tx_corrupt = std::stod(next());
    } else if (a == "--seed") {
      e.fault.seed = std::stoull(next());
    } else if (a == "--expect-peer-death") {
      o.expect_peer_death = true;
    } else if (a == "--hugepages") {
      e.hugepages = true;
    } else if (a == "--mtu") {
      e.mtu = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--srq") {
      e.srq = true;
    } else if (a == "--ud") {
      o.ud = true;
    } else if (a == "--timeout") {
      e.timeout = static_cast<std::uint8_t>(std::stoul(next()));
    } else if (a == "--vlan") {
      e.vlan_id = static_cast<std::uint16_t>(std::stoul(next()));
    } else if (a == "--ecn") {
      e.ecn = true;
    } else if (a == "--selective-repeat") {
      e.selective_repeat = true;
    } else if (a == "--priority-tag") {
      e.priority_tag = true;
    } else if (a == "--pfc") {
      e.pfc.enabled = true;
    } else if (a == "--xoff-kb") {
      e.pfc.xoff_kb = static_cast<std::uint32_t>(std::stoul(next()));
      e.pfc.xon_kb = e.pfc.xoff_kb / 2;
    } else if (a == "--pfc-watchdog-ms") {
      e.pfc.watchdog_ms = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--rx-rate") {
      e.fault.rx_rate_mbps = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--rx-buffer-kb") {
      e.fault.rx_buffer_kb = static_cast<std::uint32_t>(std::stoul(next()));
    } else {
      fail("unknown option " + a);
    }
  }
  if (e.role != "a" && e.role != "b") fail("--role must be a or b");
  return o;
}

void pattern(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<std::uint8_t>(x);
  }
}

// A signaled WR of one SGE; the SGE lives in `sge`, which must outlive
// the post.
SendWr wr(Opcode op, const void* buf, std::size_t len, std::uint32_t key, Sge& sge) {
  sge = {reinterpret_cast<std::uint64_t>(buf), static_cast<std::uint32_t>(len), key};
  SendWr w;
  w.opcode = op;
  w.flags = send_flags::kSignaled;
  w.sges = {&sge, 1};
  return w;
}

constexpr std::size_t kRegion = (4u << 20) + 64;
constexpr std::size_t kSizes[] = {0, 1, 4096, 65536, 1u << 20, 4u << 20};
constexpr std::size_t kSendSizes[] = {1, 4096, 1u << 20};
constexpr int kAdds = 100;
constexpr std::size_t kUdSizes[] = {1, 512, 1000};  // within a 1024 path MTU

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const bool a = o.endpoint.role == "a";
  test::Endpoint ep(o.endpoint);

  std::vector<std::uint8_t> local(kRegion), remote(kRegion), back(kRegion);
  alignas(8) static std::uint64_t word = 0;
  alignas(8) static std::uint64_t orig = 0;
  const auto lk = ep.reg(local.data(), local.size());
  const auto rk = ep.reg(remote.data(), remote.size());
  const auto bk = ep.reg(back.data(), back.size());
  const auto wk = ep.reg(&word, 8);
  const auto ok = ep.reg(&orig, 8);

  test::Info peer = ep.connect({{"rkey", rk},
                                {"addr", reinterpret_cast<std::uint64_t>(remote.data())},
                                {"wkey", wk},
                                {"waddr", reinterpret_cast<std::uint64_t>(&word)}});
  const auto peer_rkey = static_cast<std::uint32_t>(peer["rkey"]);

  // Receive buffers for role b, one per SEND.
  std::vector<std::vector<std::uint8_t>> rbufs;
  if (!a) {
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      rbufs.emplace_back(kSendSizes[i] + 16);
      const Sge sge{reinterpret_cast<std::uint64_t>(rbufs[i].data()),
                    static_cast<std::uint32_t>(rbufs[i].size()),
                    ep.reg(rbufs[i].data(), rbufs[i].size())};
      if (ep.post_recv({.wr_id = i, .sges = {&sge, 1}}) != 0) fail("post_recv");
    }
  }
  // UD receive buffers: the 40-byte GRH, then the datagram.
  std::vector<std::vector<std::uint8_t>> udbufs;
  if (!a && o.ud) {
    for (std::size_t i = 0; i < std::size(kUdSizes); ++i) {
      udbufs.emplace_back(40 + 1024);
      const Sge sge{reinterpret_cast<std::uint64_t>(udbufs[i].data()),
                    static_cast<std::uint32_t>(udbufs[i].size()),
                    ep.reg(udbufs[i].data(), udbufs[i].size())};
      if (ep.ud().post_recv({.wr_id = 100 + i, .sges = {&sge, 1}}) != 0) fail("UD post_recv");
    }
  }
  ep.sync("ready", std::chrono::seconds(30));

  if (a && o.expect_peer_death) {
    // Keep writing until the peer is killed: the WR in flight must fail
    // with RETRY_EXC_ERR after retry_cnt timeouts, and nothing may hang.
    std::FILE* f = std::fopen((o.endpoint.dir + "/a.writing").c_str(), "w");
    if (f) std::fclose(f);
    for (std::uint64_t i = 0;; ++i) {
      Sge sge;
      SendWr w = wr(Opcode::kRdmaWrite, local.data(), 65536, lk, sge);
      w.wr_id = i;
      w.remote_addr = peer["addr"];
      w.rkey = peer_rkey;
      ep.post(w);
      const Completion wc = ep.wait(ep.send_cq(), std::chrono::seconds(10));
      if (wc.status == WcStatus::kRetryExcErr) {
        std::printf("peer death detected: RETRY_EXC_ERR after %llu writes\n",
                    static_cast<unsigned long long>(i));
        break;
      }
      if (!wc.ok()) fail("unexpected status");
    }
  } else if (a) {
    for (std::size_t size : kSizes) {
      pattern(local.data(), size, size);
      Sge wsge, rsge;
      SendWr w = wr(Opcode::kRdmaWrite, local.data(), size, lk, wsge);
      w.remote_addr = peer["addr"];
      w.rkey = peer_rkey;
      ep.post(w);
      SendWr r = wr(Opcode::kRdmaRead, back.data(), size, bk, rsge);
      r.remote_addr = peer["addr"];
      r.rkey = peer_rkey;
      ep.post(r);
      for (int k = 0; k < 2; ++k) {
        const Completion wc = ep.wait(ep.send_cq());
        if (!wc.ok())
          fail("WRITE/READ of " + std::to_string(size) + " bytes failed: " + to_string(wc.status));
      }
      if (std::memcmp(local.data(), back.data(), size) != 0)
        fail("READ returned other bytes than WRITE wrote, size " + std::to_string(size));
      std::printf("write+read %zu bytes ok\n", size);
    }
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      pattern(local.data(), kSendSizes[i], 1000 + i);
      Sge sge;
      SendWr s = wr(Opcode::kSendWithImm, local.data(), kSendSizes[i], lk, sge);
      s.imm_data = static_cast<std::uint32_t>(0xC0DE0000 + i);
      ep.post(s);
      if (!ep.wait(ep.send_cq()).ok()) fail("SEND failed");
    }
    for (int i = 0; i < kAdds; ++i) {
      Sge sge;
      SendWr f = wr(Opcode::kAtomicFetchAndAdd, &orig, 8, ok, sge);
      f.remote_addr = peer["waddr"];
      f.rkey = static_cast<std::uint32_t>(peer["wkey"]);
      f.compare_add = 1;
      ep.post(f);
      if (!ep.wait(ep.send_cq()).ok()) fail("FETCH_ADD failed");
      if (orig != static_cast<std::uint64_t>(i)) fail("FETCH_ADD returned a wrong original");
    }
    std::printf("sends and %d fetch-and-adds ok\n", kAdds);
    if (o.ud) {
      for (std::size_t i = 0; i < std::size(kUdSizes); ++i) {
        pattern(local.data(), kUdSizes[i], 2000 + i);
        Sge sge;
        SendWr u = wr(Opcode::kSend, local.data(), kUdSizes[i], lk, sge);
        u.ah = &ep.peer_ud_ah();
        u.remote_qpn = ep.peer_ud_qpn();
        u.remote_qkey = test::Endpoint::kUdQkey;
        while (ep.ud().post_send(u) == ENOMEM) {
        }
        if (!ep.wait(ep.ud_send_cq()).ok()) fail("UD send failed");
      }
      std::printf("UD datagrams sent\n");
    }
    ep.sync("done");
  } else {
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      const Completion wc = ep.wait(ep.recv_cq(), std::chrono::seconds(120));
      if (!wc.ok()) fail("receive failed");
      if (wc.wr_id != i || wc.byte_len != kSendSizes[i] || wc.imm_data != 0xC0DE0000 + i)
        fail("receive " + std::to_string(i) + " has the wrong length or immediate");
      std::vector<std::uint8_t> expect(kSendSizes[i]);
      pattern(expect.data(), expect.size(), 1000 + i);
      if (std::memcmp(expect.data(), rbufs[i].data(), expect.size()) != 0)
        fail("SEND " + std::to_string(i) + " arrived with other bytes");
    }
    for (std::size_t i = 0; o.ud && i < std::size(kUdSizes); ++i) {
      const Completion wc = ep.wait(ep.ud_recv_cq(), std::chrono::seconds(60));
      if (!wc.ok() || wc.wr_id != 100 + i || wc.byte_len != 40 + kUdSizes[i] ||
          !(wc.flags & wc_flags::kGrh))
        fail("UD receive " + std::to_string(i) + " is wrong");
      // The GRH carries the sender's IPv4 header in its last 20 bytes.
      if (udbufs[i][20] != 0x45) fail("UD GRH has no IPv4 header");
      std::vector<std::uint8_t> expect(kUdSizes[i]);
      pattern(expect.data(), expect.size(), 2000 + i);
      if (std::memcmp(expect.data(), udbufs[i].data() + 40, expect.size()) != 0)
        fail("UD datagram " + std::to_string(i) + " arrived with other bytes");
    }
    if (o.ud) std::printf("UD datagrams verified\n");
    ep.sync("done");
    // What the last WRITE left: the 4 MiB pattern.
    std::vector<std::uint8_t> expect(kSizes[std::size(kSizes) - 1]);
    pattern(expect.data(), expect.size(), expect.size());
    if (std::memcmp(expect.data(), remote.data(), expect.size()) != 0) fail("WRITE data differs");
    const std::uint64_t final_word = std::atomic_ref<std::uint64_t>(word).load();
    if (final_word != kAdds) fail("the atomic word is " + std::to_string(final_word));
    std::printf("receives, writes and atomics verified\n");
  }
  ep.print_stats();
  return 0;
}
