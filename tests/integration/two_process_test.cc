/* SPDX-License-Identifier: BSD-3-Clause */
// Two uroce processes in two network namespaces joined by a veth pair,
// each on net_af_packet: RoCEv2 between them over real DPDK ports, clean
// and impaired, and one of them killed mid-transfer. The namespaces are
// created here and removed again, on failure too. Needs root.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "support/hugepages.h"
#include "support/tshark.h"
#include "wire/mac_control.h"

namespace uroce {
namespace {

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Two namespaces and a veth pair between them, gone when this is.
class VethPair {
 public:
  VethPair() {
    const std::string id = std::to_string(getpid() % 100000) + std::to_string(counter_++);
    ns_a = "uroce-a" + id;
    ns_b = "uroce-b" + id;
    if_a = "ura" + id;
    if_b = "urb" + id;
    ok_ = sh("ip netns add " + ns_a) == 0 && sh("ip netns add " + ns_b) == 0 &&
          sh("ip link add " + if_a + " type veth peer name " + if_b) == 0 &&
          sh("ip link set " + if_a + " netns " + ns_a) == 0 &&
          sh("ip link set " + if_b + " netns " + ns_b) == 0 &&
          sh("ip netns exec " + ns_a + " sysctl -qw net.ipv6.conf." + if_a + ".disable_ipv6=1") ==
              0 &&
          sh("ip netns exec " + ns_b + " sysctl -qw net.ipv6.conf." + if_b + ".disable_ipv6=1") ==
              0 &&
          sh("ip -n " + ns_a + " link set " + if_a + " up") == 0 &&
          sh("ip -n " + ns_b + " link set " + if_b + " up") == 0;
    // No IP addresses on the veths: the addresses belong to uroce, and the
    // kernel must not answer ARP or UDP for them; no IPv6 either, whose
    // router solicitations and MLD reports would land in uroce's buffers.
  }
  ~VethPair() {
    sh("ip netns pids " + ns_a + " 2>/dev/null | xargs -r kill -9 2>/dev/null");
    sh("ip netns pids " + ns_b + " 2>/dev/null | xargs -r kill -9 2>/dev/null");
    sh("ip netns del " + ns_a + " 2>/dev/null");
    sh("ip netns del " + ns_b + " 2>/dev/null");
  }
  bool ok() const { return ok_; }
  std::string ns_a, ns_b, if_a, if_b;

