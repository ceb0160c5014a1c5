/* SPDX-License-Identifier: BSD-3-Clause */
// One end of the two-host benchmark (bench/two_host.sh runs both ends, in
// two network namespaces or on net_memif, and kernel TCP on the same veth
// for comparison). Prints "result NAME VALUE" lines.
//
//   two_host_bench roce --role a|b --device DEV --ip IP --peer IP --dir DIR [--hugepages]
//   two_host_bench tcp-server --ip IP --port N
//   two_host_bench tcp-client --ip IP --port N

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/rdma_endpoint.h"

using namespace uroce;
using Clock = std::chrono::steady_clock;
using test::fail;

namespace {

constexpr std::size_t kMessage = 64 * 1024;
constexpr std::size_t kTotal = 512u << 20;
constexpr int kInFlight = 16;
constexpr int kPings = 2000;

double seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void report_latency(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  std::printf("result latency_p50_us %.2f\n", us[us.size() / 2]);
  std::printf("result latency_p99_us %.2f\n", us[us.size() * 99 / 100]);
}

int roce(int argc, char** argv) {
  test::EndpointOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
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
    else if (a == "--hugepages")
      o.hugepages = true;
    else
      fail("unknown option " + a);
  }
  test::Endpoint ep(o);
  std::vector<std::uint8_t> buf(kMessage * kInFlight, 0x5A), target(kMessage * kInFlight);
  const auto lk = ep.reg(buf.data(), buf.size());
  const auto rk = ep.reg(target.data(), target.size());
  test::Info peer =
      ep.connect({{"rkey", rk}, {"addr", reinterpret_cast<std::uint64_t>(target.data())}});
  ep.sync("ready");
  if (o.role == "a") {
    Sge sge;
    SendWr w;
    w.opcode = Opcode::kRdmaWrite;
    w.flags = send_flags::kSignaled;
    w.sges = {&sge, 1};
    w.rkey = static_cast<std::uint32_t>(peer["rkey"]);
    // Throughput: 64 KiB WRITEs, 16 in flight (ib_write_bw's defaults).
    const auto t0 = Clock::now();
    std::size_t posted = 0, done = 0;
    const std::size_t n = kTotal / kMessage;
    while (done < n) {
      while (posted < n && posted - done < kInFlight) {
        const std::size_t slot = posted % kInFlight;
        sge = {reinterpret_cast<std::uint64_t>(buf.data() + slot * kMessage), kMessage, lk};
        w.remote_addr = peer["addr"] + slot * kMessage;
        ep.post(w);
        ++posted;
      }
      if (!ep.wait(ep.send_cq()).ok()) fail("WRITE failed");
      ++done;
    }
    std::printf("result write_gbps %.3f\n", kTotal * 8 / seconds(t0) / 1e9);
    // Latency: 64 B READ round trips, one at a time (ib_read_lat).
    SendWr r = w;
    r.opcode = Opcode::kRdmaRead;
    sge = {reinterpret_cast<std::uint64_t>(buf.data()), 64, lk};
    r.remote_addr = peer["addr"];
    std::vector<double> us;
    for (int i = 0; i < kPings; ++i) {
      const auto t = Clock::now();
      ep.post(r);
      if (!ep.wait(ep.send_cq()).ok()) fail("READ failed");
      us.push_back(seconds(t) * 1e6);
    }
    report_latency(us);
    ep.print_stats();
  }
  ep.sync("done", std::chrono::seconds(300));
  return 0;
}

int tcp(bool server, int argc, char** argv) {
  std::string ip;
  int port = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ip" && i + 1 < argc)
      ip = argv[++i];
    else if (a == "--port" && i + 1 < argc)
      port = std::stoi(argv[++i]);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  if (server) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0)
      fail("tcp: bind/listen failed");
    const int c = accept(fd, nullptr, nullptr);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> b(kMessage);
    std::size_t got = 0;
    while (got < kTotal) {
      const ssize_t n = read(c, b.data(), b.size());
      if (n <= 0) fail("tcp: read");
      got += static_cast<std::size_t>(n);
    }
    if (write(c, "k", 1) != 1) fail("tcp: ack");
    for (int i = 0; i < kPings; ++i) {
      std::size_t have = 0;
      while (have < 64) {
        const ssize_t n = read(c, b.data() + have, 64 - have);
        if (n <= 0) fail("tcp: ping read");
        have += static_cast<std::size_t>(n);
      }
      if (write(c, b.data(), 64) != 64) fail("tcp: pong");
    }
    close(c);
  } else {
    for (int tries = 0; connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0;
         ++tries) {
      if (tries > 500) fail("tcp: connect");
      close(fd);
      fd = socket(AF_INET, SOCK_STREAM, 0);
      usleep(10000);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> b(kMessage, 'x');
    const auto t0 = Clock::now();
    for (std::size_t sent = 0; sent < kTotal;) {
      const ssize_t n = write(fd, b.data(), b.size());
      if (n <= 0) fail("tcp: write");
      sent += static_cast<std::size_t>(n);
    }
    char k;
    if (read(fd, &k, 1) != 1) fail("tcp: ack");
    std::printf("result write_gbps %.3f\n", kTotal * 8 / seconds(t0) / 1e9);
    std::vector<double> us;
    for (int i = 0; i < kPings; ++i) {
      const auto t = Clock::now();
      if (write(fd, b.data(), 64) != 64) fail("tcp: ping");
      std::size_t have = 0;
      while (have < 64) {
        const ssize_t n = read(fd, b.data() + have, 64 - have);
        if (n <= 0) fail("tcp: pong read");
        have += static_cast<std::size_t>(n);
      }
      us.push_back(seconds(t) * 1e6);
    }
    report_latency(us);
  }
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "roce") return roce(argc, argv);
  if (mode == "tcp-server") return tcp(true, argc, argv);
  if (mode == "tcp-client") return tcp(false, argc, argv);
  fail("usage: two_host_bench roce|tcp-server|tcp-client ...");
}
