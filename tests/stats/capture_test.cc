/* SPDX-License-Identifier: BSD-3-Clause */
// Capture (uroce-stat capture): the pcapng writer as Wireshark reads it,
// the engine showing the frames it delivers to itself, and the device
// daemon sending a capture client the frames of its port.

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon/protocol.h"
#include "daemon/server.h"
#include "engine/engine.h"
#include "port/capture_port.h"
#include "port/shm_ring.h"
#include "stats/pcapng.h"
#include "stats/stats_server.h"
#include "support/pipe_driver.h"
#include "support/pipe_port.h"
#include "support/tshark.h"
#include "support/wire_samples.h"
#include "verbs/device.h"
#include "wire/arp.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using Direction = stats::PcapngWriter::Direction;

bool have_tshark() { return std::system("command -v tshark >/dev/null 2>&1") == 0; }

std::vector<std::uint8_t> arp_request() {
  std::vector<std::uint8_t> f(64);
  f.resize(wire::build_arp_request(f, {{0x02, 0, 0, 0, 0, 1}}, 0x0A000001, 0x0A000002));
  return f;
}

std::vector<std::uint8_t> roce_send() {
  std::mt19937_64 rng(7);
  return test::build_frame(test::sample_route(false), test::sample_packet(0x04, rng));
}

TEST(Pcapng, TsharkReadsEveryFrameWithItsDirectionAndTime) {
  if (!have_tshark()) GTEST_SKIP() << "tshark is not installed";
  test::TempDir dir;
  const std::string path = dir.path() + "/known.pcapng";
  const auto arp = arp_request();
  const auto roce = roce_send();
  {
    stats::PcapngWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, &err)) << err;
    const std::uint32_t eth0 = w.add_interface("uroce0");
    const std::uint32_t eth1 = w.add_interface("uroce1");
    // Odd lengths on purpose: every block is padded to 32 bits.
    w.write(eth0, 1'700'000'000'123'456'789ull, arp.data(), static_cast<std::uint32_t>(arp.size()),
            static_cast<std::uint32_t>(arp.size()), Direction::kInbound);
    w.write(eth0, 1'700'000'000'123'456'790ull, roce.data(),
            static_cast<std::uint32_t>(roce.size()), static_cast<std::uint32_t>(roce.size()),
            Direction::kOutbound);
    w.write(eth1, 1'700'000'001'000'000'001ull, roce.data(), 41,
            static_cast<std::uint32_t>(roce.size()), Direction::kUnknown, "self-delivered");
    EXPECT_EQ(w.frames(), 3u);
    ASSERT_TRUE(w.close());
  }
  const auto frames = test::tshark_decode(
      path, {"frame.number", "frame.interface_name", "frame.time_epoch", "frame.len",
             "frame.cap_len", "frame.packet_flags_direction", "frame.comment", "eth.type",
             "arp.opcode", "udp.dstport", "infiniband.bth.opcode", "_ws.malformed"});
  ASSERT_EQ(frames.size(), 3u);
  for (const auto& f : frames) EXPECT_EQ(f.at("_ws.malformed"), "") << f.at("frame.number");
  // Expect: the ARP request inbound on uroce0, to the nanosecond.
  EXPECT_EQ(frames[0].at("frame.interface_name"), "uroce0");
  EXPECT_EQ(frames[0].at("frame.time_epoch").substr(0, 20), "1700000000.123456789");
  EXPECT_EQ(frames[0].at("arp.opcode"), "1");
  EXPECT_EQ(test::tshark_number(frames[0].at("frame.packet_flags_direction")), 1u);
  // Expect: the RoCEv2 SEND outbound, whole.
  EXPECT_EQ(frames[1].at("udp.dstport"), "4791");
  EXPECT_EQ(test::tshark_number(frames[1].at("infiniband.bth.opcode")), 4u);
  EXPECT_EQ(test::tshark_number(frames[1].at("frame.packet_flags_direction")), 2u);
  EXPECT_EQ(frames[1].at("frame.len"), std::to_string(roce.size()));
  // Expect: the cut copy on uroce1, its full length kept, its comment shown.
  EXPECT_EQ(frames[2].at("frame.interface_name"), "uroce1");
  EXPECT_EQ(frames[2].at("frame.cap_len"), "41");
  EXPECT_EQ(frames[2].at("frame.len"), std::to_string(roce.size()));
  EXPECT_EQ(frames[2].at("frame.comment"), "self-delivered");
}

