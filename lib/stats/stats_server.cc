/* SPDX-License-Identifier: BSD-3-Clause */
#include "stats/stats_server.h"

#include <sys/stat.h>
#include <unistd.h>

// Boost 1.74 asio uses std::exchange without including <utility> in C++20.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "log/log.h"
#include "stats/prometheus.h"

namespace uroce::stats {

namespace asio = boost::asio;
using Socket = asio::local::stream_protocol::socket;

std::string stats_dir() {
  if (const char* d = std::getenv("UROCE_STATS_DIR"); d && *d) return d;
  if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r && *r) return std::string(r) + "/uroce";
  // A user other than root gets a directory of its own: the first user
  // to make a shared one would own it, and the others could not serve.
  if (const uid_t uid = geteuid(); uid != 0) return "/tmp/uroce-" + std::to_string(uid);
  return "/tmp/uroce";
}

struct StatsServer::Impl {
  asio::io_context io;
  asio::local::stream_protocol::acceptor acceptor{io};
};

StatsServer* StatsServer::instance() {
  static StatsServer* server = [] {
    auto* s = new StatsServer();
    if (!s->start()) {
      delete s;
      return static_cast<StatsServer*>(nullptr);
    }
    // The server lives as long as the process: its socket goes at exit,
    // but not at the exit of a forked child, which inherits the handler
    // and not the endpoint.
    static const pid_t owner = getpid();
    std::atexit([] {
      if (getpid() == owner) ::unlink(instance()->path().c_str());
    });
    return s;
  }();
  return server;
}

bool StatsServer::start() {
  const std::string dir = stats_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (const uid_t uid = geteuid(); uid != 0 && dir == "/tmp/uroce-" + std::to_string(uid)) {
    // A name in /tmp anyone may take first: serve only from a directory
    // that is this user's alone, not a link to elsewhere.
    struct stat st {};
    chmod(dir.c_str(), 0700);
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid ||
        (st.st_mode & 077) != 0) {
      log::get().warn("stats endpoint: {} is not this user's own directory", dir);
      return false;
    }
  }
  path_ = dir + "/" + std::to_string(getpid()) + ".sock";
  ::unlink(path_.c_str());
  impl_ = std::make_unique<Impl>();
  boost::system::error_code bec;
  impl_->acceptor.open(asio::local::stream_protocol(), bec);
  if (!bec) impl_->acceptor.bind(asio::local::stream_protocol::endpoint(path_), bec);
  if (!bec) impl_->acceptor.listen(8, bec);
  if (bec) {
    log::get().warn("stats endpoint {}: {}", path_, bec.message());
    return false;
  }
  // Serve each client one snapshot, then close; one thread, off the
  // datapath.
  auto accept = std::make_shared<std::function<void()>>();
  *accept = [this, accept] {
    impl_->acceptor.async_accept([this, accept](boost::system::error_code e, Socket sock) {
      if (e) return;
      auto text = std::make_shared<std::string>(snapshot());
      auto s = std::make_shared<Socket>(std::move(sock));
      asio::async_write(*s, asio::buffer(*text), [s, text](boost::system::error_code, std::size_t) {
        boost::system::error_code ignored;
        s->shutdown(Socket::shutdown_both, ignored);
      });
      (*accept)();
    });
  };
  (*accept)();
  thread_ = std::thread([this] { impl_->io.run(); });
  log::get().info("stats endpoint at {}", path_);
  return true;
}

StatsServer::~StatsServer() {
  prometheus_.reset();
  if (impl_) impl_->io.stop();
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

int StatsServer::add(const std::string& device, Source source) {
  std::lock_guard lock(mu_);
  sources_.push_back({next_, device, std::move(source)});
  return next_++;
}

void StatsServer::remove(int handle) {
  std::lock_guard lock(mu_);
  std::erase_if(sources_, [&](const Entry& e) { return e.handle == handle; });
}

std::string StatsServer::snapshot() {
  std::lock_guard lock(mu_);
  std::string out;
  for (const Entry& e : sources_) {
    std::string lines;
    e.source(lines);
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);) out += e.device + " " + line + "\n";
  }
  return out;
}

bool StatsServer::serve_prometheus(const std::string& address, std::string* error) {
  std::lock_guard lock(prometheus_mu_);
  if (!prometheus_tried_) {
    prometheus_tried_ = true;
    prometheus_ = PrometheusServer::start(
        address, [this] { return snapshot(); }, error);
    return prometheus_ != nullptr;
  }
  if (!prometheus_) *error = "it failed before";
  return prometheus_ != nullptr;
}

std::uint16_t StatsServer::prometheus_port() {
  std::lock_guard lock(prometheus_mu_);
  return prometheus_ ? prometheus_->port() : 0;
}

}  // namespace uroce::stats
