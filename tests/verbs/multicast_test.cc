/* SPDX-License-Identifier: BSD-3-Clause */
// Multicast on UD QPs (ibv_attach_mcast, ibv_detach_mcast): the rules
// QueuePair checks, and datagrams to a group between two devices joined
// by ports in memory: every attached QP gets its own copy, with its GRH
// and its own Q_Key check; a group nobody joined is dropped and counted;
// the sending device's own attached QPs hear its datagrams too.

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/pipe_port.h"
#include "verbs/access.h"
#include "verbs/ah.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"
#include "wire/ib_headers.h"

namespace uroce::verbs {
namespace {

using namespace std::chrono_literals;
using transport::QpState;
using transport::QpType;
namespace am = transport::attr_mask;

constexpr std::uint32_t kQkey = 0x01234567;
constexpr std::uint32_t kGrh = 40;

std::array<std::uint8_t, 16> gid(const char* ip) { return wire::IpAddr::parse(ip)->bytes; }

// One host: a device, a context with its PD, CQ and a region of buffers.
struct Host {
  Host(const std::string& name, const std::string& ip, std::unique_ptr<test::PipePort> port) {
    DeviceConfig dc;
    dc.name = name;
    dc.port = "pipe:" + name;
    dc.ip = {IpPrefix{ip, 24}};
    std::string err;
    dev = Device::open(dc, Config{}, std::move(port), &err);
    EXPECT_TRUE(dev) << err;
    ctx = std::make_unique<Context>(*dev, nullptr);
    pd = Pd::create(*ctx);
    EXPECT_EQ(Cq::create(*ctx, 256, nullptr, 0, &cq), 0);
    EXPECT_EQ(Mr::reg(*pd, buf.data(), buf.size(), reinterpret_cast<std::uint64_t>(buf.data()),
                      access::kLocalWrite, &mr),
              0);
  }
  ~Host() {
    qps.clear();
    ah.reset();
    mr.reset();
    cq.reset();
    pd.reset();
  }

  // A UD QP in RTS with Q_Key `qkey`.
  QueuePair& make_qp(QpType type = QpType::kUd, std::uint32_t qkey = kQkey) {
    QpCaps caps;
    caps.type = type;
    caps.max_send_wr = caps.max_recv_wr = 32;
    caps.max_send_sge = caps.max_recv_sge = 1;
    std::unique_ptr<QueuePair> qp;
    EXPECT_EQ(QueuePair::create(*pd, caps, *cq, *cq, nullptr, &qp), 0);
    if (type == QpType::kUd) {
      QpModify m;
      m.attr.qp_state = QpState::kInit;
      m.attr.qkey = qkey;
      EXPECT_EQ(qp->modify(m, am::kState | am::kPkeyIndex | am::kPort | am::kQkey), 0);
      m.attr.qp_state = QpState::kRtr;
      EXPECT_EQ(qp->modify(m, am::kState), 0);
      m.attr.qp_state = QpState::kRts;
      EXPECT_EQ(qp->modify(m, am::kState | am::kSqPsn), 0);
    }
    qps.push_back(std::move(qp));
    return *qps.back();
  }

  // Posts a receive of a GRH and `len` bytes into slot `slot` of buf.
  void post_recv(QueuePair& qp, int slot, std::uint32_t len = 256) {
    transport::RecvWr wr;
    wr.wr_id = static_cast<std::uint64_t>(slot);
    wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data() + slot * 512), kGrh + len,
                     mr->lkey()};
    wr.num_sge = 1;
    ASSERT_EQ(qp.post_recv(wr), 0);
  }

  // Sends `text` from `qp` to `group` through an AH (sgid index 1: the
  // configured IPv4 address), to QPN `dest_qp`.
  void send(QueuePair& qp, const char* group, const std::string& text,
            std::uint32_t dest_qp = wire::kMulticastQpn) {
    AddressVector av;
    av.sgid_index = 1;
    av.dgid = gid(group);
    av.hop_limit = 7;
    ASSERT_EQ(Ah::create(*pd, av, &ah), 0);
    std::memcpy(buf.data() + 4096, text.data(), text.size());
    transport::SendWr wr;
    wr.wr_id = 99;
    wr.opcode = transport::WrOpcode::kSend;
    wr.send_flags = transport::send_flags::kSignaled;
    wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(buf.data() + 4096),
                     static_cast<std::uint32_t>(text.size()), mr->lkey()};
    wr.num_sge = 1;
    ASSERT_EQ(qp.set_ud_destination(*ah, dest_qp, kQkey, &wr), 0);
    ASSERT_EQ(qp.post_send(wr), 0);
    qp.doorbell();
  }

  // Polls until `n` completions arrived or `limit` passed.
  std::vector<transport::Wc> poll(std::size_t n, std::chrono::milliseconds limit = 5s) {
    std::vector<transport::Wc> out;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      transport::Wc wc[8];
      const std::uint32_t got = cq->poll(wc, 8);
      out.insert(out.end(), wc, wc + got);
      if (got == 0) std::this_thread::sleep_for(1ms);
    }
    return out;
  }

  std::map<std::string, std::uint64_t> counters() {
    std::map<std::string, std::uint64_t> out;
    dev->for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
      out[std::string(scope) + "." + std::string(name)] = v;
    });
    return out;
  }

  std::string text_at(int slot, std::size_t len) const {
    return std::string(reinterpret_cast<const char*>(buf.data() + slot * 512 + kGrh), len);
  }

  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(8192);
  std::unique_ptr<Device> dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Pd> pd;
  std::unique_ptr<Cq> cq;
  std::unique_ptr<Mr> mr;
  std::unique_ptr<Ah> ah;
  std::vector<std::unique_ptr<QueuePair>> qps;
};

