/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Two uroce hosts in the network namespaces of scripts/testbed.sh, for the
// tests that run unmodified programs over uroce (tests/interop,
// tests/rdmacm, tests/ucx): the testbed up and down, the programs under
// uroce-run with each host's addresses, and captures of the RDMA link.
// Not a fixture itself, so that the support library needs no GoogleTest:
// a suite's fixture holds one, brings it up in SetUp and down in TearDown.

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/child.h"
#include "support/stats_lines.h"
#include "support/tshark.h"

namespace uroce::test {

/// What differs between the suites' testbeds.
struct TestbedOptions {
  /// The namespaces are <tag><pid>-a and -b: suites and concurrent runs
  /// of one suite keep apart.
  std::string tag;
  /// The links' MTU (TESTBED_MTU); 0 leaves it to testbed.sh (1500).
  unsigned link_mtu = 0;
  /// uroce's IPv6 address (fd77::1, fd77::2) beside its IPv4 one.
  bool ipv6 = true;
  /// Netdev mode (TESTBED_LAYOUT=netdev): one link, "eth", with the
  /// kernel's addresses 10.78.0.1 and .2, fd78::1 and ::2, which uroce
  /// takes in netdev mode; no ctl link, no addresses of uroce's own.
  bool netdev = false;
  /// Each host's port in netdev mode (uroce-run --port, the daemon's
  /// `port`), a's then b's: "af_xdp", or "" for the default, af_packet.
  std::array<std::string, 2> netdev_ports = {};
  /// Each host's port on the "rdma" link (not netdev mode), a's then b's:
  /// "packet:rdma" (drivers/packet), or "" for net_af_packet0,iface=rdma.
  std::array<std::string, 2> ports = {};
  /// The device's counters to <dir>/<host>.stats at exit (UROCE_STATS_FILE).
  bool stats_file = false;
  /// The device's stats endpoint in <dir>/<host>/ (UROCE_STATS_DIR), for
  /// uroce-stat while the program runs.
  bool stats_dir = false;
};

/// Hosts 'a' and 'b': ctl 192.168.77.1 and .2 (kernel TCP), uroce 10.77.0.1
/// and .2 (and fd77::1, ::2) on the "rdma" link.
class TestbedPair {
 public:
  explicit TestbedPair(TestbedOptions options);
  TestbedPair(const TestbedPair&) = delete;
  TestbedPair& operator=(const TestbedPair&) = delete;

  /// Builds the testbed; false if testbed.sh failed.
  bool up();
  /// Removes it.
  void down();

  /// A directory of this test's own, for logs, captures and counters.
  std::string dir() const { return tmp_.path(); }
  /// The network namespace of `host`.
  std::string ns(char host) const { return prefix_ + host; }
  /// The link uroce drives: "rdma", or "eth" in netdev mode.
  std::string link() const { return options_.netdev ? "eth" : "rdma"; }
  /// `host`'s port on the "rdma" link (not netdev mode).
  std::string port(char host) const;
  /// `host`'s IPv4 address on that link: 10.77.0.1 or .2, 10.78.0.x in
  /// netdev mode.
  std::string ipv4(char host) const;

  /// A shell command running `program` under uroce-run on `host`, with
  /// `env` (VAR=value ...) set for it. In the ASan build, with the
  /// sanitizer's runtime preloaded (UROCE_TEST_PRELOAD, set by the suites'
  /// CMakeLists.txt) ahead of the instrumented binding and leak checking
  /// off: the programs do not free everything they allocate, which is not
  /// the binding's to answer for.
  std::string over_uroce(char host, const std::string& program, const std::string& env = "") const;
  /// The same command for a shell already in `host`'s namespace (one a
  /// launcher such as mpirun's starts there).
  std::string uroce_run(char host, const std::string& program, const std::string& env = "") const;
  /// The variables every program gets (the ASan preload, stats, `env`).
  std::string program_env(char host, const std::string& env) const;

  /// The device daemon of `host` (uroced on the "rdma" link with the
  /// host's addresses, its socket <dir>/<host>.sock, its stats endpoint
  /// in <dir>/<host>d/), started and listening; null if it did not come up
  /// (its log is <dir>/uroced-<host>.log).
  /// `extra` is appended to its configuration (TOML tables).
  std::unique_ptr<Child> start_daemon(char host, const std::string& extra = "") const;
  /// Both hosts' daemons into `out` ('a' first); what went wrong, or "".
  std::string start_daemons(std::unique_ptr<Child> (&out)[2]) const;
  /// Stops a daemon started here (SIGINT), if it runs: whether it exited
  /// cleanly (status 0) within 20 s.
  static bool stop_daemon(std::unique_ptr<Child>& d);
  std::string daemon_socket(char host) const;
  /// A shell command running `program` on `host` attached to the host's
  /// daemon (uroce-run with no port), `env` set for it.
  std::string attached(char host, const std::string& program, const std::string& env = "") const;
  /// The same command for a shell already in `host`'s namespace.
  std::string attached_run(char host, const std::string& program,
                           const std::string& env = "") const;

  /// Whether a TCP socket listens on `port` in `host`'s namespace.
  bool tcp_listening(char host, unsigned port) const;
  /// Waits, at most `limit`, for a TCP listener on `port` on `host`.
  void wait_for_tcp_listener(char host, unsigned port, std::chrono::seconds limit) const;

  /// The counters of the uroce processes running on `host` now, summed
  /// over them, as uroce-stat reads them from their stats endpoints
  /// (stats_dir): "scope.counter" -> value.
  CounterMap live_counters(char host) const;
  /// Waits, at most `limit`, until a uroce process on `host` listens for
  /// connections: the CM's "listeners" gauge (an rdma_cm listener has no
  /// socket for ss to see). Needs stats_dir.
  void wait_for_cm_listener(char host, std::chrono::seconds limit) const;

  /// The counters `host`'s device wrote at exit (stats_file), as
  /// "scope.counter" -> value.
  CounterMap counters(char host) const;
  /// The file they are in.
  std::string stats_path(char host) const;

  /// Starts dumpcap on the RDMA link at both ends, into <dir>/a.pcap and
  /// <dir>/b.pcap, and waits until both capture.
  void start_captures();
  /// Stops them once the frames in flight are written.
  void stop_captures();

 private:
  TestbedOptions options_;
  std::string prefix_;
  TempDir tmp_;
  std::vector<std::unique_ptr<Child>> captures_;
};

}  // namespace uroce::test
