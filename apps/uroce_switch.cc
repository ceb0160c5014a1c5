/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-switch: a DPDK software switch that makes a lab of namespaces,
// veths or memif links behave like a datacenter fabric: line rates, eight
// priority queues in a shared buffer, ECN marking, PFC, impairments.
//
//   uroce-switch --port net_af_packet0,iface=sw1 --port net_af_packet1,iface=sw2
//                --rate 1=1gbit --ecn kmin=5000,kmax=200000,pmax=0.01 --pfc
//
// One thread forwards (poll mode, with short naps when idle). Counters
// are served to uroce-stat as device "switch", written as a time series
// with --stats-file, and printed when the switch stops (SIGINT, SIGTERM
// or --duration). "port N down" and "port N up" on the --control socket
// take a link down and up; `uroce-switch --ctl SOCKET port 1 down` sends
// them.

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "log/log.h"
#include "stats/stats_server.h"
#include "switch/options.h"
#include "switch/switch.h"

using namespace uroce;

namespace {

std::atomic<bool> g_stop{false};

// Idle polls before the loop naps 20 us between polls, and before it
// sleeps 500 us: a switch nobody uses for a while costs next to nothing,
// one in use answers within 20 us.
constexpr unsigned kSpinsBeforeNap = 2000;
constexpr unsigned kNapsBeforeSleep = kSpinsBeforeNap + 5000;

void on_signal(int) { g_stop = true; }

// The switch's clock: monotonic, in nanoseconds.
sw::Nanos now_ns() {
  return static_cast<sw::Nanos>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
}

// The time series: one row per port and queue at every interval.
class SeriesWriter {
 public:
  SeriesWriter(const std::string& path, bool json) : json_(json) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "w");
    if (!f_) {
      log::get().error("cannot write {}: {}", path, std::strerror(errno));
      return;
    }
    if (!json_)
      std::fputs(
          "time_s,port,queue,rx_bytes,tx_bytes,depth_bytes,max_depth_bytes,ecn_marked,dropped,"
          "pfc_tx,pfc_rx,paused_us\n",
          f_);
  }
  ~SeriesWriter() {
    if (f_) std::fclose(f_);
  }
  void write(double t, const sw::Switch& s) {
    if (!f_) return;
    for (std::uint16_t p = 0; p < s.port_count(); ++p) {
      const sw::PortCounters& c = s.counters(p);
      for (unsigned q = 0; q < sw::kQueues; ++q) {
        const sw::QueueCounters& qc = c.queues[q];
        const auto v = [](const counters::Counter& x) {
          return static_cast<unsigned long long>(x.get());
        };
        const auto prio = [&](pfc::PrioCounter pc) {
          return static_cast<unsigned long long>(c.pfc.get(pc, q));
        };
        if (json_) {
          std::fprintf(f_,
                       "{\"time_s\":%.6f,\"port\":%u,\"queue\":%u,\"rx_bytes\":%llu,"
                       "\"tx_bytes\":%llu,\"depth_bytes\":%llu,\"max_depth_bytes\":%llu,"
                       "\"ecn_marked\":%llu,\"dropped\":%llu,\"pfc_tx\":%llu,\"pfc_rx\":%llu,"
                       "\"paused_us\":%llu}\n",
                       t, p, q, v(qc.rx_bytes), v(qc.tx_bytes), v(qc.depth), v(qc.max_depth),
                       v(qc.ecn_marked), v(qc.dropped), prio(pfc::PrioCounter::kTxPause),
                       prio(pfc::PrioCounter::kRxPause), prio(pfc::PrioCounter::kRxPauseDuration));
        } else {
          std::fprintf(f_, "%.6f,%u,%u,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", t, p, q,
                       v(qc.rx_bytes), v(qc.tx_bytes), v(qc.depth), v(qc.max_depth),
                       v(qc.ecn_marked), v(qc.dropped), prio(pfc::PrioCounter::kTxPause),
                       prio(pfc::PrioCounter::kRxPause), prio(pfc::PrioCounter::kRxPauseDuration));
        }
      }
    }
    std::fflush(f_);
  }

 private:
  bool json_;
  std::FILE* f_ = nullptr;
};

// The control socket: a Unix stream socket taking one command per
// connection ("port 1 down"). A thread of its own waits on it, so that a
// client that connects and says nothing cannot stall forwarding; the
// forwarding loop applies what it queued.
class Control {
 public:
  Control(const std::string& path, std::size_t ports) : path_(path), ports_(ports) {
    if (path.empty()) return;
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    unlink(path.c_str());
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(fd_, 4) != 0) {
      log::get().error("control socket {}: {}", path, std::strerror(errno));
      if (fd_ >= 0) close(fd_);
      fd_ = -1;
      return;
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~Control() {
    if (fd_ < 0) return;
    shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
  }
  /// Applies the commands received since the last call.
  void apply(sw::Switch& s) {
    std::vector<std::pair<std::uint16_t, bool>> todo;
    {
      std::lock_guard lock(mu_);
      todo.swap(queue_);
    }
    for (const auto& [port, up] : todo) {
      s.set_link(port, up);
      log::get().info("port {} {}", port, up ? "up" : "down");
    }
  }

 private:
  void serve() {
    for (;;) {
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      timeval tv{1, 0};  // a client gets a second to say what it wants
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[256];
      const ssize_t n = read(c, buf, sizeof(buf) - 1);
      std::istringstream in(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0));
      std::string word, state;
      unsigned port = 0;
      std::string reply = "error: expected 'port N down' or 'port N up'\n";
      if (in >> word >> port >> state && word == "port" && port < ports_ &&
          (state == "down" || state == "up")) {
        std::lock_guard lock(mu_);
        queue_.emplace_back(static_cast<std::uint16_t>(port), state == "up");
        reply = "ok\n";
      }
      if (write(c, reply.data(), reply.size()) < 0) {
        // the client left; nothing to do
      }
      close(c);
    }
  }

