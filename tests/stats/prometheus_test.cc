/* SPDX-License-Identifier: BSD-3-Clause */
// The Prometheus endpoint: the stats snapshot over HTTP, in the text
// exposition format, the same numbers as the stats socket's.

#include "stats/prometheus.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "stats/stats_server.h"
#include "support/tshark.h"

namespace uroce::stats {
namespace {

// The whole answer to `request` from 127.0.0.1:port.
std::string http(std::uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

TEST(Prometheus, TextLabelsScopesAndGroupsEachFamily) {
  const std::string text = prometheus_text(
      "uroce0 port sent_pkts 10\n"
      "uroce0 qp:00002a sent_pkts 7\n"
      "uroce0 process:4711 qps 2\n"
      "uroce0 cm cm_tx_msgs/req 3\n"
      "uroce1 port sent_pkts 4\n"
      "not a counter\n");
  EXPECT_EQ(text,
            "# TYPE uroce_sent_pkts counter\n"
            "uroce_sent_pkts{device=\"uroce0\",scope=\"port\"} 10\n"
            "uroce_sent_pkts{device=\"uroce0\",scope=\"qp\",qpn=\"00002a\"} 7\n"
            "uroce_sent_pkts{device=\"uroce1\",scope=\"port\"} 4\n"
            "# TYPE uroce_qps gauge\n"
            "uroce_qps{device=\"uroce0\",scope=\"process\",pid=\"4711\"} 2\n"
            "# TYPE uroce_cm_tx_msgs_req counter\n"
            "uroce_cm_tx_msgs_req{device=\"uroce0\",scope=\"cm\"} 3\n");
}

TEST(Prometheus, AddressesAreAnIpAndAPort) {
  std::string host;
  std::uint16_t port = 1;
  EXPECT_TRUE(parse_listen_address("127.0.0.1:0", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 0);
  EXPECT_TRUE(parse_listen_address("[::1]:9464", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 9464);
  for (const char* bad : {"9464", ":9464", "127.0.0.1", "127.0.0.1:x", "host:1", "::1:1"})
    EXPECT_FALSE(parse_listen_address(bad, &host, &port)) << bad;
  std::string err;
  EXPECT_EQ(PrometheusServer::start(
                "127.0.0.1", [] { return std::string(); }, &err),
            nullptr);
  EXPECT_NE(err.find("127.0.0.1"), std::string::npos) << err;
}

TEST(Prometheus, ScrapeAgreesWithTheStatsSnapshot) {
  test::TempDir dir;
  setenv("UROCE_STATS_DIR", dir.path().c_str(), 1);
  StatsServer* stats = StatsServer::instance();
  ASSERT_NE(stats, nullptr);
  std::uint64_t sent = 41;
  const int handle = stats->add("uroce0", [&](std::string& out) {
    out += "port sent_pkts " + std::to_string(++sent) + "\n";
    out += "engine rx_frames 12345678901234\n";
    out += "qp:00beef rcvd_pkts 3\n";
  });
  std::string err;
  ASSERT_TRUE(stats->serve_prometheus("127.0.0.1:0", &err)) << err;
  const std::uint16_t port = stats->prometheus_port();
  ASSERT_NE(port, 0);

  const std::string reply = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << reply;
  const std::string body = reply.substr(reply.find("\r\n\r\n") + 4);
  // Expect: every snapshot line a sample of the same value (sent_pkts
  // counts each read: the scrape read it once, the snapshot next).
  std::map<std::string, std::string> samples;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    samples[line.substr(0, line.rfind(' '))] = line.substr(line.rfind(' ') + 1);
  }
  const std::string snap = stats->snapshot();
  EXPECT_NE(snap.find("uroce0 port sent_pkts 43\n"), std::string::npos) << snap;
  EXPECT_EQ(samples["uroce_sent_pkts{device=\"uroce0\",scope=\"port\"}"], "42") << body;
  EXPECT_EQ(samples["uroce_rx_frames{device=\"uroce0\",scope=\"engine\"}"], "12345678901234");
  EXPECT_EQ(samples["uroce_rcvd_pkts{device=\"uroce0\",scope=\"qp\",qpn=\"00beef\"}"], "3");
  EXPECT_EQ(samples.size(), 3u) << body;
  EXPECT_NE(body.find("# TYPE uroce_rcvd_pkts counter\n"), std::string::npos);

  // Expect: only /metrics is served, and only to GET.
  EXPECT_EQ(http(port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http(port, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  // Expect: one endpoint per process; asking again changes nothing.
  EXPECT_TRUE(stats->serve_prometheus("127.0.0.1:1", &err));
  EXPECT_EQ(stats->prometheus_port(), port);
  stats->remove(handle);
}

TEST(Prometheus, ABusyPortIsAnErrorThatNamesIt) {
  std::string err;
  auto first = PrometheusServer::start(
      "127.0.0.1:0", [] { return std::string(); }, &err);
  ASSERT_TRUE(first) << err;
  const std::string taken = "127.0.0.1:" + std::to_string(first->port());
  EXPECT_EQ(PrometheusServer::start(
                taken, [] { return std::string(); }, &err),
            nullptr);
  EXPECT_NE(err.find(taken), std::string::npos) << err;
}

}  // namespace
}  // namespace uroce::stats
