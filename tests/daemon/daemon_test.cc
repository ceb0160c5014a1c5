/* SPDX-License-Identifier: BSD-3-Clause */
// The device daemon's core (lib/daemon) in one process, no DPDK: a Server
// serving device uroce0 on a pipe port, programs attached to it (verbs
// devices on "uroced:uroce0", one connection each, as separate processes
// would have), a remote host on the pipe's other end, and programs that
// misbehave: forge frames, scribble over their rings, stop draining them,
// die, or outlive the daemon.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/discovery.h"
#include "daemon/protocol.h"
#include "daemon/server.h"
#include "daemon_fixture.h"
#include "port/shm_ring.h"
#include "support/pipe_driver.h"
#include "support/wire_samples.h"
#include "verbs/gsi.h"
#include "verbs_host.h"
#include "wire/opcode.h"

namespace uroce::daemon {
namespace {

using namespace std::chrono_literals;
using test::connect_rc;
using test::Counters;
using test::eventually;
using test::exchange_rc;
using test::exchange_ud;
using test::Host;
using test::kGrh;
using test::kQkey;
using transport::QpType;
using transport::Wc;
using transport::WcStatus;
using transport::WrOpcode;

// A program that speaks the protocol itself: attaches, and writes what
// it likes into its transmit ring.
struct RawProgram {
  explicit RawProgram(const std::string& socket) {
    sock = connect_daemon(socket);
    if (sock < 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
      return;
    }
    Message req;
    req.op = Op::kAttach;
    req.text = "uroce0";
    Message reply;
    if (!call(sock, req, &reply) || reply.op != Op::kAttached ||
        !parse_port_info(reply.text, &info)) {
      ADD_FAILURE() << "attach: " << reply.text;
      return;
    }
    std::string err;
    rings = port::ShmRegion::map(reply.fd, &err);
    if (!rings) {
      ADD_FAILURE() << err;
      return;
    }
    tx = port::RingProducer(rings->ring(port::ShmRegion::Ring::kToDaemon));
  }
  ~RawProgram() {
    if (sock >= 0) close(sock);
  }

  std::uint32_t alloc_qpn() {
    Message req;
    req.op = Op::kAllocQpn;
    Message reply;
    EXPECT_TRUE(call(sock, req, &reply));
    EXPECT_EQ(reply.op, Op::kQpn);
    return reply.value;
  }
  wire::MacAddr mac() const {
    wire::MacAddr m;
    std::memcpy(m.bytes.data(), info.mac, 6);
    return m;
  }

  int sock = -1;
  PortInfo info;
  std::unique_ptr<port::ShmRegion> rings;
  port::RingProducer tx;
};

// A UD SEND frame, every header field as given.
std::vector<std::uint8_t> ud_frame(const wire::MacAddr& src_mac, const wire::MacAddr& dst_mac,
                                   const char* src_ip, const char* dst_ip, std::uint32_t dest_qp,
                                   std::uint32_t src_qp, const std::string& text) {
  wire::RoceRoute r;
  r.src_mac = src_mac;
  r.dst_mac = dst_mac;
  r.src_ip = *wire::IpAddr::parse(src_ip);
  r.dst_ip = *wire::IpAddr::parse(dst_ip);
  test::SamplePacket p;
  p.bth.opcode = static_cast<std::uint8_t>(wire::Opcode::kUdSendOnly);
  p.bth.dest_qp = dest_qp;
  p.ext.deth.qkey = kQkey;
  p.ext.deth.src_qp = src_qp;
  p.payload.assign(text.begin(), text.end());
  return test::build_frame(r, p);
}

TEST_F(Daemon, DevicesAreListedWithTheirAddressesAndNoneWithoutADaemon) {
  const std::vector<DeviceConfig> devs = daemon_devices(config_);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].name, "uroce0");
  EXPECT_EQ(devs[0].port, "uroced:uroce0");
  EXPECT_TRUE(is_daemon_device(devs[0]));
  ASSERT_EQ(devs[0].ip.size(), 1u);
  EXPECT_EQ(devs[0].ip[0].address, "10.0.0.1");
  EXPECT_EQ(devs[0].ip[0].prefix, 24u);