TEST(Capture, EngineShowsTheFramesItDeliversToItself) {
  const wire::MacAddr mac{{0x02, 0, 0, 0, 0, 0x11}};
  test::PipePort a(mac), b(wire::MacAddr{{0x02, 0, 0, 0, 0, 0x12}});
  test::PipePort::join(a, b);
  a.keep_sent = true;
  std::vector<std::vector<std::uint8_t>> seen;
  engine::EngineConfig ec;
  ec.addresses = {*wire::IpAddr::parse("10.0.0.1"), *wire::IpAddr::parse("10.0.0.2")};
  ec.loopback_tap = [&](wire::ConstBytes f) { seen.emplace_back(f.begin(), f.end()); };
  engine::Engine e(a, ec);
  // A SEND from one of the device's addresses to the other.
  wire::RoceRoute route = test::sample_route(false);
  route.src_mac = route.dst_mac = mac;
  std::mt19937_64 rng(3);
  const auto frame = test::build_frame(route, test::sample_packet(0x04, rng));
  port::TxFrame f;
  ASSERT_TRUE(a.tx_alloc(static_cast<std::uint32_t>(frame.size()), f));
  std::memcpy(f.room.data(), frame.data(), frame.size());
  f.length = static_cast<std::uint32_t>(frame.size());
  e.locked([&] { e.send_frames(&f, 1); });
  // Expect: shown once, as sent, and never on the wire.
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], frame);
  EXPECT_TRUE(a.sent.empty());
}

// A port whose transmit ring is full every other call.
class FullEveryOtherTime final : public test::PipePort {
 public:
  using PipePort::PipePort;
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override {
    full_ = !full_;
    return full_ ? 0 : PipePort::tx_burst(frames, n);
  }

 private:
  bool full_ = false;
};

TEST(Capture, PortShowsAFrameRetriedOnce) {
  port::CapturePort cap(std::make_unique<FullEveryOtherTime>(wire::MacAddr{{0x02, 0, 0, 0, 0, 1}}));
  std::size_t shown = 0;
  cap.set_tap([&](port::Direction, wire::ConstBytes) { ++shown; });
  port::TxFrame tx;
  ASSERT_TRUE(cap.tx_alloc(60, tx));
  tx.length = 60;
  // Expect: refused, then taken: one frame on the wire, shown once.
  ASSERT_EQ(cap.tx_burst(&tx, 1), 0);
  ASSERT_EQ(cap.tx_burst(&tx, 1), 1);
  EXPECT_EQ(shown, 1u);
  // Expect: a frame refused then freed was shown when handed over (the
  // tap cannot wait to see whether it is taken); a new one in its buffer
  // is a new frame.
  ASSERT_TRUE(cap.tx_alloc(60, tx));
  tx.length = 60;
  ASSERT_EQ(cap.tx_burst(&tx, 1), 0);
  cap.tx_free(tx);
  ASSERT_TRUE(cap.tx_alloc(60, tx));
  tx.length = 60;
  ASSERT_EQ(cap.tx_burst(&tx, 1), 1);
  EXPECT_EQ(shown, 3u);
}

TEST(Capture, PortShowsFramesBothWays) {
  auto inner = std::make_unique<test::PipePort>(wire::MacAddr{{0x02, 0, 0, 0, 0, 0x21}});
  test::PipePort peer(wire::MacAddr{{0x02, 0, 0, 0, 0, 0x22}});
  test::PipePort::join(*inner, peer);
  test::PipePort* raw = inner.get();
  port::CapturePort cap(std::move(inner));
  std::vector<std::pair<port::Direction, std::size_t>> seen;
  cap.set_tap([&](port::Direction d, wire::ConstBytes f) { seen.emplace_back(d, f.size()); });
  raw->inject(arp_request());
  port::RxFrame rx[4];
  ASSERT_EQ(cap.rx_burst(rx, 4), 1);
  cap.rx_release(rx, 1);
  port::TxFrame tx;
  ASSERT_TRUE(cap.tx_alloc(60, tx));
  tx.length = 60;
  ASSERT_EQ(cap.tx_burst(&tx, 1), 1);
  // Expect: one frame in, one out.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, port::Direction::kInbound);
  EXPECT_EQ(seen[1].first, port::Direction::kOutbound);
  EXPECT_EQ(seen[1].second, 60u);
  cap.set_tap({});
  ASSERT_TRUE(cap.tx_alloc(60, tx));
  tx.length = 60;
  ASSERT_EQ(cap.tx_burst(&tx, 1), 1);
  EXPECT_EQ(seen.size(), 2u) << "no tap, nothing shown";
}

