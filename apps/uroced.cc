/* SPDX-License-Identifier: BSD-3-Clause */
// uroced: the device daemon. It opens the devices of the configuration
// (the same [[device]] tables programs use in-process), runs the host side
// of each (port, host stack, PFC, self-delivery, the QPN space) and serves
// every RDMA program of the host that attaches through its socket:
//
//   uroced [--config FILE] [--socket PATH]
//
// It runs in the foreground, logging to stderr, until SIGINT or SIGTERM.
// Programs started with no device of their own (plain LD_PRELOAD of
// liburoce-ibverbs.so, or uroce-run without --port) list its devices.
// docs/daemon.md says more.

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/server.h"
#include "log/log.h"
#include "uroce/config.h"

namespace {

std::atomic<bool> stop{false};

void on_signal(int) { stop.store(true, std::memory_order_relaxed); }

void usage(FILE* out) {
  std::fprintf(out,
               "usage: uroced [--config FILE] [--socket PATH]\n"
               "\n"
               "Serves the uroce devices of FILE (default: $UROCE_CONFIG) to every RDMA\n"
               "program of the host, on the socket of [daemon] socket\n"
               "(default /run/uroce/uroced.sock).\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--config" || a == "--socket") && i + 1 < argc) {
      if (a == "--config") {
        setenv("UROCE_CONFIG", argv[++i], 1);
      } else {
        socket = argv[++i];
      }
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "uroced: unknown option or missing value: %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!socket.empty()) setenv("UROCE_DAEMON_SOCKET", socket.c_str(), 1);
  uroce::ConfigResult r = uroce::load_config();
  if (!r.config) {
    std::fprintf(stderr, "uroced: %s\n", r.error.c_str());
    return 2;
  }
  // A daemon says what it does: info unless the configuration asks for
  // more (or less) than the programs' default.
  uroce::log::set_level(r.config->log_level == "warn" ? "info" : r.config->log_level);

  // Before any thread starts (EAL's, the stats server's): each inherits
  // the nice value of the thread that makes it.
  if (setpriority(PRIO_PROCESS, 0, r.config->daemon_nice) != 0)
    uroce::log::get().warn("uroced: cannot set daemon.nice {}: {}", r.config->daemon_nice,
                           std::strerror(errno));

  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a program gone mid-reply is a closed socket, not a signal

  std::string error;
  auto server = uroce::daemon::Server::open(*r.config, &error);
  if (!server) {
    std::fprintf(stderr, "uroced: %s\n", error.c_str());
    return 1;
  }
  uroce::log::get().info("uroced: {} device(s) on {}", server->device_count(),
                         server->socket_path());
  server->run(stop);
  uroce::log::get().info("uroced: stopping");
  server.reset();
  return 0;
}