  Config nobody;
  nobody.daemon_socket = dir_ + "/nobody.sock";
  EXPECT_TRUE(daemon_devices(nobody).empty());
  stop_loop();
  server_.reset();
  EXPECT_TRUE(daemon_devices(config_).empty()) << "a daemon that stopped lists nothing";
}

TEST_F(Daemon, ASecondDaemonOnTheSocketIsRefusedAndTheFirstServesOn) {
  Config second = config_;
  second.devices[0].port = pipe_ + "-second";  // a port of its own, on no one's pipe
  std::string err;
  EXPECT_EQ(Server::open(second, &err), nullptr);
  EXPECT_NE(err.find("another uroced"), std::string::npos) << err;
  EXPECT_EQ(daemon_devices(config_).size(), 1u) << "the first daemon's socket is still there";
  auto a = attach();
  ASSERT_TRUE(a);
  EXPECT_EQ(program_count(), 1u);
}

TEST_F(Daemon, TwoProgramsMoveBytesIntactBothWaysThroughTheDaemon) {
  auto a = attach();
  auto b = attach();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(program_count(), 2u);
  ASSERT_NO_FATAL_FAILURE(exchange_rc(*a, *b));

  const std::vector<Counters> pc = program_counters();
  ASSERT_EQ(pc.size(), 2u);
  for (const Counters& c : pc) {
    EXPECT_GT(c.at("tx_frames"), 0u);
    EXPECT_GT(c.at("rx_frames"), 0u);
    EXPECT_EQ(c.at("rx_ring_full"), 0u);
  }
  const Counters d = daemon_counters();
  EXPECT_GT(d.at("engine.tx_loopback") + d.at("engine.rx_forwarded"), 0u);
  // Each program's engine saw its own QPs' frames only.
  EXPECT_EQ(a->counters().at("engine.rx_unknown_qpn"), 0u);
  EXPECT_EQ(b->counters().at("engine.rx_unknown_qpn"), 0u);
}

TEST_F(Daemon, AProgramAndTheRemoteHostMoveBytesOverRcAndUd) {
  auto a = attach();
  ASSERT_TRUE(a);
  Host& r = remote();
  ASSERT_TRUE(r.dev);
  ASSERT_NO_FATAL_FAILURE(exchange_rc(*a, r));
  ASSERT_NO_FATAL_FAILURE(exchange_ud(*a, r));
  EXPECT_GT(r.counters().at("engine.rx_roce"), 0u);
  EXPECT_EQ(r.counters().at("drop.bad_icrc"), 0u);
}

TEST_F(Daemon, QpnsAreUniqueAcrossProgramsAndFreedWithTheirProgram) {
  constexpr int kQps = 40;
  auto a = attach();
  auto b = attach();
  ASSERT_TRUE(a && b);
  std::set<std::uint32_t> all, of_b;
  for (int i = 0; i < kQps; ++i) {
    for (Host* h : {a.get(), b.get()}) {
      verbs::QueuePair* q = h->make_qp(i % 2 ? QpType::kUd : QpType::kRc);
      ASSERT_TRUE(q);
      EXPECT_GT(q->qpn(), 1u) << "QPs 0 and 1 are reserved";
      EXPECT_TRUE(all.insert(q->qpn()).second) << "QPN " << q->qpn() << " given twice";
      if (h == b.get()) of_b.insert(q->qpn());
    }
  }
  EXPECT_EQ(program_count(), 2u);
  std::vector<Counters> pc = program_counters();
  ASSERT_EQ(pc.size(), 2u);
  EXPECT_EQ(pc[0].at("qps"), std::uint64_t{kQps});
  EXPECT_EQ(pc[1].at("qps"), std::uint64_t{kQps});

  a.reset();  // its connection closes: its QPNs go back to the host
  ASSERT_TRUE(eventually([&] { return program_count() == 1; }));
  pc = program_counters();
  ASSERT_EQ(pc.size(), 1u);
  EXPECT_EQ(pc[0].at("qps"), std::uint64_t{kQps}) << "b keeps its own";

  auto c = attach();
  ASSERT_TRUE(c);
  EXPECT_EQ(program_count(), 2u);
  for (int i = 0; i < kQps; ++i) {
    verbs::QueuePair* q = c->make_qp(QpType::kRc);
    ASSERT_TRUE(q);
    EXPECT_GT(q->qpn(), 1u);
    EXPECT_EQ(of_b.count(q->qpn()), 0u) << "QPN " << q->qpn() << " is b's";
  }
}

