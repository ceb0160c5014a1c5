/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-stat: lists the running uroce processes and prints their counters.
//
//   uroce-stat [--json] [--all] [PID...]
//
// Each uroce process serves its counters on a Unix socket in the stats
// directory ($UROCE_STATS_DIR, else $XDG_RUNTIME_DIR/uroce, else
// /tmp/uroce). Without PIDs, every process found there is shown. Zero
// counters are left out unless --all is given.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "stats/stats_server.h"

namespace {

// Reads everything the endpoint at `path` sends; false if nobody answers
// (a process that died and left its socket behind).
bool query(const std::string& path, std::string* out) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
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
  bool json = false, all = false;
  std::vector<std::string> pids;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--all") {
      all = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: uroce-stat [--json] [--all] [PID...]\n");
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
