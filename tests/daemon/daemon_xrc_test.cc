/* SPDX-License-Identifier: BSD-3-Clause */
// XRC domains shared between the programs of one host through the device
// daemon, as the kernel shares them by file: two programs open the same
// file, each makes an SRQ in the domain, the first makes a target QP, and
// the host at the other end sends to both SRQs through that one target
// QP. Each message must land in the program that owns the SRQ it names,
// with its bytes and completion; READs and WRITEs reach that program's
// memory; the target QP is one QP on the wire.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "daemon_fixture.h"
#include "support/child.h"
#include "verbs/srq.h"
#include "verbs/xrcd.h"

namespace uroce::daemon {
namespace {

using namespace std::chrono_literals;
using test::connect_rc;
using transport::QpState;
using transport::RecvWr;
using transport::SendWr;
using transport::Wc;
using transport::WcStatus;
using transport::WrOpcode;

class DaemonXrc : public Daemon {
 protected:
  void SetUp() override {
    Daemon::SetUp();
    a_ = attach();
    b_ = attach();
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(remote().dev);
    file_ = dir_ + "/domain";
    fd_a_ = open(file_.c_str(), O_RDWR | O_CREAT, 0600);
    fd_b_ = open(file_.c_str(), O_RDONLY);  // another open file of the same inode
    ASSERT_GE(fd_a_, 0);
    ASSERT_GE(fd_b_, 0);
  }
  void TearDown() override {
    if (fd_a_ >= 0) close(fd_a_);
    if (fd_b_ >= 0) close(fd_b_);
    Daemon::TearDown();
  }

  // An XRC SRQ of `h`'s, in `x`, completing in h's CQ.
  std::unique_ptr<verbs::Srq> make_srq(Host& h, verbs::Xrcd& x) {
    std::unique_ptr<verbs::Srq> s;
    EXPECT_EQ(verbs::Srq::create_xrc(*h.pd, x, *h.cq, 64, 1, 0, &s), 0);
    return s;
  }
  static void post_srq(Host& h, verbs::Srq& s, std::uint64_t id, std::size_t off,
                       std::uint32_t len) {
    RecvWr r;
    r.wr_id = id;
    r.num_sge = 1;
    r.sg_list[0] = {h.addr(off), len, h.mr->lkey()};
    ASSERT_EQ(s.post_recv(r), 0);
  }