// An rdma_cm id of `h`'s device bound to addr:port (after REUSEADDR if
// `reuse`): the id and rdma_bind_addr's answer.
std::pair<std::uint32_t, int> cm_bind(Host& h, const char* addr, std::uint16_t port,
                                      bool reuse = false, cm::PortSpace ps = cm::PortSpace::kTcp) {
  return h.dev->gsi().run([&](cm::Cma& cma, cm::Nanos) {
    const std::uint32_t id =
        cma.create_id(0, ps, ps == cm::PortSpace::kUdp ? cm::QpType::kUd : cm::QpType::kRc);
    if (reuse) cma.set_reuseaddr(id, true);
    return std::pair{id, cma.bind(id, *wire::IpAddr::parse(addr), port)};
  });
}

TEST_F(Daemon, AnRdmaCmPortIsTheHostsAsWithTheKernel) {
  auto a = attach();
  auto b = attach();
  ASSERT_TRUE(a && b);
  // Expect: a port a bound is b's neither on that address (EADDRINUSE)
  // nor on the any address (EADDRNOTAVAIL), as for two processes of a
  // kernel host; the same port of the UDP space is another port.
  const std::pair<std::uint32_t, int> ax = cm_bind(*a, "10.0.0.1", 7471);
  ASSERT_EQ(ax.second, 0);
  EXPECT_EQ(cm_bind(*b, "10.0.0.1", 7471).second, EADDRINUSE);
  EXPECT_EQ(cm_bind(*b, "0.0.0.0", 7471).second, EADDRNOTAVAIL);
  EXPECT_EQ(cm_bind(*b, "10.0.0.1", 7471, false, cm::PortSpace::kUdp).second, 0);
  // Expect: REUSEADDR on both sides shares a port, but a listener must be
  // alone on it, the other program's ids counted.
  ASSERT_EQ(cm_bind(*a, "10.0.0.1", 7472, true).second, 0);
  const std::pair<std::uint32_t, int> bl = cm_bind(*b, "10.0.0.1", 7472, true);
  ASSERT_EQ(bl.second, 0);
  EXPECT_EQ(b->dev->gsi().run([&](cm::Cma& cma, cm::Nanos) { return cma.listen(bl.first, 8); }),
            EADDRINUSE);
  // Expect: the port goes back to the host with the id that held it.
  a->dev->gsi().run([&](cm::Cma& cma, cm::Nanos now) { cma.destroy_id(ax.first, now); });
  EXPECT_EQ(cm_bind(*b, "10.0.0.1", 7471).second, 0);
  // ... and every port of a program with the program.
  auto c = attach();
  ASSERT_TRUE(c);
  ASSERT_EQ(cm_bind(*c, "0.0.0.0", 7473).second, 0);
  EXPECT_EQ(cm_bind(*b, "10.0.0.1", 7473).second, EADDRNOTAVAIL);
  c.reset();
  ASSERT_TRUE(eventually([&] { return program_count() == 2; }));
  EXPECT_EQ(cm_bind(*b, "10.0.0.1", 7473).second, 0);
}

