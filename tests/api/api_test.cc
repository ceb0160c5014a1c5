/* SPDX-License-Identifier: BSD-3-Clause */
// uroce's own C++ API (lib/api) over two devices joined in memory (the
// tests' pipe driver): what a program embedding uroce sees, end to end,
// with no DPDK and no namespace.

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "support/pipe_driver.h"
#include "uroce/uroce.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;

struct Side {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 17);
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    test::register_pipe_driver();
    const std::string pipe =
        std::string("pipe:") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    open(a_, pipe, "10.77.0.1");
    open(b_, pipe, "10.77.0.2");
  }

  void open(Side& s, const std::string& pipe, const std::string& ip) {
    DeviceConfig dc;
    dc.name = "uroce-" + ip;
    dc.port = pipe;
    dc.ip = {IpPrefix{ip, 24}};
    std::string err;
    s.dev = Device::open(dc, Config{}, &err);
    ASSERT_TRUE(s.dev) << err;
    s.pd = s.dev->alloc_pd();
    s.cq = s.dev->create_cq(256);
    ASSERT_TRUE(s.cq);
    s.mr = s.pd->reg_mr(s.buf.data(), s.buf.size(), access::kAll);
    ASSERT_TRUE(s.mr);
  }

  void connect(QpType type = QpType::kRc) {
    for (Side* s : {&a_, &b_}) {
      int err = 0;
      s->qp = s->pd->create_qp({.type = type, .send_cq = s->cq.get(), .recv_cq = s->cq.get()},
                               &err);
      ASSERT_TRUE(s->qp) << err;
    }
    const auto gid = [](Side& s) { return s.dev->port().gids.at(1); };
    ASSERT_EQ(a_.qp->connect({gid(b_), b_.qp->qpn(), b_.qp->psn()}), 0);
    ASSERT_EQ(b_.qp->connect({gid(a_), a_.qp->qpn(), a_.qp->psn()}), 0);
    EXPECT_EQ(a_.qp->state(), QpState::kRts);
  }

  static Completion wait(Side& s) {
    auto c = s.cq->wait(5s);
    EXPECT_TRUE(c) << "no completion within 5 s";
    return c.value_or(Completion{.status = WcStatus::kGeneralErr});
  }

  static std::uint64_t counter(const std::vector<Counter>& cs, const std::string& name) {
    for (const auto& [n, v] : cs)
      if (n == name) return v;
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }

  Side a_, b_;
};

TEST_F(Api, WriteReadAndSendMoveEveryByteIntact) {
  connect();
  std::iota(a_.buf.begin(), a_.buf.begin() + 65536, std::uint8_t{7});
  const auto addr = [](Side& s, std::size_t off = 0) {
    return reinterpret_cast<std::uint64_t>(s.buf.data() + off);
  };
  Sge src{addr(a_), 65536, a_.mr->lkey()};
  ASSERT_EQ(a_.qp->post_send({.wr_id = 1,
                              .opcode = Opcode::kRdmaWrite,
                              .sges = {&src, 1},
                              .remote_addr = addr(b_),
                              .rkey = b_.mr->rkey()}),
            0);
  Completion c = wait(a_);
  ASSERT_TRUE(c.ok()) << to_string(c.status);
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaWrite);
  b_.dev->poll();  // orders what the peer wrote before our reads
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data(), 65536), 0);

  // READ it back into the second half of our buffer.
  Sge dst{addr(a_, 65536), 65536, a_.mr->lkey()};
  ASSERT_EQ(a_.qp->post_send({.wr_id = 2,
                              .opcode = Opcode::kRdmaRead,
                              .sges = {&dst, 1},
                              .remote_addr = addr(b_),
                              .rkey = b_.mr->rkey()}),
            0);
  c = wait(a_);
  ASSERT_TRUE(c.ok()) << to_string(c.status);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(a_.buf.data(), a_.buf.data() + 65536, 65536), 0);

  // A SEND lands in the posted receive, with its length.
  Sge rbuf{addr(b_, 65536), 4096, b_.mr->lkey()};
  ASSERT_EQ(b_.qp->post_recv({.wr_id = 9, .sges = {&rbuf, 1}}), 0);
  Sge msg{addr(a_), 1000, a_.mr->lkey()};
  ASSERT_EQ(a_.qp->post_send({.wr_id = 3, .opcode = Opcode::kSend, .sges = {&msg, 1}}), 0);
  c = wait(b_);
  ASSERT_TRUE(c.ok()) << to_string(c.status);
  EXPECT_EQ(c.opcode, WcOpcode::kRecv);
  EXPECT_EQ(c.wr_id, 9u);
  EXPECT_EQ(c.byte_len, 1000u);
  EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data() + 65536, 1000), 0);
  EXPECT_TRUE(wait(a_).ok());

  // The counters moved: the QP's and the device's.
  EXPECT_GT(counter(a_.qp->counters(), "sent_pkts"), 16u);
  EXPECT_GT(counter(b_.dev->counters(), "rx_roce"), 16u);
  EXPECT_EQ(counter(b_.dev->counters(), "drop_bad_icrc"), 0u);
}

