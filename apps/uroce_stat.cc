/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-stat: lists the running uroce processes and prints their counters,
// or captures what a device daemon's device sends and receives.
//
//   uroce-stat [--json] [--all] [PID...]
//   uroce-stat capture [--socket PATH] [-d DEVICE] -w FILE.pcapng [-c COUNT] [-t SECONDS]
//
// Each uroce process serves its counters on a Unix socket in the stats
// directory ($UROCE_STATS_DIR, else $XDG_RUNTIME_DIR/uroce, else
// /tmp/uroce for root and /tmp/uroce-<uid> for another user: root's
// uroce-stat sees other users' programs with UROCE_STATS_DIR pointing
// there). Without PIDs, every process found there is shown. Zero
// counters are left out unless --all is given.
//
// capture asks uroced (on [daemon] socket, or PATH) for every frame of
// DEVICE (default: its first): the port's both ways and the ones the
// device delivers to itself, which never reach the wire (one program of
// the host to another). It writes them to FILE as pcapng until COUNT
// frames, SECONDS, or SIGINT, then says how many it wrote and how many
// the daemon dropped because this reader was too slow (docs/capture.md).

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/protocol.h"
#include "stats/pcapng.h"
#include "stats/stats_server.h"
#include "uroce/config.h"

namespace {

constexpr char kCaptureUsage[] =
    "usage: uroce-stat capture [--socket PATH] [-d DEVICE] -w FILE.pcapng [-c COUNT] "
    "[-t SECONDS]\n";

std::atomic<bool> interrupted{false};

void on_interrupt(int) { interrupted.store(true, std::memory_order_relaxed); }

int capture(int argc, char** argv) {
  std::string socket, device, file;
  unsigned long long count = 0;
  double seconds = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      std::printf("%s", kCaptureUsage);
      return 0;
    }
    if (!has_value || (a != "--socket" && a != "-d" && a != "-w" && a != "-c" && a != "-t")) {
      std::fprintf(stderr, "uroce-stat capture: unknown option or missing value: %s\n%s", a.c_str(),
                   kCaptureUsage);
      return 2;
    }
    const std::string v = argv[++i];
    char* end = nullptr;
    if (a == "--socket") {
      socket = v;
    } else if (a == "-d") {
      device = v;
    } else if (a == "-w") {
      file = v;
    } else if (a == "-c") {
      count = std::strtoull(v.c_str(), &end, 10);
    } else {
      seconds = std::strtod(v.c_str(), &end);
    }
    if (end && (*end != '\0' || v.empty() || v[0] == '-')) {
      std::fprintf(stderr, "uroce-stat capture: %s wants a number, not '%s'\n", a.c_str(),
                   v.c_str());
      return 2;
    }
  }
  if (file.empty()) {
    std::fprintf(stderr, "uroce-stat capture: -w FILE is required\n%s", kCaptureUsage);
    return 2;
  }
  if (socket.empty()) {
    const uroce::ConfigResult r = uroce::load_config();
    if (!r.config) {
      std::fprintf(stderr, "uroce-stat capture: %s\n", r.error.c_str());
      return 2;
    }
    socket = r.config->daemon_socket;
  }

  namespace daemon = uroce::daemon;
  const int fd = daemon::connect_daemon(socket);
  if (fd < 0) {
    std::fprintf(stderr, "uroce-stat capture: no uroced on %s: %s\n", socket.c_str(),
                 std::strerror(errno));
    return 1;
  }
  daemon::Message request, reply;
  request.op = daemon::Op::kCapture;
  request.text = device;
  if (!daemon::call(fd, request, &reply) || reply.op != daemon::Op::kDone) {
    std::fprintf(stderr, "uroce-stat capture: %s\n",
                 reply.op == daemon::Op::kError ? reply.text.c_str() : std::strerror(errno));
    close(fd);
    return 1;
  }
  uroce::stats::PcapngWriter out;
  std::string error;
  if (!out.open(file, &error)) {
    std::fprintf(stderr, "uroce-stat capture: %s\n", error.c_str());
    close(fd);
    return 1;
  }
  const std::uint32_t interface = out.add_interface(reply.text);
  std::fprintf(stderr, "capturing %s to %s\n", reply.text.c_str(), file.c_str());

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  std::uint32_t dropped = 0;
  bool lost = false;
  // Once stopped (SIGINT, SECONDS), the frames the daemon saw before the
  // stop and that still wait in the socket are written too, and tell
  // what was dropped until then.
  std::uint64_t stopped_at = 0;
  while (count == 0 || out.frames() < count) {
    int wait_ms = 200;
    if (stopped_at == 0 && (interrupted.load(std::memory_order_relaxed) ||
                            (seconds > 0 && std::chrono::steady_clock::now() >= deadline))) {
      timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      stopped_at = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u +
                   static_cast<std::uint64_t>(now.tv_nsec);
    }
    if (stopped_at != 0) {
      wait_ms = 0;
    } else if (seconds > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::clamp<long long>(left.count() + 1, 1, wait_ms));
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) {  // a timeout, or a signal
      if (stopped_at != 0) break;
      continue;
    }
    daemon::Message m;
    const int r = daemon::recv_message(fd, &m);
    if (r <= 0) {
      lost = true;  // the daemon stopped
      break;
    }
    if (m.op != daemon::Op::kFrame || m.text.size() < sizeof(daemon::FrameHeader)) continue;
    daemon::FrameHeader h;
    std::memcpy(&h, m.text.data(), sizeof(h));
    if (stopped_at != 0 && h.time_ns > stopped_at) break;
    dropped = h.dropped;
    const auto* frame = reinterpret_cast<const std::uint8_t*>(m.text.data()) + sizeof(h);
    const auto captured = static_cast<std::uint32_t>(m.text.size() - sizeof(h));
    using Direction = uroce::stats::PcapngWriter::Direction;
    // A frame the device delivered to itself went out and came in at once.
    switch (m.value) {
      case 1:
        out.write(interface, h.time_ns, frame, captured, h.length, Direction::kInbound);
        break;
      case 2:
        out.write(interface, h.time_ns, frame, captured, h.length, Direction::kOutbound);
        break;
      default:
        out.write(interface, h.time_ns, frame, captured, h.length, Direction::kUnknown,
                  "self-delivered");
        break;
    }
  }
  close(fd);
  const bool written = out.close();
  std::fprintf(stderr, "%llu frames written to %s, %u dropped by the daemon (slow reader)\n",
               static_cast<unsigned long long>(out.frames()), file.c_str(), dropped);
  if (!written) {
    std::fprintf(stderr, "uroce-stat capture: writing %s failed\n", file.c_str());
    return 1;
  }
  if (lost) std::fprintf(stderr, "uroce-stat capture: the daemon hung up\n");
  return 0;
}