TEST_F(Daemon, CountersMayBeReadWhileProgramsTakeAndGiveBackQpns) {
  // As uroce-stat does, from a thread of its own (the stats server's).
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      std::uint64_t qps = 0;
      sw().for_each_counter([&](std::string_view, std::string_view name, std::uint64_t v) {
        if (name == "qps") qps += v;
      });
      EXPECT_LE(qps, 64u);
      std::this_thread::yield();
    }
  });
  {
    auto a = attach();
    ASSERT_TRUE(a);
    for (int round = 0; round < 4; ++round) {
      for (int i = 0; i < 16; ++i) ASSERT_TRUE(a->make_qp(QpType::kRc));
      a->qps.clear();
    }
  }
  done = true;
  reader.join();
}

TEST_F(Daemon, AConnectionGetsOnlyWhatItMayAskFor) {
  auto a = attach();
  ASSERT_TRUE(a);
  verbs::QueuePair* q = a->make_qp(QpType::kRc);
  ASSERT_TRUE(q);
  const int s = connect_daemon(config_.daemon_socket);
  ASSERT_GE(s, 0);
  const auto ask = [&](Op op, std::uint32_t value, std::string text = {}) {
    Message req, reply;
    req.op = op;
    req.value = value;
    req.text = std::move(text);
    EXPECT_TRUE(call(s, req, &reply)) << std::strerror(errno);
    if (reply.fd >= 0) close(reply.fd);
    return reply;
  };
  Message r = ask(Op::kAllocQpn, 0);
  EXPECT_EQ(r.op, Op::kError) << "not attached";
  EXPECT_EQ(r.value, std::uint32_t{EINVAL});
  r = ask(Op::kAttach, 0, "uroce9");
  EXPECT_EQ(r.op, Op::kError);
  EXPECT_EQ(r.value, std::uint32_t{ENODEV});
  EXPECT_EQ(ask(Op::kAttach, 0, "uroce0").op, Op::kAttached);
  r = ask(Op::kAttach, 0, "uroce0");
  EXPECT_EQ(r.op, Op::kError) << "attached already";
  EXPECT_EQ(r.value, std::uint32_t{EBUSY});
  r = ask(Op::kFreeQpn, q->qpn());
  EXPECT_EQ(r.op, Op::kError) << "another program's QPN";
  EXPECT_EQ(r.value, std::uint32_t{EINVAL});
  r = ask(Op::kQpn, 5);
  EXPECT_EQ(r.op, Op::kError) << "a reply is no request";
  // Bindings that are not one: each field whole, no unknown flag.
  for (const char* text : {"", "1061b2f", "1061b2f 10.0.0.1", "zz 10.0.0.1 0",
                           "1061b2f 10.0.0.1 -1", "1061b2f 10.0.0.1 16", "0x1061b2f 10.0.0.1 0",
                           "1061b2f 10.0.0 0", "1061b2f  10.0.0.1 0", "1061b2f 10.0.0.1 0 "}) {
    r = ask(Op::kCmBind, 9, text);
    EXPECT_EQ(r.op, Op::kError) << "'" << text << "'";
    EXPECT_EQ(r.value, std::uint32_t{EINVAL}) << "'" << text << "'";
  }
  r = ask(Op::kCmBind, 9, "1061b2f 10.0.0.1 0");
  EXPECT_EQ(r.op, Op::kDone);
  EXPECT_EQ(r.value, 0u);
  EXPECT_EQ(program_count(), 2u);
  EXPECT_EQ(program_counters().front().at("qps"), 1u) << "a keeps its QPN";
  close(s);
  ASSERT_TRUE(eventually([&] { return program_count() == 1; }));
  // a's QPN is still a's: frames for it still reach it.
  auto b = attach();
  ASSERT_TRUE(b);
  verbs::QueuePair* qb = b->make_qp(QpType::kRc);
  ASSERT_TRUE(qb);
  ASSERT_NO_FATAL_FAILURE(connect_rc(*q, b->gid(), qb->qpn()));
  ASSERT_NO_FATAL_FAILURE(connect_rc(*qb, a->gid(), q->qpn()));
  ASSERT_NO_FATAL_FAILURE(a->post_recv(*q, 1, 0, 256));
  ASSERT_NO_FATAL_FAILURE(b->post(*qb, b->wr(WrOpcode::kSend, 2, 0, 64)));
  EXPECT_EQ(a->expect_ok().wr_id, 1u);
  EXPECT_EQ(b->expect_ok().wr_id, 2u);
}