TEST_F(Api, UdSendsGoToTheAddressHandlesPeer) {
  connect(QpType::kUd);
  int err = 0;
  auto ah = a_.pd->create_ah(b_.dev->port().gids.at(1), 1, &err);
  ASSERT_TRUE(ah) << err;
  const auto base = [](Side& s) { return reinterpret_cast<std::uint64_t>(s.buf.data()); };
  Sge rbuf{base(b_), 40 + 256, b_.mr->lkey()};
  ASSERT_EQ(b_.qp->post_recv({.wr_id = 5, .sges = {&rbuf, 1}}), 0);
  std::memcpy(a_.buf.data(), "datagram", 8);
  Sge msg{base(a_), 8, a_.mr->lkey()};
  ASSERT_EQ(a_.qp->post_send({.opcode = Opcode::kSend,
                              .sges = {&msg, 1},
                              .ah = ah.get(),
                              .remote_qpn = b_.qp->qpn(),
                              .remote_qkey = ConnectOptions{}.qkey}),
            0);
  const Completion c = wait(b_);
  ASSERT_TRUE(c.ok()) << to_string(c.status);
  EXPECT_EQ(c.byte_len, 40u + 8);
  EXPECT_TRUE(c.flags & wc_flags::kGrh);
  EXPECT_EQ(c.src_qp, a_.qp->qpn());
  EXPECT_EQ(std::memcmp(b_.buf.data() + 40, "datagram", 8), 0);
}

TEST_F(Api, UdDatagramsToAGroupReachTheQpsAttachedToIt) {
  connect(QpType::kUd);
  const Gid group = *Gid::from_ip("239.5.5.5");
  EXPECT_EQ(b_.qp->attach_mcast(*Gid::from_ip("10.77.0.9")), EINVAL) << "not a group";
  ASSERT_EQ(b_.qp->attach_mcast(group), 0);
  int err = 0;
  auto ah = a_.pd->create_ah(group, 1, &err);
  ASSERT_TRUE(ah) << err;
  const auto base = [](Side& s) { return reinterpret_cast<std::uint64_t>(s.buf.data()); };
  Sge rbuf{base(b_), 40 + 256, b_.mr->lkey()};
  ASSERT_EQ(b_.qp->post_recv({.wr_id = 6, .sges = {&rbuf, 1}}), 0);
  std::memcpy(a_.buf.data(), "to all", 6);
  Sge msg{base(a_), 6, a_.mr->lkey()};
  ASSERT_EQ(a_.qp->post_send({.opcode = Opcode::kSend,
                              .sges = {&msg, 1},
                              .ah = ah.get(),
                              .remote_qpn = 0xFFFFFF,
                              .remote_qkey = ConnectOptions{}.qkey}),
            0);
  const Completion c = wait(b_);
  ASSERT_TRUE(c.ok()) << to_string(c.status);
  EXPECT_EQ(c.byte_len, 40u + 6);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 40, "to all", 6), 0);
  EXPECT_EQ(counter(b_.dev->counters(), "multicast_delivered"), 1u);
  EXPECT_EQ(b_.qp->detach_mcast(group), 0);
  EXPECT_EQ(b_.qp->detach_mcast(group), EINVAL);
}

TEST_F(Api, BadArgumentsGetTheErrnoOfLibibverbs) {
  int err = 0;
  EXPECT_EQ(a_.dev->create_cq(0, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(a_.dev->create_cq((1u << 20) + 1, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(a_.pd->create_qp({.type = QpType::kRc}, &err), nullptr);
  EXPECT_EQ(err, EINVAL) << "no CQs";
  EXPECT_EQ(a_.pd->create_qp({.send_cq = a_.cq.get(), .recv_cq = a_.cq.get(), .max_send_wr = 1u << 30},
                             &err),
            nullptr);
  EXPECT_EQ(err, EINVAL) << "beyond the device's WRs";
  std::uint8_t x[64];
  EXPECT_EQ(a_.pd->reg_mr(x, sizeof(x), access::kRemoteWrite, &err), nullptr);
  EXPECT_EQ(err, EINVAL) << "remote write needs local write (IBA 10.6.3.1)";
  EXPECT_EQ(a_.pd->reg_mr(x, sizeof(x), 1u << 12, &err), nullptr);
  EXPECT_EQ(err, EINVAL) << "unknown access bits";
  EXPECT_EQ(a_.pd->create_srq(0, 1, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  EXPECT_EQ(a_.pd->create_srq(16, 0, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  Gid other = *Gid::from_ip("10.78.0.9");
  EXPECT_EQ(a_.pd->create_ah(other, 9, &err), nullptr);
  EXPECT_EQ(err, EINVAL) << "no GID 9";
}

}  // namespace
}  // namespace uroce
