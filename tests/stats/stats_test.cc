/* SPDX-License-Identifier: BSD-3-Clause */
// A device's counters reach uroce-stat through the process's stats socket.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "stats/stats_server.h"
#include "support/pipe_driver.h"
#include "support/tshark.h"
#include "verbs/device.h"
#include "wire/arp.h"

namespace uroce::verbs {
namespace {

struct Command {
  int status = -1;  ///< the exit status, -1 if the command did not exit
  std::string out;
};

Command run(const std::string& cmd) {
  Command r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
  const int rc = pclose(p);
  if (rc != -1 && WIFEXITED(rc)) r.status = WEXITSTATUS(rc);
  return r;
}

TEST(Stats, UroceStatShowsADevicesCounters) {
  test::TempDir dir;
  setenv("UROCE_STATS_DIR", dir.path().c_str(), 1);
  DeviceConfig dc;
  dc.name = "uroce0";
  dc.port = "pipe:stats";  // a port in memory: no hardware, no namespace
  dc.ip = {IpPrefix{"10.66.0.1", 24}};
  std::string err;
  test::register_pipe_driver();
  auto dev = Device::open(dc, Config{}, &err);
  ASSERT_TRUE(dev) << err;
  ASSERT_NE(stats::StatsServer::instance(), nullptr);
  EXPECT_EQ(stats::StatsServer::instance()->path(),
            dir.path() + "/" + std::to_string(getpid()) + ".sock");
  // Something to count: the device asks for a neighbour that never answers.
  EXPECT_EQ(
      dev->engine().resolve(*wire::IpAddr::parse("10.66.0.9"), std::chrono::milliseconds(250)),
      std::nullopt);

  const std::string env = "UROCE_STATS_DIR=" + dir.path() + " ";
  const Command table = run(env + UROCE_STAT);
  EXPECT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("uroce0"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tx_arp_request"), std::string::npos) << table.out;
  const Command everything = run(env + UROCE_STAT " --all");
  EXPECT_EQ(everything.status, 0);
  EXPECT_NE(everything.out.find("bad_icrc"), std::string::npos) << "drop reasons are listed";
  const Command json = run(env + UROCE_STAT " --json " + std::to_string(getpid()));
  EXPECT_EQ(json.status, 0);
  EXPECT_EQ(json.out.rfind("{\"" + std::to_string(getpid()) + "\":{\"uroce0\":{\"engine\":{", 0),
            0u)
      << json.out;
  EXPECT_NE(json.out.find("\"tx_arp_request\":"), std::string::npos);
  // A mistyped argument is an error, not an empty table.
  EXPECT_EQ(run(env + UROCE_STAT " --jsn 2>/dev/null").status, 2);

  // GID table and port attributes as a verbs program would read them.
  ASSERT_EQ(dev->gids().size(), 2u);
  EXPECT_EQ(dev->gids()[0].bytes[0], 0xFE) << "link-local GID 0";
  EXPECT_EQ(dev->gids()[1], *wire::IpAddr::parse("10.66.0.1")) << "IPv4-mapped RoCEv2 GID";
  EXPECT_EQ(dev->port_attr().gid_tbl_len, kGidTableLen) << "room to spare, as on a NIC";
  EXPECT_NE(dev->attr().node_guid, 0u);
}

// The whole answer of 127.0.0.1:port to GET /metrics.
std::string scrape(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

TEST(Stats, ADeviceServesPrometheusWhenTheConfigurationAsks) {
  test::TempDir dir;
  setenv("UROCE_STATS_DIR", dir.path().c_str(), 1);
  DeviceConfig dc;
  dc.name = "uroce1";
  dc.port = "pipe:prometheus";
  dc.ip = {IpPrefix{"10.67.0.1", 24}};
  Config c;
  c.stats.prometheus = "127.0.0.1:0";
  std::string err;
  test::register_pipe_driver();
  auto dev = Device::open(dc, c, &err);
  ASSERT_TRUE(dev) << err;
  const std::uint16_t port = stats::StatsServer::instance()->prometheus_port();
  ASSERT_NE(port, 0);
  EXPECT_EQ(
      dev->engine().resolve(*wire::IpAddr::parse("10.67.0.9"), std::chrono::milliseconds(100)),
      std::nullopt);
  const std::string body = scrape(port);
  EXPECT_NE(body.find("# TYPE uroce_tx_arp_request counter\n"), std::string::npos) << body;
  EXPECT_NE(body.find("uroce_tx_arp_request{device=\"uroce1\",scope=\"engine\"} "),
            std::string::npos)
      << body;
}

}  // namespace
}  // namespace uroce::verbs