TEST_F(Daemon, AHostileProgramIsContainedAndCounted) {
  auto victim = attach();
  ASSERT_TRUE(victim);
  Host& r = remote();
  ASSERT_TRUE(r.dev);
  verbs::QueuePair* victim_ud = victim->make_qp(QpType::kUd);
  verbs::QueuePair* remote_ud = r.make_qp(QpType::kUd);
  ASSERT_TRUE(victim_ud && remote_ud);
  for (int i = 0; i < 8; ++i)
    ASSERT_NO_FATAL_FAILURE(r.post_recv(*remote_ud, 100 + i, i * 2048, 2048));

  RawProgram hostile(config_.daemon_socket);
  ASSERT_TRUE(hostile.rings);
  const std::uint32_t own = hostile.alloc_qpn();
  ASSERT_GT(own, 1u);
  const wire::MacAddr mac = hostile.mac();
  const wire::MacAddr dst = r.dev->engine().mac();
  const std::uint32_t to = remote_ud->qpn();
  const std::uint64_t roce_before = r.counters().at("engine.rx_roce");

  // Expect: each refused, for its own reason.
  std::mt19937_64 rng(7);
  std::vector<std::uint8_t> noise(200);
  for (auto& x : noise) x = static_cast<std::uint8_t>(rng());
  wire::MacAddr other_mac = mac;
  other_mac.bytes[5] ^= 0x55;
  std::vector<std::uint8_t> not_roce =
      ud_frame(mac, dst, "10.0.0.1", "10.0.0.2", to, own, "dns?dns?");
  const std::size_t udp = wire::RoceRoute{}.l3_offset() + wire::Ipv4Hdr::kMinSize;
  not_roce[udp + 2] = 0;  // destination port 53
  not_roce[udp + 3] = 53;
  const std::vector<std::vector<std::uint8_t>> bad = {
      {1, 2, 3, 4, 5},
      noise,
      ud_frame(other_mac, dst, "10.0.0.1", "10.0.0.2", to, own, "spoofmac"),
      ud_frame(mac, dst, "10.0.0.7", "10.0.0.2", to, own, "spoof-ip"),
      ud_frame(mac, dst, "10.0.0.1", "10.0.0.2", to, victim_ud->qpn(), "spoofqpn"),
      not_roce,
  };
  for (const auto& f : bad) ASSERT_TRUE(hostile.tx.push({f.data(), f.size()}));
  // Expect: what it may send still leaves, after everything it may not.
  const auto ok = ud_frame(mac, dst, "10.0.0.1", "10.0.0.2", to, own, "control!");
  ASSERT_TRUE(hostile.tx.push({ok.data(), ok.size()}));

  const auto hostile_counters = [&] { return program_counters().back(); };
  ASSERT_TRUE(eventually([&] { return hostile_counters().at("tx_frames") >= 1; }));
  Counters hc = hostile_counters();
  EXPECT_GE(hc.at("tx_malformed"), 1u);
  EXPECT_GE(hc.at("tx_spoofed_source"), 2u);
  EXPECT_GE(hc.at("tx_spoofed_qpn"), 1u);
  EXPECT_GE(hc.at("tx_not_roce"), 1u);
  EXPECT_EQ(hc.at("tx_frames"), 1u);

  // The remote end heard the control datagram and nothing before it (the
  // pipe keeps order).
  const std::vector<Wc> got = r.poll(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(got[0].src_qp, own);
  EXPECT_EQ(std::memcmp(r.buf.data() + got[0].wr_id % 100 * 2048 + kGrh, "control!", 8), 0);
  EXPECT_EQ(r.counters().at("engine.rx_roce") - roce_before, 1u);
  EXPECT_TRUE(r.poll(1, 50ms).empty());

  // Garbage over its ring's shared head.
  auto* head = static_cast<std::uint8_t*>(hostile.rings->ring(port::ShmRegion::Ring::kToDaemon)) +
               port::shm_layout::kHeadAt;
  std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(head))
      .store(0xDEADBEEF, std::memory_order_release);
  ASSERT_TRUE(eventually([&] { return hostile_counters().at("tx_ring_corrupt") >= 1; }));

  // The daemon runs on, and the others' traffic flows.
  EXPECT_EQ(program_count(), 2u);
  ASSERT_NO_FATAL_FAILURE(exchange_ud(*victim, r));
  ASSERT_NO_FATAL_FAILURE(exchange_rc(*victim, r));
}

