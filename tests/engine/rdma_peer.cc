/* SPDX-License-Identifier: BSD-3-Clause */
// One end of a two-process RoCEv2 test over a real DPDK port. Two of these
// run in two network namespaces joined by a veth pair (see veth_test.cc),
// each on net_af_packet: they swap QP numbers, PSNs and keys through files
// in a shared directory, resolve each other with ARP, and then role "a"
// WRITEs, READs back, SENDs and FETCH_ADDs while role "b" checks what
// arrived. Exit status 0 means every byte and every completion was right.
//
//   rdma_peer --role a|b --device DEV --ip IP --peer IP --dir DIR
//             [--drop P --duplicate P --reorder P --corrupt P --seed N]
//             [--expect-peer-death] [--hugepages]

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "engine/engine.h"
#include "support/sim_memory.h"
#include "transport/random.h"

using namespace uroce;
using namespace std::chrono_literals;

namespace {

struct Options {
  std::string role, device, ip, peer, dir;
  engine::FaultConfig fault;
  bool expect_peer_death = false;
  bool hugepages = false;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "rdma_peer: %s\n", why.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value for " + a);
      return argv[++i];
    };
    if (a == "--role")
      o.role = next();
    else if (a == "--device")
      o.device = next();
    else if (a == "--ip")
      o.ip = next();
    else if (a == "--peer")
      o.peer = next();
    else if (a == "--dir")
      o.dir = next();
    else if (a == "--drop")
      o.fault.rx.drop = o.fault.tx.drop = std::stod(next());
    else if (a == "--duplicate")
      o.fault.rx.duplicate = o.fault.tx.duplicate = std::stod(next());
    else if (a == "--reorder")
      o.fault.rx.reorder = o.fault.tx.reorder = std::stod(next());
    else if (a == "--corrupt")
      o.fault.rx.corrupt = o.fault.tx.corrupt = std::stod(next());
    else if (a == "--seed")
      o.fault.seed = std::stoull(next());
    else if (a == "--expect-peer-death")
      o.expect_peer_death = true;
    else if (a == "--hugepages")
      o.hugepages = true;
    else
      fail("unknown option " + a);
  }
  if (o.role != "a" && o.role != "b") fail("--role must be a or b");
  return o;
}

// key=value lines, written atomically (rename) so the reader never sees
// half a file.
void publish(const std::string& path, const std::map<std::string, std::uint64_t>& kv) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    for (const auto& [k, v] : kv) f << k << "=" << v << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::map<std::string, std::uint64_t> await(const std::string& path, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream f(path);
    if (f) {
      std::map<std::string, std::uint64_t> kv;
      for (std::string line; std::getline(f, line);) {
        const auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = std::stoull(line.substr(eq + 1));
      }
      return kv;
    }
    std::this_thread::sleep_for(10ms);
  }
  fail("timed out waiting for " + path);
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

constexpr std::size_t kRegion = (4u << 20) + 64;
constexpr unsigned kAll = transport::access::kLocalWrite | transport::access::kRemoteWrite |
                          transport::access::kRemoteRead | transport::access::kRemoteAtomic;