// The daemon on a port in memory, its loop on a thread of its own.
class DaemonCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("UROCE_STATS_DIR", dir_.path().c_str(), 1);
    test::register_pipe_driver();
    Config c;
    DeviceConfig dc;
    dc.name = "uroce0";
    static int pipes = 0;  // a pipe of its own per test: the driver joins by name
    pipe_ = "pipe:capture" + std::to_string(pipes++);
    dc.port = pipe_;
    dc.ip = {IpPrefix{"10.77.0.1", 24}};
    c.devices = {dc};
    c.daemon_socket = dir_.path() + "/uroced.sock";
    std::string err;
    server_ = daemon::Server::open(c, &err);
    ASSERT_TRUE(server_) << err;
    loop_ = std::thread([this] { server_->run(stop_); });
  }
  void TearDown() override { stop(); }
  void stop() {
    stop_ = true;
    if (loop_.joinable()) loop_.join();
  }
  // A capture client: its connection, the device the daemon named.
  int start_capture(const std::string& device, std::string* named) {
    const int fd = daemon::connect_daemon(server_->socket_path());
    if (fd < 0) return -1;
    daemon::Message req, reply;
    req.op = daemon::Op::kCapture;
    req.text = device;
    if (!daemon::call(fd, req, &reply) || reply.op != daemon::Op::kDone) {
      close(fd);
      return -1;
    }
    *named = reply.text;
    return fd;
  }
  struct Captured {
    std::uint32_t direction;
    daemon::FrameHeader header;
    std::vector<std::uint8_t> frame;
  };
  // The frames that arrive on `fd` until `want` have or `wait` passes.
  static std::vector<Captured> read_frames(int fd, std::size_t want,
                                           std::chrono::milliseconds wait) {
    std::vector<Captured> out;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (out.size() < want && std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      daemon::Message m;
      if (daemon::recv_message(fd, &m) != 1) break;
      if (m.op != daemon::Op::kFrame || m.text.size() < sizeof(daemon::FrameHeader)) continue;
      Captured c;
      c.direction = m.value;
      std::memcpy(&c.header, m.text.data(), sizeof(c.header));
      c.frame.assign(m.text.begin() + sizeof(c.header), m.text.end());
      out.push_back(std::move(c));
    }
    return out;
  }

  test::TempDir dir_;
  std::string pipe_;
  std::unique_ptr<daemon::Server> server_;
  std::atomic<bool> stop_{false};
  std::thread loop_;
};

TEST_F(DaemonCapture, TwoClientsEachSeeTheArpExchangeOfAPeer) {
  std::string named;
  const int first = start_capture("", &named);
  ASSERT_GE(first, 0);
  EXPECT_EQ(named, "uroce0") << "no device named: the first";
  const int second = start_capture("uroce0", &named);
  ASSERT_GE(second, 0);
  EXPECT_LT(start_capture("uroce9", &named), 0) << "no such device";

  // The other end of the pipe: a device that resolves the daemon's address.
  DeviceConfig peer;
  peer.name = "peer0";
  peer.port = pipe_;
  peer.ip = {IpPrefix{"10.77.0.2", 24}};
  peer.link_wait_ms = 0;
  std::string err;
  auto dev = verbs::Device::open(peer, Config{}, &err);
  ASSERT_TRUE(dev) << err;
  ASSERT_TRUE(dev->engine().resolve(*wire::IpAddr::parse("10.77.0.1"), 2000ms));

  for (const int fd : {first, second}) {
    // Expect: the peer's request in, the daemon's reply out, in order.
    const auto frames = read_frames(fd, 2, 2000ms);
    ASSERT_EQ(frames.size(), 2u);
    wire::ArpPacket req, rep;
    ASSERT_TRUE(wire::parse_arp_frame(frames[0].frame, req));
    ASSERT_TRUE(wire::parse_arp_frame(frames[1].frame, rep));
    EXPECT_EQ(frames[0].direction, static_cast<std::uint32_t>(port::Direction::kInbound));
    EXPECT_EQ(req.op, wire::ArpOp::kRequest);
    EXPECT_EQ(frames[1].direction, static_cast<std::uint32_t>(port::Direction::kOutbound));
    EXPECT_EQ(rep.op, wire::ArpOp::kReply);
    EXPECT_EQ(frames[1].header.length, frames[1].frame.size());
    EXPECT_EQ(frames[1].header.dropped, 0u);
    EXPECT_LE(frames[0].header.time_ns, frames[1].header.time_ns);
    EXPECT_GT(frames[0].header.time_ns, 1'600'000'000ull * 1'000'000'000ull) << "wall clock";
  }
  dev.reset();

  // Expect: the daemon counts what it sent, and names no drop.
  const std::string snap = stats::StatsServer::instance()->snapshot();
  EXPECT_NE(snap.find("uroce0 capture capture_frames "), std::string::npos) << snap;
  EXPECT_NE(snap.find("uroce0 capture capture_dropped 0\n"), std::string::npos) << snap;

  // Expect: once its clients hang up, the port has no tap.
  close(first);
  close(second);
  std::this_thread::sleep_for(100ms);
  stop();
  auto* tapped = dynamic_cast<port::CapturePort*>(&server_->device(0).port());
  ASSERT_NE(tapped, nullptr);
  EXPECT_FALSE(tapped->capturing());
}