  std::string path_;
  std::size_t ports_;
  int fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::uint16_t, bool>> queue_;
};

}  // namespace

// uroce-switch --ctl SOCKET port N down|up: the client side.
int control_client(int argc, char** argv) {
  if (argc < 4) {
    std::fputs("usage: uroce-switch --ctl SOCKET port N down|up\n", stderr);
    return 2;
  }
  std::string line;
  for (int i = 3; i < argc; ++i) line += std::string(i > 3 ? " " : "") + argv[i];
  line += "\n";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, argv[2], sizeof(a.sun_path) - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    std::fprintf(stderr, "uroce-switch: %s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  const std::string reply(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  std::fputs(reply.c_str(), stdout);
  return reply.rfind("ok", 0) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--ctl") return control_client(argc, argv);
  sw::SwitchOptions o;
  if (const std::string err = sw::parse_switch_options(argc, argv, &o); !err.empty()) {
    if (err == "help") {
      std::fputs(sw::kSwitchUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "uroce-switch: %s\n%s", err.c_str(), sw::kSwitchUsage);
    return 2;
  }
  if (!log::set_level(o.log_level)) {
    std::fprintf(stderr, "uroce-switch: --log: '%s' is not a level\n", o.log_level.c_str());
    return 2;
  }
  dpdk::EalOptions eal;
  eal.devices = o.ports;
  eal.hugepages = o.hugepages;
  eal.memory_mb = o.eal_memory_mb;
  if (const std::string err = dpdk::eal_init(eal); !err.empty()) {
    std::fprintf(stderr, "uroce-switch: %s\n", err.c_str());
    return 1;
  }
  std::vector<std::unique_ptr<dpdk::DpdkPort>> ports;
  std::vector<port::Port*> raw;
  for (std::size_t i = 0; i < o.ports.size(); ++i) {
    dpdk::PortOptions po;
    po.mtu = dpdk::kernel_iface_mtu(o.ports[i]);
    std::string err;
    auto p = dpdk::DpdkPort::open(o.ports[i], po, &err);
    if (!p) {
      std::fprintf(stderr, "uroce-switch: port %zu (%s): %s\n", i, o.ports[i].c_str(), err.c_str());
      return 1;
    }
    raw.push_back(p.get());
    ports.push_back(std::move(p));
  }
  sw::Switch s(raw, o.cfg);
  int stats_handle = 0;
  if (auto* server = stats::StatsServer::instance())
    stats_handle = server->add("switch", [&s](std::string& out) { s.write_stats(out); });
  SeriesWriter series(o.stats_file, o.stats_format == "json");
  Control control(o.control, ports.size());
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("uroce-switch: %zu ports, forwarding\n", ports.size());
  std::fflush(stdout);

  // This thread polls every port: an lcore id for it, and with it
  // per-thread mempool caches for the mbufs every forwarded frame takes
  // and gives back.
  for (auto& p : ports) p->attach_thread();
  const sw::Nanos start = now_ns();
  const sw::Nanos interval = std::uint64_t{o.stats_interval_ms} * 1'000'000;
  sw::Nanos next_sample = start;
  sw::Nanos next_control = start;
  unsigned idle = 0;
  while (!g_stop) {
    const sw::Nanos now = now_ns();
    const std::uint32_t work = s.poll(now);
    if (now >= next_sample) {
      series.write(static_cast<double>(now - start) / 1e9, s);
      next_sample += interval;
      if (next_sample < now) next_sample = now + interval;
    }
    if (now >= next_control) {
      control.apply(s);
      next_control = now + 10'000'000;
      if (o.duration_s > 0 && static_cast<double>(now - start) / 1e9 >= o.duration_s) break;
    }
    // Poll mode while there is traffic; short naps once there has been
    // none for a while, so that a lab on a few cores keeps its CPUs for
    // the hosts. A queue waiting on its line rate is traffic too.
    idle = work != 0 || s.busy() ? 0 : idle + 1;
    if (idle > kSpinsBeforeNap)
      std::this_thread::sleep_for(std::chrono::microseconds(idle > kNapsBeforeSleep ? 500 : 20));
  }
  series.write(static_cast<double>(now_ns() - start) / 1e9, s);
  if (stats_handle != 0) stats::StatsServer::instance()->remove(stats_handle);
  // The final counters, non-zero ones, as uroce-stat prints them.
  std::string out;
  s.write_stats(out);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 2 || line.compare(line.size() - 2, 2, " 0") == 0) continue;
    std::printf("switch %s\n", line.c_str());
  }
  return 0;
}
