/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The counters over HTTP for Prometheus ([stats] prometheus): GET /metrics
// answers the stats snapshot (stats_server.h) in the text exposition
// format 0.0.4, so that the stats socket and the scrape always agree.
// Each counter is a family uroce_<counter>, each line a sample labelled
// with its device and scope:
//
//   # TYPE uroce_sent_pkts counter
//   uroce_sent_pkts{device="uroce0",scope="port"} 6325
//   uroce_sent_pkts{device="uroce0",scope="qp",qpn="3f1a2c"} 6325
//   uroce_rx_frames{device="uroce0",scope="process",pid="4711"} 12
//
// Served by Boost.Asio on a thread of its own, off the datapath.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace uroce::stats {

/// Snapshot lines "<device> <scope> <counter> <value>" as exposition text.
std::string prometheus_text(std::string_view snapshot);

/// Splits "host:port" ("[v6]:port" for IPv6; port 0 = any free one).
/// False when it is not an IP address and a port.
bool parse_listen_address(std::string_view text, std::string* host, std::uint16_t* port);

class PrometheusServer {
 public:
  using Snapshot = std::function<std::string()>;
  /// Listens on `address` and serves `snapshot` (called on the server's
  /// thread) to each scrape. Null with *error when the address is bad or
  /// cannot be bound.
  static std::unique_ptr<PrometheusServer> start(const std::string& address, Snapshot snapshot,
                                                 std::string* error);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  /// The port it listens on (the one the kernel chose, for port 0).
  std::uint16_t port() const { return port_; }

 private:
  PrometheusServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace uroce::stats