  std::unique_ptr<Host> a_, b_;
  std::string file_;
  int fd_a_ = -1;
  int fd_b_ = -1;
};

TEST_F(DaemonXrc, TwoProgramsOpeningOneFileShareOneDomain) {
  verbs::Xrcd* xa = nullptr;
  verbs::Xrcd* xb = nullptr;
  // The second needs no O_CREAT: the host has the domain already.
  EXPECT_EQ(verbs::Xrcd::open(*b_->ctx, fd_b_, 0, &xb), EINVAL) << "no domain yet";
  ASSERT_EQ(verbs::Xrcd::open(*a_->ctx, fd_a_, O_CREAT, &xa), 0);
  ASSERT_EQ(verbs::Xrcd::open(*b_->ctx, fd_b_, 0, &xb), 0);
  EXPECT_NE(xa->host_domain(), 0u);
  EXPECT_EQ(xa->host_domain(), xb->host_domain());
  verbs::Xrcd* excl = nullptr;
  EXPECT_EQ(verbs::Xrcd::open(*b_->ctx, fd_a_, O_CREAT | O_EXCL, &excl), EINVAL);
  EXPECT_EQ(verbs::Xrcd::close(xb), 0);
  EXPECT_EQ(verbs::Xrcd::close(xa), 0);
  // Closed by both: gone from the host.
  EXPECT_EQ(verbs::Xrcd::open(*b_->ctx, fd_b_, 0, &xb), EINVAL);
}

TEST_F(DaemonXrc, OneTargetQpDeliversToTheSrqsOfBothPrograms) {
  verbs::Xrcd* xa = nullptr;
  verbs::Xrcd* xb = nullptr;
  ASSERT_EQ(verbs::Xrcd::open(*a_->ctx, fd_a_, O_CREAT, &xa), 0);
  ASSERT_EQ(verbs::Xrcd::open(*b_->ctx, fd_b_, 0, &xb), 0);
  {
    auto sa = make_srq(*a_, *xa);
    auto sb = make_srq(*b_, *xb);
    ASSERT_TRUE(sa && sb);
    std::shared_ptr<verbs::QueuePair> tgt;
    ASSERT_EQ(verbs::QueuePair::create_xrc_target(*xa, &tgt), 0);
    Host& r = remote();
    std::unique_ptr<verbs::QueuePair> ini;
    verbs::QpCaps caps;
    caps.max_send_wr = 64;
    caps.max_send_sge = 1;
    ASSERT_EQ(verbs::QueuePair::create_xrc_initiator(*r.pd, caps, *r.cq, &ini), 0);
    ASSERT_NO_FATAL_FAILURE(connect_rc(*tgt, r.gid(), ini->qpn()));
    ASSERT_NO_FATAL_FAILURE(connect_rc(*ini, a_->gid(), tgt->qpn()));

    // Sends alternating between the programs' SRQs, several packets each
    // (path MTU 1024), then a WRITE into b's memory and a READ of a's.
    constexpr int kSends = 8;
    constexpr std::uint32_t kLen = 3000;
    std::iota(r.buf.begin(), r.buf.begin() + kSends * kLen, 7);
    std::iota(a_->buf.begin() + 100000, a_->buf.begin() + 104000, 200);
    for (int i = 0; i < kSends; ++i) {
      Host& h = i % 2 ? *b_ : *a_;
      ASSERT_NO_FATAL_FAILURE(
          post_srq(h, i % 2 ? *sb : *sa, static_cast<std::uint64_t>(i), i * kLen, kLen));
    }
    for (int i = 0; i < kSends; ++i) {
      SendWr w = r.wr(WrOpcode::kSend, static_cast<std::uint64_t>(i), i * kLen, kLen);
      w.xrc_remote_srqn = (i % 2 ? sb : sa)->srq_num();
      ASSERT_NO_FATAL_FAILURE(r.post(*ini, w));
    }
    SendWr wr = r.wr(WrOpcode::kRdmaWrite, 100, 0, 4000);
    wr.xrc_remote_srqn = sb->srq_num();
    wr.remote_addr = b_->addr(50000);
    wr.rkey = b_->mr->rkey();
    ASSERT_NO_FATAL_FAILURE(r.post(*ini, wr));
    SendWr rd = r.wr(WrOpcode::kRdmaRead, 101, 60000, 4000);
    rd.xrc_remote_srqn = sa->srq_num();
    rd.remote_addr = a_->addr(100000);
    rd.rkey = a_->mr->rkey();
    ASSERT_NO_FATAL_FAILURE(r.post(*ini, rd));

    const std::vector<Wc> ws = r.poll(kSends + 2);
    ASSERT_EQ(ws.size(), static_cast<std::size_t>(kSends + 2));
    for (const Wc& w : ws) EXPECT_EQ(w.status, WcStatus::kSuccess) << "wr " << w.wr_id;
    for (Host* h : {a_.get(), b_.get()}) {
      const std::vector<Wc> got = h->poll(kSends / 2);
      ASSERT_EQ(got.size(), static_cast<std::size_t>(kSends / 2)) << (h == a_.get() ? "a" : "b");
      for (std::size_t k = 0; k < got.size(); ++k) {
        const Wc& w = got[k];
        const auto i = static_cast<int>(w.wr_id);
        EXPECT_EQ(w.status, WcStatus::kSuccess);
        EXPECT_EQ(i % 2, h == b_.get() ? 1 : 0) << "message " << i << " in the wrong program";
        EXPECT_EQ(w.byte_len, kLen);
        EXPECT_EQ(w.qp_num, tgt->qpn());
        EXPECT_EQ(0, std::memcmp(h->buf.data() + i * kLen, r.buf.data() + i * kLen, kLen))
            << "message " << i;
      }
    }
    // The WRITE came after b's last message: its bytes are seen once b's
    // engine, which wrote them, has been taken since (as a program sees a
    // WRITE after the completion of a later SEND).
    b_->dev->engine().locked([] {});
    EXPECT_EQ(0, std::memcmp(b_->buf.data() + 50000, r.buf.data(), 4000)) << "the WRITE";
    EXPECT_EQ(0, std::memcmp(r.buf.data() + 60000, a_->buf.data() + 100000, 4000)) << "the READ";
    // b received through a Qp of its own for a's target QP, and opens it
    // by number as ibv_open_qp does: the state a's modify set.
    std::shared_ptr<verbs::QueuePair> opened = xb->open_target(tgt->qpn());
    ASSERT_TRUE(opened);
    EXPECT_EQ(opened->qpn(), tgt->qpn());
    EXPECT_EQ(opened->state(), QpState::kRts);
    EXPECT_GT(opened->qp().counters().get(transport::Counter::kRcvdPkts), 0u);
    EXPECT_GT(tgt->qp().counters().get(transport::Counter::kRcvdPkts), 0u);
    EXPECT_EQ(b_->counters().at("engine.rx_unknown_qpn"), 0u);
    opened.reset();
    ASSERT_EQ(verbs::QueuePair::destroy(ini), 0);
    ASSERT_EQ(verbs::QueuePair::destroy(tgt), 0);
  }
  EXPECT_EQ(verbs::Xrcd::close(xb), 0);
  EXPECT_EQ(verbs::Xrcd::close(xa), 0);
}

TEST_F(DaemonXrc, AnotherProcessReceivesThroughTheTargetQpOfThisOne) {
  // A program of another process (xrc_member) opens the domain this one
  // made; the remote host sends to its SRQ and to ours, alternately,
  // through our target QP, and WRITEs into its memory.
  constexpr std::uint32_t kCount = 16;
  constexpr std::uint32_t kLen = 2500;
  verbs::Xrcd* xa = nullptr;
  ASSERT_EQ(verbs::Xrcd::open(*a_->ctx, fd_a_, O_CREAT, &xa), 0);
  {
    auto sa = make_srq(*a_, *xa);
    ASSERT_TRUE(sa);
    std::shared_ptr<verbs::QueuePair> tgt;
    ASSERT_EQ(verbs::QueuePair::create_xrc_target(*xa, &tgt), 0);
    test::Child member(std::string(UROCE_XRC_MEMBER) + " " + config_.daemon_socket + " " + file_ +
                           " " + std::to_string(kCount) + " " + std::to_string(kLen),
                       dir_ + "/member.log");
    unsigned srqn = 0;
    unsigned long long region = 0;
    unsigned rkey = 0;
    ASSERT_TRUE(test::eventually([&] {
      return std::sscanf(member.output().c_str(), "ready %u %llu %u", &srqn, &region, &rkey) == 3;
    })) << member.output();

    Host& r = remote();
    std::unique_ptr<verbs::QueuePair> ini;
    verbs::QpCaps caps;
    caps.max_send_wr = 128;
    caps.max_send_sge = 1;
    ASSERT_EQ(verbs::QueuePair::create_xrc_initiator(*r.pd, caps, *r.cq, &ini), 0);
    ASSERT_NO_FATAL_FAILURE(connect_rc(*tgt, r.gid(), ini->qpn()));
    ASSERT_NO_FATAL_FAILURE(connect_rc(*ini, a_->gid(), tgt->qpn()));
    // The member's message i is pattern(i) (xrc_member.cc); ours too.
    const auto pattern = [](std::uint32_t m, std::uint32_t k) {
      return static_cast<std::uint8_t>(m * 31 + k);
    };
    for (std::uint32_t i = 0; i <= kCount; ++i)
      for (std::uint32_t k = 0; k < kLen; ++k) r.buf[i * kLen + k] = pattern(i, k);
    for (std::uint32_t k = 0; k < kLen; ++k) r.buf[(kCount + 1) * kLen + k] = pattern(1000, k);
    for (std::uint32_t i = 0; i < kCount; ++i)
      ASSERT_NO_FATAL_FAILURE(post_srq(*a_, *sa, i, i * kLen, kLen));
    for (std::uint32_t i = 0; i < kCount; ++i) {
      SendWr ours = r.wr(WrOpcode::kSend, 1000 + i, i * kLen, kLen);
      ours.xrc_remote_srqn = sa->srq_num();
      ASSERT_NO_FATAL_FAILURE(r.post(*ini, ours));
      if (i == kCount - 1) {
        // Before the member's last message, which then finds it written.
        SendWr w = r.wr(WrOpcode::kRdmaWrite, 3000, (kCount + 1) * kLen, kLen);
        w.xrc_remote_srqn = srqn;
        w.remote_addr = region;
        w.rkey = rkey;
        ASSERT_NO_FATAL_FAILURE(r.post(*ini, w));
      }
      SendWr theirs = r.wr(WrOpcode::kSend, 2000 + i, i * kLen, kLen);
      theirs.xrc_remote_srqn = srqn;
      ASSERT_NO_FATAL_FAILURE(r.post(*ini, theirs));
    }
    const std::vector<Wc> ws = r.poll(2 * kCount + 1);
    ASSERT_EQ(ws.size(), 2 * kCount + 1) << member.output();
    for (const Wc& w : ws) EXPECT_EQ(w.status, WcStatus::kSuccess) << "wr " << w.wr_id;
    EXPECT_EQ(member.wait(30s), 0) << member.output();
    EXPECT_NE(member.output().find("ok"), std::string::npos) << member.output();
    const std::vector<Wc> got = a_->poll(kCount);
    ASSERT_EQ(got.size(), kCount);
    for (std::uint32_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(got[i].status, WcStatus::kSuccess);
      EXPECT_EQ(got[i].wr_id, i);
      EXPECT_EQ(0, std::memcmp(a_->buf.data() + i * kLen, r.buf.data() + i * kLen, kLen)) << i;
    }
    ASSERT_EQ(verbs::QueuePair::destroy(ini), 0);
    ASSERT_EQ(verbs::QueuePair::destroy(tgt), 0);
  }
  EXPECT_EQ(verbs::Xrcd::close(xa), 0);
}

}  // namespace
}  // namespace uroce::daemon
