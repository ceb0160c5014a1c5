/* SPDX-License-Identifier: BSD-3-Clause */
// XRC in the verbs object model (verbs/xrcd.h), on a device whose port is
// in memory: the domain's opening rules (ibv_open_xrcd's), what keeps a
// domain and a target QP alive, and a message from an initiator through
// the device to the SRQ its WR names, with the poll thread running.

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "support/pipe_port.h"
#include "verbs/access.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"
#include "verbs/srq.h"
#include "verbs/xrcd.h"

namespace uroce::verbs {
namespace {

namespace am = transport::attr_mask;

class XrcDomains : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceConfig dc;
    dc.name = "uroce-xrc";
    dc.port = "pipe:xrc";
    dc.ip = {IpPrefix{"10.78.0.1", 24}};
    std::string err;
    dev_ = Device::open(dc, Config{},
                        std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x78, 1}}),
                        &err);
    ASSERT_TRUE(dev_) << err;
    ctx_ = std::make_unique<Context>(*dev_, nullptr);
    pd_ = Pd::create(*ctx_);
    ASSERT_EQ(Cq::create(*ctx_, 64, nullptr, 0, &cq_), 0);
    char name[] = "/tmp/uroce-xrcd-XXXXXX";
    fd_ = mkstemp(name);
    ASSERT_GE(fd_, 0);
    unlink(name);
  }
  void TearDown() override {
    close(fd_);
    cq_.reset();
    pd_.reset();
    EXPECT_FALSE(ctx_->busy()) << "every object of the context is gone";
  }

  std::unique_ptr<Device> dev_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Pd> pd_;
  std::unique_ptr<Cq> cq_;
  int fd_ = -1;
};

