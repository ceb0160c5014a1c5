/* SPDX-License-Identifier: BSD-3-Clause */
// Two uroce processes in two network namespaces joined by a veth pair,
// each on net_af_packet: RoCEv2 between them over real DPDK ports, clean
// and impaired, and one of them killed mid-transfer. The namespaces are
// created here and removed again, on failure too. Needs root.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "support/tshark.h"

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
          sh("ip -n " + ns_a + " link set " + if_a + " up") == 0 &&
          sh("ip -n " + ns_b + " link set " + if_b + " up") == 0;
    // No IP addresses on the veths: the addresses belong to uroce, and the
    // kernel must not answer ARP or UDP for them.
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
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
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

  VethPair net_;
  test::TempDir dir_;
};

TEST_F(Veth, TwoProcessesMoveEveryByteOverAfPacket) {
  // Role b takes its SENDs from a shared receive queue; UD datagrams too.
  auto [a, b] = run_pair("--ud", "--ud --srq");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(a.output.find("write+read 4194304 bytes ok"), std::string::npos) << a.output;
  EXPECT_NE(b.output.find("receives, writes and atomics verified"), std::string::npos);
  EXPECT_NE(b.output.find("UD datagrams verified"), std::string::npos) << b.output;
  EXPECT_GT(a.stats["sent_pkts"], 2000u);  // 4 MiB + 1 MiB + ... at a 1024 B MTU
  EXPECT_GT(a.stats["tx_arp_request"] + b.stats["tx_arp_request"], 0u);
}

TEST_F(Veth, BytesStayIntactThroughLossReorderingAndDuplication) {
  const std::string faults = "--drop 0.01 --duplicate 0.005 --reorder 0.005 --corrupt 0.001";
  auto [a, b] = run_pair(faults + " --seed 11", faults + " --seed 22");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_GT(a.stats["fault_dropped"] + b.stats["fault_dropped"], 0u);
  EXPECT_GT(a.stats["completer_retry_err"], 0u) << "loss must have caused go-back-N";
  EXPECT_GT(b.stats["duplicate_request"] + b.stats["out_of_seq_request"], 0u);
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
  const auto t0 = std::chrono::steady_clock::now();
  sh("ip netns pids " + net_.ns_b + " | xargs -r kill -9");
  ta.join();
  tb.join();
  ASSERT_TRUE(writing) << read_run(-1, dir_.path() + "/a.out").output;
  auto a = read_run(sa, dir_.path() + "/a.out");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("RETRY_EXC_ERR"), std::string::npos);
  // retry_cnt 7 x 67 ms (timeout 14) is about 0.54 s; allow for scheduling.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(a.stats["retry_exceeded_err"], 1u);
}

// Hugepages for net_memif, allocated and mounted for the test and given
// back afterwards.
class Hugepages {
 public:
  explicit Hugepages(int pages) {
    std::ifstream f("/proc/sys/vm/nr_hugepages");
    f >> before_;
    if (before_ < pages) sh("echo " + std::to_string(pages) + " > /proc/sys/vm/nr_hugepages");
    if (sh("mountpoint -q /dev/hugepages") != 0) {
      sh("mkdir -p /dev/hugepages");
      mounted_ = sh("mount -t hugetlbfs nodev /dev/hugepages") == 0;
    }
    std::ifstream g("/proc/sys/vm/nr_hugepages");
    g >> now_;
  }
  ~Hugepages() {
    if (mounted_) sh("umount /dev/hugepages");
    if (now_ != before_) sh("echo " + std::to_string(before_) + " > /proc/sys/vm/nr_hugepages");
  }
  int pages() const { return now_; }

 private:
  int before_ = 0;
  int now_ = 0;
  bool mounted_ = false;
};

TEST(Memif, TwoProcessesMoveEveryByteOverSharedMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for hugepages";
  Hugepages huge(384);
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
  const std::string sock = dir.path() + "/memif.sock";
  for (int i = 0; i < 1000 && !std::filesystem::exists(sock); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int sa = sh(cmd("a"));
  tb.join();
  const auto a = read_run(sa, dir.path() + "/a.out");
  const auto b = read_run(sb, dir.path() + "/b.out");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(a.output.find("write+read 4194304 bytes ok"), std::string::npos);
  EXPECT_NE(b.output.find("receives, writes and atomics verified"), std::string::npos);
  EXPECT_NE(b.output.find("UD datagrams verified"), std::string::npos);
}

}  // namespace
}  // namespace uroce