// Reads everything the endpoint at `path` sends; false if nobody answers
// (a process that died and left its socket behind).
bool query(const std::string& path, std::string* out) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    // Refused: no one listens there any more. A killed process cannot
    // take its socket away; the next look does.
    if (errno == ECONNREFUSED) ::unlink(path.c_str());
    close(fd);
    return false;
  }
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
    out->append(buf, static_cast<std::size_t>(n));
  close(fd);
  return true;
}

struct Row {
  std::string device, scope, counter;
  unsigned long long value;
};

std::vector<Row> parse(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    Row r;
    if (w >> r.device >> r.scope >> r.counter >> r.value) rows.push_back(r);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "capture") == 0) return capture(argc, argv);
  bool json = false, all = false;
  std::vector<std::string> pids;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--all") {
      all = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: uroce-stat [--json] [--all] [PID...]\n       %s", kCaptureUsage + 7);
      return 0;
    } else if (!a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
      pids.push_back(a);
    } else {
      std::fprintf(stderr, "uroce-stat: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  const std::string dir = uroce::stats::stats_dir();
  if (pids.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".sock") pids.push_back(e.path().stem().string());
    }
  }
  std::map<std::string, std::vector<Row>> found;
  for (const std::string& pid : pids) {
    std::string text;
    if (query(dir + "/" + pid + ".sock", &text)) found[pid] = parse(text);
  }
  if (json) {
    std::printf("{");
    bool first_pid = true;
    for (const auto& [pid, rows] : found) {
      std::printf("%s\"%s\":{", first_pid ? "" : ",", pid.c_str());
      first_pid = false;
      std::string device, scope;
      bool first = true;
      for (const Row& r : rows) {
        if (r.device != device) {
          std::printf("%s\"%s\":{\"%s\":{", device.empty() ? "" : "}},", r.device.c_str(),
                      r.scope.c_str());
          device = r.device;
          scope = r.scope;
          first = true;
        } else if (r.scope != scope) {
          std::printf("},\"%s\":{", r.scope.c_str());
          scope = r.scope;
          first = true;
        }
        std::printf("%s\"%s\":%llu", first ? "" : ",", r.counter.c_str(), r.value);
        first = false;
      }
      std::printf("%s}", device.empty() ? "" : "}}");
    }
    std::printf("}\n");
    return 0;
  }
  if (found.empty()) {
    std::printf("no running uroce process (stats directory %s)\n", dir.c_str());
    return 0;
  }
  std::printf("%-8s %-8s %-10s %-28s %16s\n", "PID", "DEVICE", "SCOPE", "COUNTER", "VALUE");
  for (const auto& [pid, rows] : found) {
    for (const Row& r : rows) {
      if (r.value == 0 && !all) continue;
      std::printf("%-8s %-8s %-10s %-28s %16llu\n", pid.c_str(), r.device.c_str(), r.scope.c_str(),
                  r.counter.c_str(), r.value);
    }
  }
  return 0;
}