TEST_F(Daemon, AProgramThatDoesNotDrainItsRingLosesOnlyItsOwnFrames) {
  auto a = attach();
  ASSERT_TRUE(a);
  RawProgram stuck(config_.daemon_socket);
  ASSERT_TRUE(stuck.rings);
  const std::uint32_t qpn = stuck.alloc_qpn();
  Host& r = remote();
  ASSERT_TRUE(r.dev);
  verbs::QueuePair* q = r.make_qp(QpType::kUd);
  ASSERT_TRUE(q);
  const verbs::Ah& ah = r.ah_to(a->gid());  // the device's address: the stuck program's too

  // More datagrams than its ring has slots; the sends complete locally.
  const std::uint32_t n = port::kShmSlots + 64;
  std::uint32_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < 32) {
      ASSERT_NO_FATAL_FAILURE(r.send_ud(*q, ah, qpn, posted, 0, 64));
      ++posted;
    }
    const std::vector<Wc> w = r.poll(1);
    ASSERT_FALSE(w.empty());
    for (const Wc& c : w) ASSERT_EQ(c.status, WcStatus::kSuccess);
    done += static_cast<std::uint32_t>(w.size());
  }
  const auto stuck_counters = [&] { return program_counters().back(); };
  ASSERT_TRUE(eventually([&] { return stuck_counters().at("rx_ring_full") > 0; }));
  EXPECT_LE(stuck_counters().at("rx_frames"), std::uint64_t{port::kShmSlots});

  ASSERT_NO_FATAL_FAILURE(exchange_ud(*a, r));
  ASSERT_NO_FATAL_FAILURE(exchange_rc(*a, r));
  EXPECT_EQ(program_counters().front().at("rx_ring_full"), 0u);
}