TEST_F(XrcDomains, OpeningFollowsTheKernelsRules) {
  Xrcd* x = nullptr;
  EXPECT_EQ(Xrcd::open(*ctx_, -1, 0, &x), EINVAL) << "no file and no O_CREAT";
  EXPECT_EQ(Xrcd::open(*ctx_, fd_, 0, &x), EINVAL) << "none on the file yet, no O_CREAT";
  EXPECT_EQ(Xrcd::open(*ctx_, fd_, O_CREAT | O_TRUNC, &x), EINVAL) << "an unknown flag";
  EXPECT_EQ(Xrcd::open(*ctx_, 12345, O_CREAT, &x), EBADF);
  Xrcd* a = nullptr;
  ASSERT_EQ(Xrcd::open(*ctx_, fd_, O_CREAT, &a), 0);
  // Another descriptor of the same file, from another context: the same
  // domain.
  const int again = dup(fd_);
  Context other(*dev_, nullptr);
  Xrcd* b = nullptr;
  ASSERT_EQ(Xrcd::open(other, again, 0, &b), 0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(Xrcd::open(*ctx_, fd_, O_CREAT | O_EXCL, &x), EINVAL) << "it exists";
  Xrcd* anon = nullptr;
  ASSERT_EQ(Xrcd::open(*ctx_, -1, O_CREAT, &anon), 0);
  EXPECT_NE(anon, a) << "fd -1 makes a domain of its own";
  EXPECT_EQ(Xrcd::close(anon), 0);
  EXPECT_EQ(Xrcd::close(b), 0);
  EXPECT_EQ(Xrcd::close(a), 0);
  close(again);
  // The last opening closed: the file has no domain any more.
  EXPECT_EQ(Xrcd::open(*ctx_, fd_, 0, &x), EINVAL);
}

TEST_F(XrcDomains, SrqsAndTargetsKeepTheDomainAndATargetGoesWithItsLastHandle) {
  Xrcd* x = nullptr;
  ASSERT_EQ(Xrcd::open(*ctx_, fd_, O_CREAT, &x), 0);
  std::unique_ptr<Srq> s1, s2;
  ASSERT_EQ(Srq::create_xrc(*pd_, *x, *cq_, 16, 1, 0, &s1), 0);
  ASSERT_EQ(Srq::create_xrc(*pd_, *x, *cq_, 16, 1, 0, &s2), 0);
  EXPECT_NE(s1->srq_num(), 0u);
  EXPECT_NE(s1->srq_num(), s2->srq_num());
  EXPECT_EQ(s1->xrcd(), x);
  EXPECT_EQ(Cq::destroy(cq_), EBUSY) << "the SRQs complete into it";
  transport::XrcSrq found;
  EXPECT_EQ(x->find_srq(s2->srq_num(), &found), transport::XrcDomain::Lookup::kFound);
  EXPECT_EQ(found.rq, s2.get());
  EXPECT_EQ(found.cq, cq_.get());
  EXPECT_EQ(x->find_srq(s2->srq_num() ^ 1, &found), transport::XrcDomain::Lookup::kNoSuchSrq);

  Xrcd* other = nullptr;
  ASSERT_EQ(Xrcd::open(*ctx_, -1, O_CREAT, &other), 0);
  EXPECT_EQ(other->find_srq(s1->srq_num(), &found), transport::XrcDomain::Lookup::kOtherDomain);
  EXPECT_EQ(Xrcd::close(other), 0);

  std::shared_ptr<QueuePair> tgt;
  ASSERT_EQ(QueuePair::create_xrc_target(*x, &tgt), 0);
  EXPECT_EQ(tgt->type(), transport::QpType::kXrcTgt);
  EXPECT_EQ(tgt->pd(), nullptr);
  EXPECT_EQ(tgt->caps().max_send_wr, 0u);
  std::shared_ptr<QueuePair> opened = x->open_target(tgt->qpn());
  EXPECT_EQ(opened, tgt);
  EXPECT_EQ(x->open_target(tgt->qpn() ^ 1), nullptr);

  EXPECT_EQ(Xrcd::close(x), EBUSY) << "SRQs and a target QP are in it";
  const std::uint32_t qpn = tgt->qpn();
  EXPECT_EQ(QueuePair::destroy(tgt), 0);
  EXPECT_EQ(x->open_target(qpn), opened) << "one handle is left";
  EXPECT_EQ(QueuePair::destroy(opened), 0);
  EXPECT_EQ(x->open_target(qpn), nullptr) << "gone with its last handle";
  const std::uint32_t n1 = s1->srq_num();
  EXPECT_EQ(Srq::destroy(s1), 0);
  EXPECT_EQ(x->find_srq(n1, &found), transport::XrcDomain::Lookup::kNoSuchSrq);
  EXPECT_EQ(Srq::destroy(s2), 0);
  EXPECT_EQ(Xrcd::close(x), 0);
}

TEST_F(XrcDomains, AnInitiatorsMessagesLandInTheSrqsTheyName) {
  Xrcd* x = nullptr;
  ASSERT_EQ(Xrcd::open(*ctx_, -1, O_CREAT, &x), 0);
  std::unique_ptr<Cq> srq_cq, send_cq;
  ASSERT_EQ(Cq::create(*ctx_, 64, nullptr, 0, &srq_cq), 0);
  ASSERT_EQ(Cq::create(*ctx_, 64, nullptr, 0, &send_cq), 0);
  std::unique_ptr<Srq> a, b;
  ASSERT_EQ(Srq::create_xrc(*pd_, *x, *srq_cq, 16, 1, 0, &a), 0);
  ASSERT_EQ(Srq::create_xrc(*pd_, *x, *srq_cq, 16, 1, 0, &b), 0);
  std::vector<std::uint8_t> buf(3 * 4096);
  std::iota(buf.begin(), buf.begin() + 4096, 1);
  std::unique_ptr<Mr> mr;
  ASSERT_EQ(Mr::reg(*pd_, buf.data(), buf.size(), reinterpret_cast<std::uint64_t>(buf.data()),
                    access::kLocalWrite, &mr),
            0);
  const auto base = reinterpret_cast<std::uint64_t>(buf.data());
  for (auto [srq, at] : {std::pair{a.get(), 4096}, std::pair{b.get(), 8192}}) {
    transport::RecvWr r;
    r.wr_id = static_cast<std::uint64_t>(at);
    r.num_sge = 1;
    r.sg_list[0] = {base + static_cast<std::uint64_t>(at), 4096, mr->lkey()};
    ASSERT_EQ(srq->post_recv(r), 0);
  }

  std::shared_ptr<QueuePair> tgt;
  ASSERT_EQ(QueuePair::create_xrc_target(*x, &tgt), 0);
  QpCaps caps;
  caps.max_send_wr = 16;
  caps.max_send_sge = 1;
  std::unique_ptr<QueuePair> ini;
  ASSERT_EQ(QueuePair::create_xrc_initiator(*pd_, caps, *send_cq, &ini), 0);
  EXPECT_EQ(ini->recv_cq(), nullptr);
  transport::RecvWr none;
  EXPECT_EQ(ini->post_recv(none), EINVAL) << "an initiator receives nothing";

  // Both ends on this device's own address, as RC QPs are connected; the
  // attributes of the other half go as the kernel's uverbs drops them.
  const auto gid = wire::IpAddr::from_v4(0x0A4E0001).bytes;
  for (auto [q, peer] : {std::pair{ini.get(), tgt->qpn()}, std::pair{tgt.get(), ini->qpn()}}) {
    QpModify m;
    m.attr.qp_state = transport::QpState::kInit;
    m.attr.qp_access_flags = access::kLocalWrite | access::kRemoteWrite;
    ASSERT_EQ(q->modify(m, am::kState | am::kPkeyIndex | am::kPort | am::kAccessFlags), 0);
    m.av.sgid_index = 1;
    m.av.dgid = gid;
    m.attr.qp_state = transport::QpState::kRtr;
    m.attr.path_mtu = wire::Mtu::k1024;
    m.attr.dest_qp_num = peer;
    m.attr.max_dest_rd_atomic = 4;
    m.attr.min_rnr_timer = 12;
    ASSERT_EQ(q->modify(m, am::kState | am::kAv | am::kPathMtu | am::kDestQpn | am::kRqPsn |
                               am::kMaxDestRdAtomic | am::kMinRnrTimer),
              0);
    m.attr.qp_state = transport::QpState::kRts;
    m.attr.timeout = 14;
    m.attr.retry_cnt = 7;
    m.attr.rnr_retry = 7;
    m.attr.max_rd_atomic = 4;
    ASSERT_EQ(q->modify(m, am::kState | am::kSqPsn | am::kTimeout | am::kRetryCnt |
                               am::kRnrRetry | am::kMaxQpRdAtomic),
              0);
  }

  // 3000 bytes (three packets) to B's SRQ, then 100 to A's.
  for (auto [srq, len] : {std::pair{b.get(), 3000u}, std::pair{a.get(), 100u}}) {
    transport::SendWr w;
    w.wr_id = len;
    w.opcode = transport::WrOpcode::kSend;
    w.send_flags = transport::send_flags::kSignaled;
    w.num_sge = 1;
    w.sg_list[0] = {base, len, mr->lkey()};
    w.xrc_remote_srqn = srq->srq_num();
    ASSERT_EQ(ini->post_send(w), 0);
  }
  ini->doorbell();
  std::vector<transport::Wc> recvs, sends;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((recvs.size() < 2 || sends.size() < 2) && std::chrono::steady_clock::now() < until) {
    transport::Wc wc[4];
    for (std::uint32_t i = 0, n = srq_cq->poll(wc, 4); i < n; ++i) recvs.push_back(wc[i]);
    for (std::uint32_t i = 0, n = send_cq->poll(wc, 4); i < n; ++i) sends.push_back(wc[i]);
    std::this_thread::yield();
  }
  ASSERT_EQ(sends.size(), 2u);
  for (const auto& wc : sends) EXPECT_EQ(wc.status, transport::WcStatus::kSuccess);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(recvs[0].wr_id, 8192u);
  EXPECT_EQ(recvs[0].byte_len, 3000u);
  EXPECT_EQ(recvs[0].qp_num, tgt->qpn());
  EXPECT_EQ(recvs[1].wr_id, 4096u);
  EXPECT_EQ(recvs[1].byte_len, 100u);
  EXPECT_EQ(0, std::memcmp(buf.data() + 8192, buf.data(), 3000));
  EXPECT_EQ(0, std::memcmp(buf.data() + 4096, buf.data(), 100));

  ini.reset();
  tgt.reset();
  a.reset();
  b.reset();
  mr.reset();
  srq_cq.reset();
  send_cq.reset();
  EXPECT_EQ(Xrcd::close(x), 0);
}

}  // namespace
}  // namespace uroce::verbs