 private:
  static inline int counter_ = 0;
  bool ok_ = false;
};

struct PeerRun {
  int status = -1;
  std::string output;
  std::map<std::string, unsigned long long> stats;
};

// Both peers exited 0; if not, both outputs, since either side's failure
// may be the other's cause.
::testing::AssertionResult both_exited_zero(const PeerRun& a, const PeerRun& b) {
  if (a.status == 0 && b.status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "a exited " << a.status << ":\n"
                                       << a.output << "\nb exited " << b.status << ":\n"
                                       << b.output;
}

PeerRun read_run(int status, const std::string& out_path) {
  PeerRun r;
  r.status = status;
  std::ifstream f(out_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.output = ss.str();
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string tag, name;
    unsigned long long v;
    if (w >> tag >> name >> v && tag == "stat") r.stats[name] = v;
  }
  return r;
}

class Veth : public ::testing::Test {
 protected:
  void SetUp() override {
    // Without root (CAP_SYS_ADMIN, CAP_NET_ADMIN) this fails: a test that
    // cannot build its network has not passed.
    ASSERT_TRUE(net_.ok()) << "could not create namespaces and a veth pair";
  }

  std::string peer_cmd(const std::string& role, const std::string& extra) {
    const bool a = role == "a";
    return "timeout 180 ip netns exec " + (a ? net_.ns_a : net_.ns_b) + " " UROCE_RDMA_PEER +
           " --role " + role + " --device net_af_packet0,iface=" + (a ? net_.if_a : net_.if_b) +
           " --ip " + (a ? "10.77.0.1" : "10.77.0.2") + " --peer " +
           (a ? "10.77.0.2" : "10.77.0.1") + " --dir " + dir_.path() + " " + extra + " > " +
           dir_.path() + "/" + role + ".out 2>&1";
  }

  // Runs both peers to the end.
  std::pair<PeerRun, PeerRun> run_pair(const std::string& extra_a, const std::string& extra_b) {
    int sa = -1, sb = -1;
    std::thread tb([&] { sb = sh(peer_cmd("b", extra_b)); });
    sa = sh(peer_cmd("a", extra_a));
    tb.join();
    return {read_run(sa, dir_.path() + "/a.out"), read_run(sb, dir_.path() + "/b.out")};
  }

  // Starts dumpcap on a's end of the link (which sees what b sends:
  // af_packet's own transmissions bypass the taps) with a capture filter;
  // returns the pcap's path once it captures.
  std::string start_capture(const std::string& name, const std::string& filter) {
    const std::string pcap = dir_.path() + "/" + name + ".pcap";
    const std::string log = dir_.path() + "/dumpcap.log";
    EXPECT_EQ(sh("ip netns exec " + net_.ns_a + " dumpcap -q -P -i " + net_.if_a + " " + filter +
                 " -w " + pcap + " > " + log + " 2>&1 & echo $! > " + dir_.path() + "/dumpcap.pid"),
              0);
    for (int i = 0; i < 500 && sh("grep -q 'Capturing on' " + log) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return pcap;
  }
  // Stops it, after libpcap's last block (it hands one over when its
  // 250 ms timeout passes).
  void stop_capture() {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    sh("kill -INT $(cat " + dir_.path() + "/dumpcap.pid) 2>/dev/null; sleep 0.5");
  }

  VethPair net_;
  test::TempDir dir_;
};

TEST_F(Veth, TwoProcessesMoveEveryByteOverAfPacket) {
  // Role b takes its SENDs from a shared receive queue; UD datagrams too.
  auto [a, b] = run_pair("--ud", "--ud --srq");
  ASSERT_TRUE(both_exited_zero(a, b));
  EXPECT_NE(a.output.find("write+read 4194304 bytes ok"), std::string::npos) << a.output;
  EXPECT_NE(b.output.find("receives, writes and atomics verified"), std::string::npos);
  EXPECT_NE(b.output.find("UD datagrams verified"), std::string::npos) << b.output;
  EXPECT_GT(a.stats["sent_pkts"], 2000u);  // 4 MiB + 1 MiB + ... at a 1024 B MTU
  EXPECT_GT(a.stats["tx_arp_request"] + b.stats["tx_arp_request"], 0u);
}

TEST_F(Veth, BytesStayIntactThroughLossReorderingAndDuplication) {
  const std::string faults = "--drop 0.01 --duplicate 0.005 --reorder 0.005 --corrupt 0.001";
  auto [a, b] = run_pair(faults + " --seed 11", faults + " --seed 22");
  ASSERT_TRUE(both_exited_zero(a, b));
  EXPECT_GT(a.stats["fault_dropped"] + b.stats["fault_dropped"], 0u);
  EXPECT_GT(a.stats["completer_retry_err"], 0u) << "loss must have caused go-back-N";
  EXPECT_GT(b.stats["duplicate_request"] + b.stats["out_of_seq_request"], 0u);
}

// The same faults with selective repeat on both ends: the bytes arrive as
// intact, and a loss is repaired by resending what was lost, never by a
// sequence NAK and going back N.
TEST_F(Veth, WithSelectiveRepeatLossIsRepairedByResendingOnlyWhatWasLost) {
  const std::string faults =
      "--selective-repeat --drop 0.01 --duplicate 0.005 --reorder 0.005 --corrupt 0.001";
  auto [a, b] = run_pair(faults + " --seed 11", faults + " --seed 22");
  ASSERT_TRUE(both_exited_zero(a, b));
  EXPECT_GT(a.stats["fault_dropped"] + b.stats["fault_dropped"], 0u);
  EXPECT_GT(b.stats["sr_ooo_kept"], 0u);
  EXPECT_GT(b.stats["sr_sack_sent"], 0u);
  EXPECT_GT(a.stats["sr_sack_rcvd"], 0u);
  EXPECT_GT(a.stats["sr_retransmitted"], 0u) << "loss must have caused selective resends";
  EXPECT_EQ(a.stats["rcvd_seq_err"], 0u) << "no sequence NAK to a requester that offers it";
  EXPECT_EQ(b.stats["packet_seq_err"], 0u);
  std::printf("selective repeat: %llu dropped, %llu resent, %llu go-back-N\n",
              a.stats["fault_dropped"] + b.stats["fault_dropped"], a.stats["sr_retransmitted"],
              a.stats["completer_retry_err"]);
}

TEST_F(Veth, APeerKilledMidTransferEndsInRetryExcErrNotAHang) {
  int sa = -1;
  std::thread ta([&] { sa = sh(peer_cmd("a", "--expect-peer-death")); });
  std::thread tb([&] { sh(peer_cmd("b", "")); });
  // Once a is writing, kill b outright.
  const auto marker = dir_.path() + "/a.writing";
  for (int i = 0; i < 3000 && !std::filesystem::exists(marker); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool writing = std::filesystem::exists(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sh("ip netns pids " + net_.ns_b + " | xargs -r kill -9");
  ta.join();
  tb.join();
  ASSERT_TRUE(writing) << read_run(-1, dir_.path() + "/a.out").output;
  auto a = read_run(sa, dir_.path() + "/a.out");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("RETRY_EXC_ERR"), std::string::npos);
  EXPECT_EQ(a.stats["retry_exceeded_err"], 1u);
  // Not before retry_cnt (7) retries, each after its local ACK timeout: the
  // protocol's bound, whatever the load. How long that takes on the real
  // clock (7 x 67 ms) is bench/lossless.sh's to measure, and
  // SimScenario.ACutLinkEndsInRetryExcErrAfterRetryCntTimeouts asserts it
  // on virtual time.
  EXPECT_GE(a.stats["local_ack_timeout_err"], 8u);
}

// A slow receiver (b takes at most 300 Mb/s out of its buffer) with PFC
// on. Whatever the load, the bytes arrive intact, b's XOFFs reach a, and
// every PFC frame b sent decodes in tshark as priority 3's. The headroom
// above xoff (448 KiB) holds a's whole window (256 packets), so b's buffer
// drops nothing and nothing is sent twice, unless a stalled past its 1 s
// ACK timeout and sent a window again on top of one still queued. Whether
// a outruns 300 Mb/s, and so how often b pauses it, depends on the
// machine's load: bench/lossless.sh measures that, and
// tests/engine/pfc_engine_test.cc asserts it on virtual time.
TEST_F(Veth, WithPfcASlowReceiverLosesNothingAndItsPausesAreWellFormed) {
  const std::string pcap = start_capture("pfc", "-f 'ether proto 0x8808'");
  // A starved receiver (ctest runs tests side by side on two cores) may
  // keep its backlog above xon for long: no watchdog in this test, and a
  // local ACK timeout of 1 s (timeout 18), as lossless fabrics with deep
  // queues use, so that a long pause is not taken for a loss.
  auto [a, b] = run_pair("--pfc --pfc-watchdog-ms 0 --timeout 18",
                         "--pfc --xoff-kb 64 --rx-rate 300 --rx-buffer-kb 512 --timeout 18");
  stop_capture();
  ASSERT_TRUE(both_exited_zero(a, b));
  // a's buffer has no rate limit: it never drops, it leaves frames in the
  // port's ring.
  EXPECT_EQ(a.stats["rx_buffer_dropped"], 0u);
  if (a.stats["local_ack_timeout_err"] == 0) {
    EXPECT_EQ(b.stats["rx_buffer_dropped"], 0u);
    EXPECT_EQ(a.stats["completer_retry_err"], 0u) << "no go-back-N";
    EXPECT_EQ(b.stats["out_of_seq_request"], 0u);
  }
  if (b.stats["tx_prio3_pause"] > 0) {
    EXPECT_GT(a.stats["rx_prio3_pause"], 0u) << "b's XOFFs reached a";
  }
  std::printf(
      "slow receiver, PFC on: %llu XOFF and %llu XON sent, sender paused %llu us, "
      "%llu frames dropped, %llu go-back-N\n",
      b.stats["tx_prio3_pause"], b.stats["tx_prio3_resume"], a.stats["rx_prio3_pause_duration"],
      b.stats["rx_buffer_dropped"], a.stats["completer_retry_err"]);

  const auto frames =
      test::tshark_decode(pcap, {"eth.src", "eth.dst", "macc.opcode", "macc.cbfc.enbv",
                                 "macc.cbfc.pause_time.c3", "_ws.malformed", "_ws.expert.message"});
  // The capture sees what b sent (at most: libpcap may miss some).
  EXPECT_LE(frames.size(), b.stats["tx_prio3_pause"] + b.stats["tx_prio3_resume"]);
  for (const auto& f : frames) {
    EXPECT_EQ(f.at("eth.dst"), "01:80:c2:00:00:01");
    EXPECT_EQ(test::tshark_number(f.at("macc.opcode")), 0x0101u);
    EXPECT_EQ(test::tshark_number(f.at("macc.cbfc.enbv")), 0x08u) << "priority 3 only";
    EXPECT_EQ(f.at("_ws.malformed"), "");
    EXPECT_EQ(f.at("_ws.expert.message"), "");
    const auto t = test::tshark_number(f.at("macc.cbfc.pause_time.c3"));
    EXPECT_TRUE(t == 0xFFFF || t == 0) << t;
  }
  std::printf("%zu PFC frames captured\n", frames.size());
}

// With priority_tag, RoCE frames carry an 802.1Q tag of VID 0 whose PCP
// is the PFC priority, and both ends take tagged frames.
TEST_F(Veth, APriorityTagCarriesThePfcPriority) {
  const std::string pcap = start_capture("tag", "-c 2000 -f 'vlan'");
  auto [a, b] = run_pair("--priority-tag --pfc", "--priority-tag --pfc");
  stop_capture();
  ASSERT_TRUE(both_exited_zero(a, b));
  const auto frames = test::tshark_decode(pcap, {"vlan.id", "vlan.priority", "ip.dsfield.dscp",
                                                 "infiniband.bth.opcode", "_ws.malformed"});
  ASSERT_FALSE(frames.empty()) << "no tagged frame from b";
  for (const auto& f : frames) {
    EXPECT_EQ(test::tshark_number(f.at("vlan.id")), 0u);
    EXPECT_EQ(test::tshark_number(f.at("vlan.priority")), 3u);
    EXPECT_EQ(test::tshark_number(f.at("ip.dsfield.dscp")), 26u);
    EXPECT_NE(f.at("infiniband.bth.opcode"), "") << "RoCEv2 inside the tag";
    EXPECT_EQ(f.at("_ws.malformed"), "");
  }
}

// On VLAN 100 every frame either end sends carries the tag: RoCE with
// PCP 3, ARP too.
TEST_F(Veth, OnAVlanEveryFrameIsTagged) {
  // The kernel's own IPv6 chatter on the veth (untagged) is not uroce's.
  const std::string pcap = start_capture("vlan", "-c 3000 -f 'not ip6'");
  auto [a, b] = run_pair("--vlan 100", "--vlan 100");
  stop_capture();
  ASSERT_TRUE(both_exited_zero(a, b));
  const auto frames = test::tshark_decode(
      pcap, {"vlan.id", "vlan.priority", "vlan.etype", "infiniband.bth.opcode", "_ws.malformed"});
  ASSERT_FALSE(frames.empty());
  std::size_t roce = 0, arp = 0;
  for (const auto& f : frames) {
    ASSERT_NE(f.at("vlan.id"), "") << "an untagged frame from b";
    EXPECT_EQ(test::tshark_number(f.at("vlan.id")), 100u);
    EXPECT_EQ(f.at("_ws.malformed"), "");
    if (!f.at("infiniband.bth.opcode").empty()) {
      ++roce;
      EXPECT_EQ(test::tshark_number(f.at("vlan.priority")), 3u);
    }
    arp += test::tshark_number(f.at("vlan.etype")) == 0x0806;
  }
  EXPECT_GT(roce, 0u);
  EXPECT_GT(arp, 0u) << "ARP on the VLAN too";
}

// A slow receiver without PFC, its buffer smaller than a's window. Whatever
// the load, the bytes still arrive intact (rdma_peer checks them), nothing
// sends PFC, and whatever b dropped a recovered by going back N. How much
// b drops depends on how far a outruns 300 Mb/s: bench/lossless.sh
// measures it, tests/engine/pfc_engine_test.cc asserts it on virtual time.
TEST_F(Veth, WithoutPfcASlowReceiversDropsAreRecoveredByGoingBackN) {
  auto [a, b] = run_pair("", "--rx-rate 300 --rx-buffer-kb 128");
  ASSERT_TRUE(both_exited_zero(a, b));
  if (b.stats["rx_buffer_dropped"] > 0) {
    EXPECT_GT(a.stats["completer_retry_err"], 0u) << "a drop is recovered only by going back N";
  }
  EXPECT_EQ(b.stats["tx_prio3_pause"], 0u);
  EXPECT_EQ(a.stats["rx_prio3_pause"], 0u);
  std::printf("slow receiver, PFC off: %llu frames dropped, %llu go-back-N\n",
              b.stats["rx_buffer_dropped"], a.stats["completer_retry_err"]);
}

// A PFC storm: something on b's side of the link sends XOFF for priority
// 3 every 200 us, forever. Whatever the load, the storm reaches a and the
// transfer finishes; pauses are ignored only in a storm a declared, and
// every storm is logged. That the watchdog sees the storm within its 50 ms
// depends on the storm thread getting the CPU that often: bench/lossless.sh
// measures it, Pfc.TheWatchdogEndsAStormAndTrafficResumes asserts it on
// virtual time.
TEST_F(Veth, APfcStormNeverStopsTheTransfer) {
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::thread storm([&] {
    // This thread alone enters b's namespace, and runs ahead of the busy
    // pollers: a storm with gaps longer than a pause is no storm.
    sched_param prio{};
    prio.sched_priority = 10;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &prio);
    const int ns = open(("/var/run/netns/" + net_.ns_b).c_str(), O_RDONLY);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) return;
    close(ns);
    const int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));  // b must not see it
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = static_cast<int>(if_nametoindex(net_.if_b.c_str()));
    to.sll_halen = 6;
    std::uint8_t frame[wire::kMinFrameSize];
    std::array<std::uint16_t, 8> times{};
    times[3] = 0xFFFF;
    wire::build_pfc_frame(frame, {{0x02, 0x5, 0x70, 0x12, 0x34, 0x56}}, 1u << 3, times);
    while (!stop) {
      if (sendto(fd, frame, sizeof(frame), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) > 0)
        ++sent;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    close(fd);
  });
  for (int i = 0; i < 100 && sent == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // A 1 s local ACK timeout: under a 200 ms storm the default 67 ms
  // would count retries the machine's load may not let progress reset.
  // Detection after 50 ms: on a loaded machine the storm thread itself may
  // miss its turn for longer than a pause lasts (3.4 ms at 10 Gb/s), which
  // breaks the pause, and a shorter window is likelier to see it unbroken.
  auto [a, b] = run_pair("--pfc --timeout 18 --pfc-watchdog-ms 50", "--pfc --timeout 18");
  stop = true;
  storm.join();
  ASSERT_GT(sent.load(), 0) << "the storm could not be sent";
  ASSERT_TRUE(both_exited_zero(a, b));
  EXPECT_GT(a.stats["rx_prio3_pause"], 0u) << "the storm reached a";
  if (a.stats["rx_pause_ignored"] > 0) {
    EXPECT_GE(a.stats["pfc_storm_detected"], 1u) << "pauses ignored outside a storm";
  }
  EXPECT_EQ(a.stats["pfc_storm_detected"] > 0,
            a.output.find("PFC storm on priority 3") != std::string::npos)
      << a.output;
  std::printf("storm: %d XOFF sent at a, %llu storms detected, %llu pauses ignored\n", sent.load(),
              a.stats["pfc_storm_detected"], a.stats["rx_pause_ignored"]);
}

TEST(Memif, TwoProcessesMoveEveryByteOverSharedMemory) {
  test::Hugepages huge(384);
  ASSERT_GE(huge.pages(), 256) << "could not allocate hugepages for net_memif";
  test::TempDir dir;
  auto cmd = [&](const std::string& role) {
    const bool a = role == "a";
    return "timeout 180 " UROCE_RDMA_PEER " --hugepages --ud --role " + role + (a ? "" : " --srq") +
           " --device net_memif0,role=" + (a ? "client" : "server") + ",socket=" + dir.path() +
           "/memif.sock,socket-abstract=no --ip " + (a ? "10.78.0.1" : "10.78.0.2") + " --peer " +
           (a ? "10.78.0.2" : "10.78.0.1") + " --dir " + dir.path() + " > " + dir.path() + "/" +
           role + ".out 2>&1";
  };
  int sb = -1;
  std::thread tb([&] { sb = sh(cmd("b")); });
  // The client connects to the server's socket: wait for it to exist.
  // (A client that comes too early waits for the server; under TSan,
  // DPDK's heap reuse after the server refuses it is reported as races
  // inside DPDK.)
  const std::string sock = dir.path() + "/memif.sock";
  for (int i = 0; i < 1000 && !std::filesystem::exists(sock); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int sa = sh(cmd("a"));
  tb.join();
  const auto a = read_run(sa, dir.path() + "/a.out");
  const auto b = read_run(sb, dir.path() + "/b.out");
  ASSERT_TRUE(both_exited_zero(a, b));
  EXPECT_NE(a.output.find("write+read 4194304 bytes ok"), std::string::npos);
  EXPECT_NE(b.output.find("receives, writes and atomics verified"), std::string::npos);
  EXPECT_NE(b.output.find("UD datagrams verified"), std::string::npos);
}

}  // namespace
}  // namespace uroce