TEST_F(Daemon, AProgramKilledIsDroppedWithItsQpns) {
  auto a = attach();
  ASSERT_TRUE(a);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a->make_qp(QpType::kRc));
  Host& r = remote();
  ASSERT_TRUE(r.dev);
  verbs::QueuePair* uq = r.make_qp(QpType::kUd);
  ASSERT_TRUE(uq);
  const verbs::Ah& ah = r.ah_to(a->gid());
  const std::size_t before = program_count();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: the raw protocol only (no threads, no verbs device),
    // then it tells its QPNs and waits to be killed (or for the test to
    // end, should it fail first).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(ready[0]);
    const int s = connect_daemon(config_.daemon_socket);
    if (s < 0) _exit(2);
    Message req, reply;
    req.op = Op::kAttach;
    req.text = "uroce0";
    if (!call(s, req, &reply) || reply.op != Op::kAttached) _exit(3);
    std::uint32_t qpns[3];
    for (std::uint32_t& qpn : qpns) {
      Message q, got;
      q.op = Op::kAllocQpn;
      if (!call(s, q, &got) || got.op != Op::kQpn) _exit(4);
      qpn = got.value;
    }
    if (write(ready[1], qpns, sizeof(qpns)) != sizeof(qpns)) _exit(5);
    for (;;) pause();
  }
  close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  std::uint32_t qpns[3] = {};
  const bool up = ::poll(&p, 1, 10000) == 1 && read(ready[0], qpns, sizeof(qpns)) == sizeof(qpns);
  close(ready[0]);
  const auto qps_of_all = [&] {
    std::uint64_t n = 0;
    for (const Counters& c : program_counters()) n += c.at("qps");
    return n;
  };
  const auto engine_count = [&](const char* name) { return daemon_counters().at(name); };
  if (up) {
    EXPECT_EQ(program_count(), before + 1);
    EXPECT_EQ(qps_of_all(), 2u + 3u);
    // Expect: a datagram to the child's QPN is the child's.
    const std::uint64_t forwarded = engine_count("engine.rx_forwarded");
    r.send_ud(*uq, ah, qpns[0], 1, 0, 64);
    EXPECT_TRUE(eventually([&] { return engine_count("engine.rx_forwarded") > forwarded; }));
  }
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(up) << "the child did not attach (status " << status << ")";
  ASSERT_TRUE(eventually([&] { return program_count() == before; }));
  EXPECT_EQ(qps_of_all(), 2u) << "the child's QPNs went with it";
  // Expect: datagrams to them now find nobody.
  const std::uint64_t unknown = engine_count("engine.rx_unknown_qpn");
  for (std::uint32_t qpn : qpns) r.send_ud(*uq, ah, qpn, 2, 0, 64);
  EXPECT_TRUE(eventually([&] { return engine_count("engine.rx_unknown_qpn") >= unknown + 3; }));
  EXPECT_EQ(r.poll(4).size(), 4u) << "the remote's sends complete";
  auto b = attach();
  ASSERT_TRUE(b);
  ASSERT_NO_FATAL_FAILURE(exchange_rc(*a, *b));
}

TEST_F(Daemon, ProgramsFailWhenTheDaemonStops) {
  std::atomic<int> fatal{0};
  auto a = attach();
  auto b = attach();
  ASSERT_TRUE(a && b);
  const int listener = a->dev->add_link_listener([&](verbs::Device::PortEvent e) {
    if (e == verbs::Device::PortEvent::kFatal) fatal.fetch_add(1);
  });
  // b's QP stays in RESET: it takes nothing, so a's SEND waits for an
  // ACK, and its local ACK timeout (code 20, some 4 s) holds it posted.
  verbs::QueuePair* qa = a->make_qp(QpType::kRc);
  verbs::QueuePair* qb = b->make_qp(QpType::kRc);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(connect_rc(*qa, b->gid(), qb->qpn(), 20));
  ASSERT_NO_FATAL_FAILURE(a->post_recv(*qa, 1, 0, 4096));
  ASSERT_NO_FATAL_FAILURE(a->post_recv(*qa, 2, 4096, 4096));
  ASSERT_NO_FATAL_FAILURE(a->post(*qa, a->wr(WrOpcode::kSend, 3, 8192, 100)));
  ASSERT_TRUE(eventually([&] { return program_counters().front().at("tx_frames") >= 1; }));
  EXPECT_TRUE(a->poll(1, 20ms).empty()) << "nothing answers a's SEND";

  stop_loop();
  server_.reset();
  ASSERT_TRUE(eventually([&] { return a->dev->failed(); }));
  EXPECT_TRUE(eventually([&] { return fatal.load() == 1; }));
  const std::vector<Wc> w = a->poll(3);
  ASSERT_EQ(w.size(), 3u);
  std::set<std::uint64_t> ids;
  for (const Wc& c : w) {
    EXPECT_EQ(c.status, WcStatus::kWrFlushErr) << "wr " << c.wr_id;
    ids.insert(c.wr_id);
  }
  EXPECT_EQ(ids, (std::set<std::uint64_t>{1, 2, 3}));
  int err = 0;
  EXPECT_EQ(a->make_qp(QpType::kRc, &err), nullptr);
  EXPECT_EQ(err, EIO);
  EXPECT_TRUE(eventually([&] { return b->dev->failed(); }));
  a->dev->remove_link_listener(listener);
}

}  // namespace
}  // namespace uroce::daemon