TEST_F(DaemonCapture, AFrameOfAProgramToTheHostItselfIsCapturedOnce) {
  std::string named;
  const int cap = start_capture("uroce0", &named);
  ASSERT_GE(cap, 0);
  // A program of the host, attached through the protocol as libibverbs
  // does it: its rings, and the device's MAC.
  const int prog = daemon::connect_daemon(server_->socket_path());
  ASSERT_GE(prog, 0);
  daemon::Message req, reply;
  req.op = daemon::Op::kAttach;
  req.text = "uroce0";
  ASSERT_TRUE(daemon::call(prog, req, &reply));
  ASSERT_EQ(reply.op, daemon::Op::kAttached) << reply.text;
  daemon::PortInfo info;
  ASSERT_TRUE(daemon::parse_port_info(reply.text, &info));
  std::string err;
  auto rings = port::ShmRegion::map(reply.fd, &err);
  ASSERT_TRUE(rings) << err;
  port::RingProducer to_daemon(rings->ring(port::ShmRegion::Ring::kToDaemon));
  // A SEND to another QP on the device's own address: it never reaches
  // the wire.
  wire::RoceRoute route = test::sample_route(false);
  std::memcpy(route.src_mac.bytes.data(), info.mac, 6);
  route.dst_mac = route.src_mac;
  route.src_ip = route.dst_ip = *wire::IpAddr::parse("10.77.0.1");
  std::mt19937_64 rng(5);
  const auto frame = test::build_frame(route, test::sample_packet(0x04, rng));
  ASSERT_TRUE(to_daemon.push(frame));

  // Expect: one frame, self-delivered, as the program sent it.
  const auto frames = read_frames(cap, 2, 500ms);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].direction, static_cast<std::uint32_t>(port::Direction::kLoopback));
  EXPECT_EQ(frames[0].frame, frame);
  close(prog);
  close(cap);
}

TEST_F(DaemonCapture, UroceStatWritesAPcapngTsharkReads) {
  if (!have_tshark()) GTEST_SKIP() << "tshark is not installed";
  auto* tapped = dynamic_cast<port::CapturePort*>(&server_->device(0).port());
  ASSERT_NE(tapped, nullptr);
  auto* wire_end = dynamic_cast<test::PipePort*>(&tapped->inner());
  ASSERT_NE(wire_end, nullptr);
  const std::string file = dir_.path() + "/uroce0.pcapng";
  FILE* p = popen((UROCE_STAT " capture --socket " + server_->socket_path() + " -d uroce0 -w " +
                   file + " -c 4 -t 20 2>&1")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  // Someone on the wire asks for the daemon's address until uroce-stat
  // has its frames (it may connect after the first ones).
  std::atomic<bool> done{false};
  std::thread asker([&] {
    std::vector<std::uint8_t> req(64);
    req.resize(wire::build_arp_request(req, {{0x02, 0, 0, 0, 0, 0x99}}, 0x0A4D0009, 0x0A4D0001));
    while (!done) {
      wire_end->inject(req);
      std::this_thread::sleep_for(20ms);
    }
  });
  std::string out;
  char buf[512];
  for (std::size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  done = true;
  asker.join();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("4 frames written"), std::string::npos) << out;
  EXPECT_NE(out.find("0 dropped"), std::string::npos) << out;

  const auto frames =
      test::tshark_decode(file, {"frame.number", "frame.interface_name",
                                 "frame.packet_flags_direction", "arp.opcode", "_ws.malformed"});
  ASSERT_EQ(frames.size(), 4u);
  std::size_t replies_out = 0;
  for (const auto& f : frames) {
    EXPECT_EQ(f.at("_ws.malformed"), "") << f.at("frame.number");
    EXPECT_EQ(f.at("frame.interface_name"), "uroce0");
    if (f.at("arp.opcode") == "2" && test::tshark_number(f.at("frame.packet_flags_direction")) == 2)
      ++replies_out;
  }
  EXPECT_GE(replies_out, 1u) << "the daemon's answer, outbound";
}

}  // namespace
}  // namespace uroce
