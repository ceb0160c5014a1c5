/* SPDX-License-Identifier: BSD-3-Clause */
// uroce on net_tap, the PMD that offers IPv4 checksum offload: RoCEv2
// frames leave with their IPv4 header checksum left to the port, and the
// checksum on the wire is right. The kernel end of the tap plays the peer
// far enough to answer ARP; it drops the RDMA traffic, which is all this
// needs. Runs in a network namespace of the process's own. Needs root.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/pcap.h"
#include "support/tshark.h"
#include "uroce/uroce.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::uint64_t counter(const std::vector<Counter>& cs, const std::string& name) {
  for (const auto& [n, v] : cs)
    if (n == name) return v;
  return 0;
}

TEST(Tap, Ipv4ChecksumsAreOffloadedAndRightOnTheWire) {
  // A network namespace of this process's own, gone with the process:
  // EAL's threads, and the tap it creates, live there too.
  ASSERT_EQ(unshare(CLONE_NEWNET), 0);

  DeviceConfig dc;
  dc.name = "uroce0";
  dc.port = "net_tap0,iface=ut0";
  dc.ip = {IpPrefix{"10.66.0.1", 24}};
  std::string err;
  auto dev = Device::open(dc, Config{}, &err);
  ASSERT_NE(dev, nullptr) << err;
  // The kernel's end of the tap answers ARP for the peer's address.
  ASSERT_EQ(sh("ip addr add 10.66.0.2/24 dev ut0 && ip link set ut0 up"), 0);

  // Capture the kernel's side of the tap with a packet socket of our own.
  const int sock = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  ASSERT_GE(sock, 0);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(if_nametoindex("ut0"));
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)), 0);
  const timeval tv{0, 100000};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::vector<test::Frame> captured;
  std::atomic<bool> stop{false};
  std::thread capture([&] {
    std::vector<std::uint8_t> buf(65536);
    while (!stop) {
      const ssize_t n = recv(sock, buf.data(), buf.size(), 0);
      if (n > 0) captured.emplace_back(buf.begin(), buf.begin() + n);
    }
  });

  auto pd = dev->alloc_pd();
  auto cq = dev->create_cq(64);
  std::vector<std::uint8_t> buf(4096, 0x5A);
  auto mr = pd->reg_mr(buf.data(), buf.size(), access::kAll);
  auto qp = pd->create_qp({.send_cq = cq.get(), .recv_cq = cq.get()});
  ASSERT_TRUE(mr && qp);
  ConnectOptions o;
  o.retry_cnt = 1;
  o.timeout = 10;  // 4 ms: nobody will acknowledge
  ASSERT_EQ(qp->connect({*Gid::from_ip("10.66.0.2"), 0x123, 0}, o), 0);
  const Sge sge{reinterpret_cast<std::uint64_t>(buf.data()), 2048, mr->lkey()};
  ASSERT_EQ(
      qp->post_send(
          {.opcode = Opcode::kRdmaWrite, .sges = {&sge, 1}, .remote_addr = 0x1000, .rkey = 0x77}),
      0);
  const auto wc = cq->wait(5s);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, WcStatus::kRetryExcErr) << "the kernel does not speak RoCE";

  std::this_thread::sleep_for(200ms);
  stop = true;
  capture.join();
  close(sock);
  EXPECT_GT(counter(dev->counters(), "tx_ipv4_checksum_offload"), 0u)
      << "net_tap offers IPv4 checksum offload; uroce should have used it";

  test::TempDir dir;
  const std::string pcap = dir.path() + "/tap.pcap";
  test::write_pcap(pcap, captured);
  const auto frames = test::tshark_decode(
      pcap, {"frame.number", "udp.dstport", "ip.checksum.status", "_ws.malformed"},
      {"ip.check_checksum:TRUE"});
  std::size_t roce = 0;
  for (const auto& f : frames) {
    if (f.at("udp.dstport") != "4791") continue;
    ++roce;
    EXPECT_EQ(f.at("ip.checksum.status"), "1") << "frame " << f.at("frame.number");
    EXPECT_EQ(f.at("_ws.malformed"), "") << "frame " << f.at("frame.number");
  }
  EXPECT_GE(roce, 2u) << "the WRITE and its retry";
  qp.reset();
  mr.reset();
  cq.reset();
  pd.reset();
  dev.reset();
}

}  // namespace
}  // namespace uroce
