/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The stats endpoint: each uroce process serves its counters on a Unix
// socket, <dir>/<pid>.sock, where dir is $UROCE_STATS_DIR or
// $XDG_RUNTIME_DIR/uroce or /tmp/uroce (root) or /tmp/uroce-<uid>
// (another user, a directory of mode 0700). A client connects and reads until
// the server closes; each line is
//
//   <device> <scope> <counter> <value>
//
// with scope "engine", "drop" (RoCEv2 frames refused, by reason) or
// "qp:<qpn in hex>". uroce-stat reads them. Served by Boost.Asio on a
// thread of its own, off the datapath: counters are relaxed atomics.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uroce::stats {

class PrometheusServer;

/// Writes "<scope> <counter> <value>" lines for one device.
using Source = std::function<void(std::string& out)>;

/// The directory the endpoints live in: $UROCE_STATS_DIR, else
/// $XDG_RUNTIME_DIR/uroce, else /tmp/uroce for root and /tmp/uroce-<uid>
/// for any other user.
std::string stats_dir();

class StatsServer {
 public:
  /// The process's server, started on first use. Null if the socket could
  /// not be created (the reason is logged); uroce runs on without it.
  static StatsServer* instance();
  ~StatsServer();

  /// Adds a device's counters; returns a handle for remove().
  int add(const std::string& device, Source source);
  void remove(int handle);

  /// The text a client receives.
  std::string snapshot();
  const std::string& path() const { return path_; }

  /// Serves the snapshot to Prometheus on `address` as well
  /// (prometheus.h). The first call listens; later ones change nothing
  /// and say whether it listens. False with *error when it cannot.
  bool serve_prometheus(const std::string& address, std::string* error);
  /// The Prometheus endpoint's port, 0 when there is none.
  std::uint16_t prometheus_port();

 private:
  StatsServer() = default;
  bool start();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::mutex mu_;
  struct Entry {
    int handle;
    std::string device;
    Source source;
  };
  std::vector<Entry> sources_;
  int next_ = 1;
  std::thread thread_;
  std::mutex prometheus_mu_;  ///< apart from mu_: a scrape takes mu_
  bool prometheus_tried_ = false;
  std::unique_ptr<PrometheusServer> prometheus_;
};

}  // namespace uroce::stats