class Multicast : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pa = std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x7c, 1}});
    auto pb = std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x7c, 2}});
    test::PipePort::join(*pa, *pb);
    a_ = std::make_unique<Host>("uroce-ma", "10.79.3.1", std::move(pa));
    b_ = std::make_unique<Host>("uroce-mb", "10.79.3.2", std::move(pb));
  }

  // Sends `text` to `group` from a new QP on a, and returns once b's
  // device has taken the datagram in: one that no QP of b receives
  // completes nothing at b to wait for.
  void send_from_a_until_b_takes_it(const char* group, const std::string& text) {
    QueuePair& sender = a_->make_qp();
    a_->send(sender, group, text);
    ASSERT_EQ(a_->poll(1).size(), 1u);
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (b_->counters()["engine.multicast_rcv_packets"] == 0 &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(1ms);
  }

  std::unique_ptr<Host> a_, b_;
};

TEST_F(Multicast, AttachTakesUdQpsAndMulticastGidsOnly) {
  QueuePair& ud = b_->make_qp();
  QueuePair& rc = b_->make_qp(QpType::kRc);
  EXPECT_EQ(rc.attach_mcast(gid("239.1.1.1"), 0), EINVAL) << "not a UD QP";
  EXPECT_EQ(ud.attach_mcast(gid("10.79.3.9"), 0), EINVAL) << "a unicast IPv4 GID";
  EXPECT_EQ(ud.attach_mcast(gid("fe80::1"), 0), EINVAL) << "a unicast IPv6 GID";
  EXPECT_EQ(ud.attach_mcast(gid("239.1.1.1"), 0), 0);
  EXPECT_EQ(ud.attach_mcast(gid("239.1.1.1"), 0), 0) << "attaching again changes nothing";
  EXPECT_EQ(ud.attach_mcast(gid("ff0e::1:2"), 0), 0) << "an IPv6 group";
  EXPECT_EQ(ud.mcast_groups().size(), 2u);
  EXPECT_EQ(ud.detach_mcast(gid("239.1.1.2"), 0), EINVAL) << "a group it is not attached to";
  EXPECT_EQ(rc.detach_mcast(gid("239.1.1.1"), 0), EINVAL);
  EXPECT_EQ(ud.detach_mcast(gid("239.1.1.1"), 0), 0);
  EXPECT_EQ(ud.detach_mcast(gid("239.1.1.1"), 0), EINVAL) << "detached already";
  EXPECT_EQ(ud.mcast_groups().size(), 1u);
}

TEST_F(Multicast, AnAttachedQpIsNotDestroyedUntilDetached) {
  QueuePair& qp = b_->make_qp();
  ASSERT_EQ(qp.attach_mcast(gid("239.1.1.3"), 0), 0);
  std::unique_ptr<QueuePair> owner = std::move(b_->qps.back());
  b_->qps.pop_back();
  EXPECT_EQ(QueuePair::destroy(owner), EBUSY);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->detach_mcast(gid("239.1.1.3"), 0), 0);
  EXPECT_EQ(QueuePair::destroy(owner), 0);
  EXPECT_FALSE(owner);
}

TEST_F(Multicast, AQpTornDownWhileAttachedLeavesItsGroup) {
  // As a context closed with its QPs (the process ends): the QP goes,
  // and a datagram to the group then finds nobody.
  QueuePair& qp = b_->make_qp();
  ASSERT_EQ(qp.attach_mcast(gid("239.1.1.4"), 0), 0);
  b_->qps.clear();
  ASSERT_NO_FATAL_FAILURE(send_from_a_until_b_takes_it("239.1.1.4", "anyone?"));
  EXPECT_EQ(b_->counters()["engine.multicast_no_group"], 1u);
}