constexpr std::size_t kSizes[] = {0, 1, 4096, 65536, 1u << 20, 4u << 20};
constexpr std::size_t kSendSizes[] = {1, 4096, 1u << 20};
constexpr int kAdds = 100;

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  dpdk::EalOptions eal;
  eal.devices = {o.device};
  eal.hugepages = o.hugepages;
  eal.memory_mb = o.hugepages ? 256 : 512;
  if (auto err = dpdk::eal_init(eal); !err.empty()) fail(err);
  std::string err;
  auto port = dpdk::DpdkPort::open(o.device, {}, &err);
  if (!port) fail(err);
  const auto ip = wire::IpAddr::parse(o.ip);
  const auto peer_ip = wire::IpAddr::parse(o.peer);
  if (!ip || !peer_ip) fail("bad --ip or --peer");
  engine::Engine eng(*port, engine::EngineConfig{{*ip}, o.fault});

  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop.load(std::memory_order_relaxed)) eng.poll(engine::now_ns());
  });

  test::SimMemory mem;
  transport::Cq scq(1024), rcq(1024);
  transport::QpInit init;
  init.qpn = transport::secure_random_qpn();
  init.max_send_wr = 256;
  init.max_recv_wr = 256;
  init.send_cq = &scq;
  init.recv_cq = &rcq;
  init.memory = &mem;
  transport::Qp qp(init);

  std::vector<std::uint8_t> local(kRegion), remote(kRegion), back(kRegion);
  alignas(8) static std::uint64_t word = 0;
  alignas(8) static std::uint64_t orig = 0;
  const auto lk = mem.reg(local.data(), local.size(), kAll);
  const auto rk = mem.reg(remote.data(), remote.size(), kAll);
  const auto bk = mem.reg(back.data(), back.size(), kAll);
  const auto wk = mem.reg(&word, 8, kAll);
  const auto ok = mem.reg(&orig, 8, kAll);
  const std::uint32_t psn = transport::secure_random_psn();

  const std::string me = o.dir + "/" + o.role;
  const std::string them = o.dir + "/" + (o.role == "a" ? "b" : "a");
  publish(me + ".info", {{"qpn", init.qpn},
                         {"psn", psn},
                         {"rkey", rk},
                         {"addr", reinterpret_cast<std::uint64_t>(remote.data())},
                         {"wkey", wk},
                         {"waddr", reinterpret_cast<std::uint64_t>(&word)}});
  auto peer = await(them + ".info", 30s);

  const auto route = eng.route_to(*ip, *peer_ip, 5000ms);
  if (!route) fail("cannot resolve the peer with ARP");
  eng.attach(qp);
  // modify_qp belongs to the engine thread: run it holding the engine.
  eng.locked([&] {
    using namespace transport::attr_mask;
    transport::QpAttr at;
    at.qp_state = transport::QpState::kInit;
    at.qp_access_flags = kAll;
    if (qp.modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0)) fail("INIT");
    at.qp_state = transport::QpState::kRtr;
    at.route = *route;
    at.route.udp_sport = wire::roce_udp_sport(init.qpn, static_cast<std::uint32_t>(peer["qpn"]));
    at.path_mtu = *wire::mtu_for_link(port->mtu());
    at.dest_qp_num = static_cast<std::uint32_t>(peer["qpn"]);
    at.rq_psn = static_cast<std::uint32_t>(peer["psn"]);
    at.max_dest_rd_atomic = 16;
    at.min_rnr_timer = 12;
    if (qp.modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0))
      fail("RTR");
    at.qp_state = transport::QpState::kRts;
    at.sq_psn = psn;
    at.timeout = 14;  // 67 ms
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 16;
    if (qp.modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0))
      fail("RTS");
  });
  // Receive buffers for role b, one per SEND (receives may be posted once
  // the QP has left RESET).
  std::vector<std::vector<std::uint8_t>> rbufs;
  if (o.role == "b") {
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      rbufs.emplace_back(kSendSizes[i] + 16);
      transport::RecvWr r;
      r.wr_id = i;
      r.num_sge = 1;
      r.sg_list[0] = {reinterpret_cast<std::uint64_t>(rbufs[i].data()),
                      static_cast<std::uint32_t>(rbufs[i].size()),
                      mem.reg(rbufs[i].data(), rbufs[i].size(), kAll)};
      if (qp.post_recv(r) != 0) fail("post_recv");
    }
  }

  publish(me + ".ready", {{"ok", 1}});
  await(them + ".ready", 30s);

  auto wait_wc = [&](transport::Cq& cq, std::chrono::seconds limit) {
    transport::Wc wc;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (cq.poll(&wc, 1) == 0) {
      if (std::chrono::steady_clock::now() > end) fail("no completion in time");
      std::this_thread::sleep_for(50us);
    }
    return wc;
  };
  auto post = [&](transport::SendWr w) {
    while (qp.post_send(w) == ENOMEM) std::this_thread::sleep_for(50us);
  };

  int status = 0;
  if (o.role == "a" && o.expect_peer_death) {
    // Keep writing until the peer is killed: the WR in flight must fail
    // with RETRY_EXC_ERR after retry_cnt timeouts, and nothing may hang.
    publish(me + ".writing", {{"ok", 1}});
    for (std::uint64_t i = 0;; ++i) {
      transport::SendWr w;
      w.wr_id = i;
      w.opcode = transport::WrOpcode::kRdmaWrite;
      w.send_flags = transport::send_flags::kSignaled;
      w.num_sge = 1;
      w.sg_list[0] = {reinterpret_cast<std::uint64_t>(local.data()), 65536, lk};
      w.remote_addr = peer["addr"];
      w.rkey = static_cast<std::uint32_t>(peer["rkey"]);
      post(w);
      const transport::Wc wc = wait_wc(scq, 10s);
      if (wc.status == transport::WcStatus::kRetryExcErr) {
        std::printf("peer death detected: RETRY_EXC_ERR after %llu writes\n",
                    static_cast<unsigned long long>(i));
        break;
      }
      if (wc.status != transport::WcStatus::kSuccess) fail("unexpected status");
    }
  } else if (o.role == "a") {
    for (std::size_t size : kSizes) {
      pattern(local.data(), size, size);
      transport::SendWr w;
      w.opcode = transport::WrOpcode::kRdmaWrite;
      w.send_flags = transport::send_flags::kSignaled;
      w.num_sge = 1;
      w.sg_list[0] = {reinterpret_cast<std::uint64_t>(local.data()),
                      static_cast<std::uint32_t>(size), lk};
      w.remote_addr = peer["addr"];
      w.rkey = static_cast<std::uint32_t>(peer["rkey"]);
      post(w);
      transport::SendWr r = w;
      r.opcode = transport::WrOpcode::kRdmaRead;
      r.sg_list[0] = {reinterpret_cast<std::uint64_t>(back.data()),
                      static_cast<std::uint32_t>(size), bk};
      post(r);
      for (int k = 0; k < 2; ++k) {
        const transport::Wc wc = wait_wc(scq, 60s);
        if (wc.status != transport::WcStatus::kSuccess) fail("WRITE/READ failed");
      }
      if (std::memcmp(local.data(), back.data(), size) != 0)
        fail("READ returned other bytes than WRITE wrote, size " + std::to_string(size));
      std::printf("write+read %zu bytes ok\n", size);
    }
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      pattern(local.data(), kSendSizes[i], 1000 + i);
      transport::SendWr s;
      s.wr_id = i;
      s.opcode = transport::WrOpcode::kSendWithImm;
      s.imm_data = static_cast<std::uint32_t>(0xC0DE0000 + i);
      s.send_flags = transport::send_flags::kSignaled;
      s.num_sge = 1;
      s.sg_list[0] = {reinterpret_cast<std::uint64_t>(local.data()),
                      static_cast<std::uint32_t>(kSendSizes[i]), lk};
      post(s);
      if (wait_wc(scq, 60s).status != transport::WcStatus::kSuccess) fail("SEND failed");
    }
    for (int i = 0; i < kAdds; ++i) {
      transport::SendWr f;
      f.opcode = transport::WrOpcode::kAtomicFetchAndAdd;
      f.send_flags = transport::send_flags::kSignaled;
      f.num_sge = 1;
      f.sg_list[0] = {reinterpret_cast<std::uint64_t>(&orig), 8, ok};
      f.remote_addr = peer["waddr"];
      f.rkey = static_cast<std::uint32_t>(peer["wkey"]);
      f.compare_add = 1;
      post(f);
      if (wait_wc(scq, 60s).status != transport::WcStatus::kSuccess) fail("FETCH_ADD failed");
      if (orig != static_cast<std::uint64_t>(i)) fail("FETCH_ADD returned a wrong original");
    }
    std::printf("sends and %d fetch-and-adds ok\n", kAdds);
    publish(me + ".done", {{"ok", 1}});
    await(them + ".done", 60s);
  } else {
    for (std::size_t i = 0; i < std::size(kSendSizes); ++i) {
      const transport::Wc wc = wait_wc(rcq, 120s);
      if (wc.status != transport::WcStatus::kSuccess) fail("receive failed");
      if (wc.wr_id != i || wc.byte_len != kSendSizes[i] || wc.imm_data != 0xC0DE0000 + i)
        fail("receive " + std::to_string(i) + " has the wrong length or immediate");
      std::vector<std::uint8_t> expect(kSendSizes[i]);
      pattern(expect.data(), expect.size(), 1000 + i);
      if (std::memcmp(expect.data(), rbufs[i].data(), expect.size()) != 0)
        fail("SEND " + std::to_string(i) + " arrived with other bytes");
    }
    await(them + ".done", 120s);
    // RDMA writes into our memory with no completion on our side; taking
    // the engine (one iteration of our own) orders everything the poll
    // thread wrote before what we read now.
    eng.poll(engine::now_ns());
    // What the last WRITE left: the 4 MiB pattern.
    std::vector<std::uint8_t> expect(kSizes[std::size(kSizes) - 1]);
    pattern(expect.data(), expect.size(), expect.size());
    if (std::memcmp(expect.data(), remote.data(), expect.size()) != 0) fail("WRITE data differs");
    const std::uint64_t final_word = std::atomic_ref<std::uint64_t>(word).load();
    if (final_word != kAdds) fail("the atomic word is " + std::to_string(final_word));
    std::printf("receives, writes and atomics verified\n");
    publish(me + ".done", {{"ok", 1}});
  }

  const auto& c = qp.counters();
  for (std::size_t i = 0; i < transport::kCounterNames.size(); ++i) {
    std::printf("stat %s %llu\n", std::string(transport::kCounterNames[i]).c_str(),
                static_cast<unsigned long long>(c.get(static_cast<transport::Counter>(i))));
  }
  for (std::size_t i = 0; i < engine::kEngineCounterNames.size(); ++i) {
    std::printf(
        "stat %s %llu\n", std::string(engine::kEngineCounterNames[i]).c_str(),
        static_cast<unsigned long long>(eng.counters().get(static_cast<engine::EngineCounter>(i))));
  }
  std::fflush(stdout);
  stop = true;
  poller.join();
  eng.detach(qp.qpn());
  return status;
}
