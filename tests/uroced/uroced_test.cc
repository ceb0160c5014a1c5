/* SPDX-License-Identifier: BSD-3-Clause */
// Programs from Debian's packages (perftest, ibverbs-utils) attached to
// uroce's device daemon: uroced on each host of scripts/testbed.sh owns
// the host's device on the "rdma" veth, and every program on the host
// attaches to it (uroce-run with no port). What a user of a shared RDMA
// NIC checks: several programs of one host use the device at once, each
// sees only its own traffic, one that dies takes only its own QPs along
// (its peer fails, the others run on), and a daemon that dies fails its
// programs instead of hanging them. Needs root.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child.h"
#include "support/stats_lines.h"
#include "support/testbed_pair.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::slurp;

class Uroced : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bed_.up()) << "cannot build the testbed";
    const std::string error = bed_.start_daemons(daemons_);
    ASSERT_EQ(error, "");
  }
  void TearDown() override {
    for (auto& d : daemons_)
      EXPECT_TRUE(test::TestbedPair::stop_daemon(d)) << "uroced did not stop cleanly";
    bed_.down();
  }

  std::string dir() const { return bed_.dir(); }
  std::string attached(char host, const std::string& program) const {
    return bed_.attached(host, program);
  }

  // The daemon's counters, as uroce-stat prints them, "scope.counter".
  test::CounterMap daemon_counters(char host) const {
    const std::string out = dir() + "/stat-" + std::string(1, host) + ".txt";
    test::sh("UROCE_STATS_DIR=" + dir() + "/" + std::string(1, host) + "d " +
             std::string(UROCE_BIN_DIR) + "/uroce-stat --all > " + out + " 2>&1");
    test::CounterMap m;
    std::istringstream in(slurp(out));
    std::string line;
    std::getline(in, line);  // the heading
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string pid, device, scope, counter;
      unsigned long long v;
      if (f >> pid >> device >> scope >> counter >> v) m[scope + "." + counter] += v;
    }
    return m;
  }

  // The programs' own counters on `host`, summed over the programs
  // (each appends its device's counters at exit).
  test::CounterMap program_counters(char host) const { return bed_.counters(host); }

  test::TestbedPair bed_{{.tag = "ud", .stats_file = true}};
  std::unique_ptr<Child> daemons_[2];
};