TEST_F(Multicast, EveryAttachedQpGetsItsOwnCopy) {
  QueuePair& r1 = b_->make_qp();
  QueuePair& r2 = b_->make_qp();
  QueuePair& other_qkey = b_->make_qp(QpType::kUd, 0x1111);
  QueuePair& not_attached = b_->make_qp();
  for (QueuePair* q : {&r1, &r2, &other_qkey}) ASSERT_EQ(q->attach_mcast(gid("239.7.0.1"), 0), 0);
  b_->post_recv(r1, 0);
  b_->post_recv(r2, 1);
  b_->post_recv(other_qkey, 2);
  b_->post_recv(not_attached, 3);

  QueuePair& sender = a_->make_qp();
  a_->send(sender, "239.7.0.1", "to the group", 0x123456);
  const auto sent = a_->poll(1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, transport::WcStatus::kSuccess);

  // Expect: one receive on each attached QP whose Q_Key matches, the
  // datagram after its GRH (the IPv4 header in its last 20 bytes, the
  // group as its destination).
  const auto got = b_->poll(2);
  ASSERT_EQ(got.size(), 2u);
  std::set<std::uint32_t> qpns;
  for (const transport::Wc& wc : got) {
    EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
    EXPECT_EQ(wc.byte_len, kGrh + 12);
    EXPECT_EQ(wc.src_qp, sender.qpn());
    EXPECT_NE(wc.wc_flags & transport::wc_flags::kGrh, 0u);
    const int slot = static_cast<int>(wc.wr_id);
    EXPECT_EQ(b_->text_at(slot, 12), "to the group");
    const std::uint8_t* ip = b_->buf.data() + slot * 512 + 20;
    EXPECT_EQ(ip[8], 7) << "the AH's hop limit as TTL";
    const std::uint8_t group[] = {239, 7, 0, 1};
    EXPECT_EQ(std::memcmp(ip + 16, group, 4), 0);
    qpns.insert(wc.qp_num);
  }
  EXPECT_EQ(qpns, (std::set<std::uint32_t>{r1.qpn(), r2.qpn()}));
  EXPECT_TRUE(b_->poll(1, 100ms).empty()) << "the other Q_Key and the unattached QP got nothing";

  auto c = b_->counters();
  EXPECT_EQ(c["engine.multicast_rcv_packets"], 1u);
  EXPECT_EQ(c["engine.multicast_delivered"], 3u);
  EXPECT_EQ(c["engine.multicast_no_group"], 0u);
  EXPECT_EQ(c["port.rdma_recvs"], 2u);
  EXPECT_EQ(a_->counters()["engine.multicast_xmit_packets"], 1u);
}

TEST_F(Multicast, TheSendersOwnAttachedQpsHearItsDatagrams) {
  // rxe loops multicast back to the sending host: a QP of the sending
  // device attached to the group receives, and so does the peer's.
  QueuePair& local = a_->make_qp();
  QueuePair& remote = b_->make_qp();
  ASSERT_EQ(local.attach_mcast(gid("239.7.0.2"), 0), 0);
  ASSERT_EQ(remote.attach_mcast(gid("239.7.0.2"), 0), 0);
  a_->post_recv(local, 0);
  b_->post_recv(remote, 0);
  QueuePair& sender = a_->make_qp();
  a_->send(sender, "239.7.0.2", "hello all");
  const auto at_a = a_->poll(2);  // the send's completion and the local receive
  ASSERT_EQ(at_a.size(), 2u);
  bool received = false;
  for (const auto& wc : at_a) {
    EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
    if (wc.qp_num == local.qpn()) {
      received = true;
      EXPECT_EQ(a_->text_at(0, 9), "hello all");
    }
  }
  EXPECT_TRUE(received);
  const auto at_b = b_->poll(1);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(b_->text_at(0, 9), "hello all");
}

TEST_F(Multicast, AGroupNobodyJoinedIsDroppedAndCounted) {
  QueuePair& qp = b_->make_qp();
  ASSERT_EQ(qp.attach_mcast(gid("239.7.0.3"), 0), 0);
  b_->post_recv(qp, 0);
  ASSERT_NO_FATAL_FAILURE(send_from_a_until_b_takes_it("239.7.0.4", "not yours"));
  EXPECT_EQ(b_->counters()["engine.multicast_no_group"], 1u);
  EXPECT_TRUE(b_->poll(1, 100ms).empty());
}

TEST_F(Multicast, AnIpv6GroupTravelsToo) {
  QueuePair& qp = b_->make_qp();
  ASSERT_EQ(qp.attach_mcast(gid("ff0e::77"), 0), 0);
  b_->post_recv(qp, 0);
  QueuePair& sender = a_->make_qp();
  // GID 0 is the link-local IPv6 address.
  AddressVector av;
  av.sgid_index = 0;
  av.dgid = gid("ff0e::77");
  ASSERT_EQ(Ah::create(*a_->pd, av, &a_->ah), 0);
  std::memcpy(a_->buf.data() + 4096, "six", 3);
  transport::SendWr wr;
  wr.opcode = transport::WrOpcode::kSend;
  wr.send_flags = transport::send_flags::kSignaled;
  wr.sg_list[0] = {reinterpret_cast<std::uint64_t>(a_->buf.data() + 4096), 3, a_->mr->lkey()};
  wr.num_sge = 1;
  ASSERT_EQ(sender.set_ud_destination(*a_->ah, wire::kMulticastQpn, kQkey, &wr), 0);
  ASSERT_EQ(sender.post_send(wr), 0);
  sender.doorbell();
  ASSERT_EQ(a_->poll(1).size(), 1u);
  const auto got = b_->poll(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].byte_len, kGrh + 3);
  EXPECT_EQ(b_->text_at(0, 3), "six");
}

}  // namespace
}  // namespace uroce::verbs
