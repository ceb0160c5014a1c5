/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/testbed_pair.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace uroce::test {

using namespace std::chrono_literals;

namespace {

std::string testbed_script() { return std::string(UROCE_SCRIPTS_DIR) + "/testbed.sh"; }

}  // namespace

TestbedPair::TestbedPair(TestbedOptions options)
    : options_(std::move(options)), prefix_(options_.tag + std::to_string(getpid()) + "-") {}

bool TestbedPair::up() {
  std::string cmd;
  if (options_.link_mtu != 0) cmd = "TESTBED_MTU=" + std::to_string(options_.link_mtu) + " ";
  if (options_.netdev) cmd += "TESTBED_LAYOUT=netdev ";
  return sh(cmd + testbed_script() + " up " + prefix_) == 0;
}

void TestbedPair::down() { sh(testbed_script() + " down " + prefix_); }

std::string TestbedPair::program_env(char host, const std::string& env) const {
  const std::string h(1, host);
  std::string vars;
  if (const char* p = std::getenv("UROCE_TEST_PRELOAD"); p && *p)
    vars += std::string(" LD_PRELOAD=") + p + " ASAN_OPTIONS=detect_leaks=0";
  if (options_.stats_dir) {
    sh("mkdir -p " + dir() + "/" + h);
    vars += " UROCE_STATS_DIR=" + dir() + "/" + h;
  }
  if (options_.stats_file) vars += " UROCE_STATS_FILE=" + stats_path(host);
  if (!env.empty()) vars += " " + env;
  return vars;
}

std::string TestbedPair::port(char host) const {
  const std::string& port = options_.ports[host == 'a' ? 0 : 1];
  return port.empty() ? "net_af_packet0,iface=rdma" : port;
}

std::string TestbedPair::ipv4(char host) const {
  return std::string(options_.netdev ? "10.78.0." : "10.77.0.") + (host == 'a' ? "1" : "2");
}

std::string TestbedPair::uroce_run(char host, const std::string& program,
                                   const std::string& env) const {
  if (options_.netdev) {
    const std::string& port = options_.netdev_ports[host == 'a' ? 0 : 1];
    return "env" + program_env(host, env) + " " + std::string(UROCE_BIN_DIR) +
           "/uroce-run --netdev eth " + (port.empty() ? "" : "--port " + port + " ") + "-- " +
           program;
  }
  std::string ip = host == 'a' ? "10.77.0.1/24" : "10.77.0.2/24";
  if (options_.ipv6) ip += host == 'a' ? ",fd77::1/64" : ",fd77::2/64";
  return "env" + program_env(host, env) + " " + std::string(UROCE_BIN_DIR) + "/uroce-run --port " +
         port(host) + " --ip " + ip + " -- " + program;
}

std::string TestbedPair::over_uroce(char host, const std::string& program,
                                    const std::string& env) const {
  return "ip netns exec " + ns(host) + " " + uroce_run(host, program, env);
}

std::string TestbedPair::daemon_socket(char host) const {
  return dir() + "/" + std::string(1, host) + ".sock";
}

std::unique_ptr<Child> TestbedPair::start_daemon(char host, const std::string& extra) const {
  const std::string h(1, host);
  const std::string config = dir() + "/uroced-" + h + ".toml";
  std::string ip = host == 'a' ? "\"10.77.0.1/24\"" : "\"10.77.0.2/24\"";
  if (options_.ipv6) ip += host == 'a' ? ", \"fd77::1/64\"" : ", \"fd77::2/64\"";
  {
    std::ofstream f(config);
    f << "[[device]]\nname = \"uroce0\"\n";
    if (options_.netdev) {
      f << "netdev = \"eth\"\n";
      if (const std::string& port = options_.netdev_ports[host == 'a' ? 0 : 1]; !port.empty())
        f << "port = \"" << port << "\"\n";
    } else
      f << "port = \"" << port(host) << "\"\nip = [" << ip << "]\n";
    f << "[daemon]\nsocket = \"" << daemon_socket(host) << "\"\n" << extra;
  }
  // A daemon started again must not be taken for up by its predecessor's log.
  sh("mkdir -p " + dir() + "/" + h + "d; rm -f " + dir() + "/uroced-" + h + ".log");
  auto d = std::make_unique<Child>("ip netns exec " + ns(host) + " env UROCE_STATS_DIR=" + dir() +
                                       "/" + h + "d " + std::string(UROCE_BIN_DIR) +
                                       "/uroced --config " + config,
                                   dir() + "/uroced-" + h + ".log");
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (slurp(dir() + "/uroced-" + h + ".log").find("listening on") == std::string::npos) {
    if (std::chrono::steady_clock::now() > end) return nullptr;
    std::this_thread::sleep_for(20ms);
  }
  return d;
}

std::string TestbedPair::start_daemons(std::unique_ptr<Child> (&out)[2]) const {
  for (char host : {'a', 'b'}) {
    out[host - 'a'] = start_daemon(host);
    if (!out[host - 'a'])
      return std::string("uroced did not start on ") + host + ":\n" +
             slurp(dir() + "/uroced-" + host + ".log");
  }
  return "";
}

bool TestbedPair::stop_daemon(std::unique_ptr<Child>& d) {
  if (!d) return true;
  d->interrupt();
  const bool clean = d->wait(20s) == 0;
  d.reset();
  return clean;
}

std::string TestbedPair::attached_run(char host, const std::string& program,
                                      const std::string& env) const {
  return "env" + program_env(host, env) + " UROCE_DAEMON_SOCKET=" + daemon_socket(host) + " " +
         std::string(UROCE_BIN_DIR) + "/uroce-run -- " + program;
}

std::string TestbedPair::attached(char host, const std::string& program,
                                  const std::string& env) const {
  return "ip netns exec " + ns(host) + " " + attached_run(host, program, env);
}

bool TestbedPair::tcp_listening(char host, unsigned port) const {
  return sh("ip netns exec " + ns(host) + " ss -Hltn 'sport = :" + std::to_string(port) +
            "' | grep -q LISTEN") == 0;
}

void TestbedPair::wait_for_tcp_listener(char host, unsigned port,
                                        std::chrono::seconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!tcp_listening(host, port) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(50ms);
}

CounterMap TestbedPair::live_counters(char host) const {
  Child stat("env UROCE_STATS_DIR=" + dir() + "/" + std::string(1, host) + " " +
                 std::string(UROCE_BIN_DIR) + "/uroce-stat --all",
             dir() + "/stat.log");
  stat.wait(10s);
  CounterMap out;
  std::istringstream in(stat.output());
  std::string line;
  std::getline(in, line);  // the header
  for (std::string pid, dev, scope, counter; in >> pid >> dev >> scope >> counter;) {
    unsigned long long v = 0;
    in >> v;
    out[scope + "." + counter] += v;
  }
  return out;
}

void TestbedPair::wait_for_cm_listener(char host, std::chrono::seconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (live_counters(host)["cm.listeners"] == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(50ms);
}

std::string TestbedPair::stats_path(char host) const {
  return dir() + "/" + std::string(1, host) + ".stats";
}

CounterMap TestbedPair::counters(char host) const {
  return stats_lines(slurp(stats_path(host)), "uroce0");
}

void TestbedPair::start_captures() {
  // dumpcap at each end: each sees what arrives there (af_packet's
  // transmit ring bypasses the capture taps of its own host). The first
  // 20000 frames are enough and keep the checks quick.
  for (char host : {'a', 'b'}) {
    captures_.push_back(std::make_unique<Child>("ip netns exec " + ns(host) + " dumpcap -q -P -i " +
                                                    link() + " -c 20000 -w " + dir() + "/" + host +
                                                    ".pcap",
                                                dir() + "/dumpcap-" + host + ".log"));
  }
  for (char host : {'a', 'b'}) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (slurp(dir() + "/dumpcap-" + host + ".log").find("Capturing on") == std::string::npos &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(20ms);
  }
}

void TestbedPair::stop_captures() {
  // libpcap hands dumpcap a ring block when it fills or when its read
  // timeout (250 ms) passes; a block still filling when dumpcap is
  // interrupted is lost. Let the last one out first.
  std::this_thread::sleep_for(700ms);
  for (auto& c : captures_) {
    c->interrupt();
    c->wait(20s);
  }
  captures_.clear();
}

}  // namespace uroce::test