TEST_F(Uroced, TwoPingpongsOfOneHostShareItsDevice) {
  // Server and client in the same namespace, on the same device and the
  // same address: only the daemon can put them through to each other.
  Child server(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 500 -c"), dir() + "/server.log");
  bed_.wait_for_tcp_listener('a', 18515, 20s);
  Child client(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 500 -c localhost"),
               dir() + "/client.log");
  ASSERT_EQ(client.wait(60s), 0) << client.output() << "\nserver:\n" << server.output();
  ASSERT_EQ(server.wait(20s), 0) << server.output();
  EXPECT_NE(client.output().find("500 iters in"), std::string::npos) << client.output();
  auto d = daemon_counters('a');
  // What one program sent to the other never left the host.
  EXPECT_GE(d["engine.tx_loopback"], 1000u) << slurp(dir() + "/stat-a.txt");
  EXPECT_GE(d["programs.rx_frames"], 1000u);
  EXPECT_EQ(d["programs.tx_spoofed_source"] + d["programs.tx_spoofed_qpn"] +
                d["programs.tx_malformed"] + d["programs.tx_not_roce"],
            0u);
  // Each program received only frames for its own QPs.
  EXPECT_EQ(program_counters('a')["engine.rx_unknown_qpn"], 0u) << slurp(bed_.stats_path('a'));
}

TEST_F(Uroced, XsrqPingpongsOfOneHostShareTheirXrcDomain) {
  // ibv_xsrq_pingpong opens its XRC domain on /tmp/xrc_domain: server and
  // client of one host get the same one, as with the kernel, and each
  // one's target QPs deliver to its own SRQs in it.
  Child server(attached('a', "ibv_xsrq_pingpong -d uroce0 -g 1"), dir() + "/server.log");
  bed_.wait_for_tcp_listener('a', 18515, 20s);
  Child client(attached('a', "ibv_xsrq_pingpong -d uroce0 -g 1 localhost"), dir() + "/client.log");
  ASSERT_EQ(client.wait(60s), 0) << client.output() << "\nserver:\n" << server.output();
  ASSERT_EQ(server.wait(20s), 0) << server.output();
  EXPECT_TRUE(std::regex_search(client.output(), std::regex("(^|\n)success\n"))) << client.output();
  EXPECT_EQ(program_counters('a')["engine.rx_unknown_qpn"], 0u) << slurp(bed_.stats_path('a'));
}

TEST_F(Uroced, PerftestOfOneHostThroughOneDevice) {
  Child server(attached('a', "ib_send_bw -d uroce0 -x 1 -F -n 2000"), dir() + "/server.log");
  bed_.wait_for_tcp_listener('a', 18515, 20s);
  Child client(attached('a', "ib_send_bw -d uroce0 -x 1 -F -n 2000 localhost"),
               dir() + "/client.log");
  ASSERT_EQ(client.wait(90s), 0) << client.output() << "\nserver:\n" << server.output();
  ASSERT_EQ(server.wait(20s), 0) << server.output();
  EXPECT_TRUE(std::regex_search(client.output(), std::regex("65536\\s+2000\\s")))
      << client.output();
}

TEST_F(Uroced, EightPerftestPairsAcrossTwoHostsAllComplete) {
  // Mixed operations, each pair on its own TCP port; every program of a
  // host on the same device.
  const std::vector<std::string> programs = {"ib_write_bw", "ib_read_bw", "ib_send_bw",
                                             "ib_atomic_bw"};
  std::vector<std::unique_ptr<Child>> servers, clients;
  for (unsigned i = 0; i < 8; ++i) {
    const std::string prog = programs[i % programs.size()];
    const unsigned port = 18600 + i;
    const std::string args = " -d uroce0 -x 1 -F -n 500 -p " + std::to_string(port) +
                             (prog == "ib_atomic_bw" ? "" : " -s 16384");
    servers.push_back(std::make_unique<Child>(attached('b', prog + args),
                                              dir() + "/server" + std::to_string(i) + ".log"));
    bed_.wait_for_tcp_listener('b', port, 20s);
  }
  for (unsigned i = 0; i < 8; ++i) {
    const std::string prog = programs[i % programs.size()];
    const std::string args = " -d uroce0 -x 1 -F -n 500 -p " + std::to_string(18600 + i) +
                             (prog == "ib_atomic_bw" ? "" : " -s 16384");
    clients.push_back(std::make_unique<Child>(attached('a', prog + args + " 192.168.77.2"),
                                              dir() + "/client" + std::to_string(i) + ".log"));
  }
  for (unsigned i = 0; i < 8; ++i) {
    EXPECT_EQ(clients[i]->wait(180s), 0) << "pair " << i << " client:\n"
                                         << clients[i]->output() << "\nserver:\n"
                                         << servers[i]->output();
    EXPECT_EQ(servers[i]->wait(30s), 0) << "pair " << i << " server:\n" << servers[i]->output();
    // perftest's result line: the message size and the iterations.
    EXPECT_TRUE(std::regex_search(clients[i]->output(), std::regex("\\n\\s*\\d+\\s+500\\s")))
        << clients[i]->output();
  }
  for (char host : {'a', 'b'}) {
    auto d = daemon_counters(host);
    auto p = program_counters(host);
    // Every frame the programs handed their rings the daemon took, and
    // sent on (none refused); what it delivered to them they received.
    EXPECT_EQ(p.at("engine.tx_frames"), d["programs.tx_frames"]) << slurp(bed_.stats_path(host));
    EXPECT_GT(d["programs.tx_frames"], 8u * 500);
    EXPECT_LE(p.at("engine.rx_frames"), d["programs.rx_frames"]);
    EXPECT_EQ(d["programs.rx_ring_full"], 0u);
    // The device sent what the programs did (and its own ARP answers).
    EXPECT_GE(d["engine.tx_frames"], d["programs.tx_frames"]);
    // No program saw a frame of another's QPs.
    EXPECT_EQ(p.at("engine.rx_unknown_qpn"), 0u) << slurp(bed_.stats_path(host));
  }
}

TEST_F(Uroced, AKilledProgramsPeerFailsAndTheOtherPairsRunOn) {
  // A long transfer whose passive side is killed, and a pair beside it
  // that must finish. The victim's peer always has WRITEs in flight, so
  // its QP learns of the death (a ping-pong side that waits only for a
  // receive would wait forever, on any RDMA NIC: RC has no keep-alive).
  Child victim(attached('b', "ib_write_bw -d uroce0 -x 1 -F -D 60"), dir() + "/victim.log");
  bed_.wait_for_tcp_listener('b', 18515, 20s);
  Child peer(attached('a', "ib_write_bw -d uroce0 -x 1 -F -D 60 192.168.77.2"),
             dir() + "/peer.log");
  Child bw_server(attached('b', "ib_write_bw -d uroce0 -x 1 -F -D 6 -p 18700"),
                  dir() + "/bw-server.log");
  bed_.wait_for_tcp_listener('b', 18700, 20s);
  Child bw_client(attached('a', "ib_write_bw -d uroce0 -x 1 -F -D 6 -p 18700 192.168.77.2"),
                  dir() + "/bw-client.log");
  // Both pairs are moving data when the victim dies.
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (daemon_counters('b')["programs.attached"] < 2 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(100ms);
  std::this_thread::sleep_for(1500ms);
  const pid_t victim_pid = victim.pid();
  ASSERT_GT(victim_pid, 0);
  victim.signal(SIGKILL);
  EXPECT_EQ(victim.wait(10s), -1);  // killed, not exited
  // The peer's WRITEs go unanswered: retry exceeded (IBV_WC_RETRY_EXC_ERR,
  // 12) within the QP's timeout (perftest's 14 with 7 retries: about
  // half a second), long before its 60 s are up.
  EXPECT_EQ(peer.wait(30s), 1) << peer.output();
  EXPECT_NE(peer.output().find("Failed status 12"), std::string::npos) << peer.output();
  EXPECT_EQ(bw_client.wait(60s), 0) << bw_client.output() << "\nserver:\n" << bw_server.output();
  EXPECT_EQ(bw_server.wait(20s), 0) << bw_server.output();
  // The daemon dropped the dead program, and its QPs with it.
  auto d = daemon_counters('b');
  EXPECT_EQ(d.count("process:" + std::to_string(victim_pid) + ".qps"), 0u)
      << slurp(dir() + "/stat-b.txt");
}

TEST_F(Uroced, ADaemonThatDiesFailsItsProgramsAndANewOneServes) {
  Child watch(attached('a', "ibv_asyncwatch -d uroce0"), dir() + "/asyncwatch.log");
  Child server(attached('b', "ibv_rc_pingpong -d uroce0 -g 1 -n 100000000"), dir() + "/server.log");
  bed_.wait_for_tcp_listener('b', 18515, 20s);
  Child client(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 100000000 192.168.77.2"),
               dir() + "/client.log");
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (daemon_counters('a')["programs.attached"] < 2 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(100ms);
  std::this_thread::sleep_for(1s);
  daemons_[0]->signal(SIGKILL);
  daemons_[0]->wait(10s);
  daemons_[0].reset();
  // The program on a fails its work (flushed) and exits: no hang. (Its
  // peer on b learns of it only if a SEND of its own was in flight: RC
  // has no keep-alive; it is stopped below.)
  EXPECT_NE(client.wait(30s), 0) << client.output();
  EXPECT_NE(client.output().find("Failed status"), std::string::npos) << client.output();
  server.signal(SIGKILL);
  // The device's loss was an asynchronous event.
  const auto watch_end = std::chrono::steady_clock::now() + 10s;
  while (watch.output().find("IBV_EVENT_DEVICE_FATAL") == std::string::npos &&
         std::chrono::steady_clock::now() < watch_end)
    std::this_thread::sleep_for(50ms);
  watch.interrupt();
  watch.wait(10s);
  EXPECT_NE(watch.output().find("IBV_EVENT_DEVICE_FATAL"), std::string::npos) << watch.output();

  // A daemon started again serves new programs.
  daemons_[0] = bed_.start_daemon('a');
  ASSERT_TRUE(daemons_[0]) << slurp(dir() + "/uroced-a.log");
  Child server2(attached('b', "ibv_rc_pingpong -d uroce0 -g 1 -n 200 -p 18516"),
                dir() + "/server2.log");
  bed_.wait_for_tcp_listener('b', 18516, 20s);
  Child client2(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 200 -p 18516 192.168.77.2"),
                dir() + "/client2.log");
  EXPECT_EQ(client2.wait(60s), 0) << client2.output() << "\nserver:\n" << server2.output();
  EXPECT_EQ(server2.wait(20s), 0) << server2.output();
}

TEST_F(Uroced, TwoConnectionManagersOfOneHostEachGetTheirOwnConnections) {
  // rping and ucmatose listen on host b through one device: each
  // connection request must reach the program that listens on its port,
  // and a request for a port nobody listens on is rejected at once.
  Child ucma_server(attached('b', "ucmatose -b 10.77.0.2 -c 2"), dir() + "/ucma-server.log");
  Child rping_server(attached('b', "rping -s -a 10.77.0.2 -p 7000 -C 10 -V"),
                     dir() + "/rping-server.log");
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (daemon_counters('b')["programs.attached"] < 2 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(100ms);
  std::this_thread::sleep_for(500ms);  // both listening
  Child rping(attached('a', "rping -c -a 10.77.0.2 -p 7000 -C 10 -V"), dir() + "/rping.log");
  EXPECT_EQ(rping.wait(60s), 0) << rping.output() << "\nserver:\n" << rping_server.output();
  Child ucma(attached('a', "ucmatose -s 10.77.0.2 -c 2"), dir() + "/ucma.log");
  EXPECT_EQ(ucma.wait(60s), 0) << ucma.output() << "\nserver:\n" << ucma_server.output();
  EXPECT_NE(ucma.output().find("test complete"), std::string::npos) << ucma.output();
  EXPECT_EQ(rping_server.wait(20s), 0) << rping_server.output();
  EXPECT_EQ(ucma_server.wait(20s), 0) << ucma_server.output();

  // Nobody listens on 7999; a CM of the host answers for it.
  Child listener(attached('b', "rping -s -a 10.77.0.2 -p 7001 -C 1"), dir() + "/keep.log");
  std::this_thread::sleep_for(1s);
  const auto start = std::chrono::steady_clock::now();
  Child nobody(attached('a', "rping -c -a 10.77.0.2 -p 7999 -C 1"), dir() + "/nobody.log");
  EXPECT_NE(nobody.wait(30s), 0) << nobody.output();
  // At once: the REQ would be resent after 6 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << nobody.output();
  EXPECT_NE(nobody.output().find("RDMA_CM_EVENT_REJECTED, error 8"), std::string::npos)
      << nobody.output();
  listener.interrupt();
  listener.wait(10s);
}

TEST_F(Uroced, APortOneProgramListensOnIsTheHostsUntilItEnds) {
  // As on a kernel host, the rdma_cm's ports are the host's: a persistent
  // rping server holds 7002 on host b's one device.
  Child first(attached('b', "rping -s -P -a 10.77.0.2 -p 7002 -C 1 -V"), dir() + "/first.log");
  // Until it listens a client is rejected; then it serves.
  const auto connect = [&](const std::string& log) {
    const auto end = std::chrono::steady_clock::now() + 30s;
    int status = -1;
    while (status != 0 && std::chrono::steady_clock::now() < end) {
      Child client(attached('a', "rping -c -a 10.77.0.2 -p 7002 -C 1 -V"), dir() + "/" + log);
      status = client.wait(30s);
      if (status != 0) std::this_thread::sleep_for(200ms);
    }
    return status;
  };
  ASSERT_EQ(connect("client1.log"), 0) << first.output();
  // Expect: a second program may bind the port neither on that address
  // nor on the any address, with the kernel's errnos.
  Child second(attached('b', "rping -s -a 10.77.0.2 -p 7002 -C 1"), dir() + "/second.log");
  EXPECT_NE(second.wait(30s), 0);
  EXPECT_NE(second.output().find("rdma_bind_addr: Address already in use"), std::string::npos)
      << second.output();
  Child any(attached('b', "rping -s -a 0.0.0.0 -p 7002 -C 1"), dir() + "/any.log");
  EXPECT_NE(any.wait(30s), 0);
  EXPECT_NE(any.output().find("rdma_bind_addr: Cannot assign requested address"), std::string::npos)
      << any.output();
  // Expect: the first serves on, and once it ended the port is free.
  ASSERT_EQ(connect("client2.log"), 0) << first.output();
  first.interrupt();
  first.wait(20s);
  Child third(attached('b', "rping -s -a 10.77.0.2 -p 7002 -C 1 -V"), dir() + "/third.log");
  EXPECT_EQ(connect("client3.log"), 0) << third.output();
  EXPECT_EQ(third.wait(20s), 0) << third.output();
  // Expect: a port below 1024 is root's, as the kernel keeps it from a
  // user without CAP_NET_BIND_SERVICE.
  ASSERT_EQ(chmod(dir().c_str(), 0777), 0);
  Child low("ip netns exec " + bed_.ns('b') + " setpriv --reuid=4242 --regid=4242 --clear-groups " +
                bed_.attached_run('b', "rping -s -a 10.77.0.2 -p 500 -C 1"),
            dir() + "/low.log");
  EXPECT_NE(low.wait(30s), 0);
  EXPECT_NE(low.output().find("rdma_bind_addr: Permission denied"), std::string::npos)
      << low.output();
}

TEST_F(Uroced, ACaptureOfTheDeviceDecodesAndPrometheusAgreesWithUroceStat) {
  // Host a's daemon again, this time serving Prometheus too.
  daemons_[0]->interrupt();
  ASSERT_EQ(daemons_[0]->wait(20s), 0);
  daemons_[0] = bed_.start_daemon('a', "[stats]\nprometheus = \"127.0.0.1:9464\"\n");
  ASSERT_TRUE(daemons_[0]) << slurp(dir() + "/uroced-a.log");

  // What host a's device sends and receives: a pair across the link and
  // a pair inside the host (self-delivered, never on the wire).
  const std::string pcap = dir() + "/device-a.pcapng";
  Child capture("ip netns exec " + bed_.ns('a') + " " + std::string(UROCE_BIN_DIR) +
                    "/uroce-stat capture --socket " + bed_.daemon_socket('a') + " -w " + pcap +
                    " -t 60",
                dir() + "/capture.log");
  std::this_thread::sleep_for(500ms);
  {
    Child server(attached('b', "ibv_rc_pingpong -d uroce0 -g 1 -n 200"), dir() + "/s1.log");
    bed_.wait_for_tcp_listener('b', 18515, 20s);
    Child client(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 200 192.168.77.2"),
                 dir() + "/c1.log");
    ASSERT_EQ(client.wait(60s), 0) << client.output();
    ASSERT_EQ(server.wait(20s), 0) << server.output();
  }
  {
    Child server(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 200 -p 18520"),
                 dir() + "/s2.log");
    bed_.wait_for_tcp_listener('a', 18520, 20s);
    Child client(attached('a', "ibv_rc_pingpong -d uroce0 -g 1 -n 200 -p 18520 localhost"),
                 dir() + "/c2.log");
    ASSERT_EQ(client.wait(60s), 0) << client.output();
    ASSERT_EQ(server.wait(20s), 0) << server.output();
  }
  capture.interrupt();
  ASSERT_EQ(capture.wait(20s), 0) << capture.output();
  const auto frames = test::tshark_decode(
      pcap,
      {"frame.number", "udp.dstport", "infiniband.bth.opcode", "_ws.malformed", "frame.comment"});
  std::size_t roce = 0, self = 0;
  for (const auto& f : frames) {
    EXPECT_EQ(f.at("_ws.malformed"), "") << pcap << " frame " << f.at("frame.number");
    if (f.at("udp.dstport") != "4791") continue;
    ++roce;
    EXPECT_NE(f.at("infiniband.bth.opcode"), "") << "frame " << f.at("frame.number");
    if (f.at("frame.comment").find("self-delivered") != std::string::npos) ++self;
  }
  // Both ping-pongs, each way: 200 iterations of SEND and ACK at least.
  EXPECT_GE(roce, 4u * 200) << capture.output();
  EXPECT_GE(self, 2u * 200) << capture.output();

  // Idle now: Prometheus and uroce-stat print the same numbers.
  const std::string metrics = dir() + "/metrics.txt";
  ASSERT_EQ(test::sh("ip netns exec " + bed_.ns('a') +
                     " /usr/bin/python3 -c \"import urllib.request; print(urllib.request.urlopen("
                     "'http://127.0.0.1:9464/metrics').read().decode())\" > " +
                     metrics),
            0);
  const std::string text = slurp(metrics);
  auto d = daemon_counters('a');
  for (const char* counter : {"rx_frames", "tx_frames", "tx_loopback", "rx_forwarded"}) {
    const std::regex line(std::string("uroce_") + counter +
                          R"(\{device="uroce0",scope="engine"\} (\d+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, line)) << counter << " not in:\n" << text;
    EXPECT_EQ(std::stoull(m[1]), d[std::string("engine.") + counter]) << counter;
    EXPECT_GT(std::stoull(m[1]), 0u) << counter;
  }
}

}  // namespace
}  // namespace uroce
