/* SPDX-License-Identifier: BSD-3-Clause */
// XRC through the libibverbs API: a target QP shared by two contexts (one
// made it, the other opened it by number with ibv_open_qp) gets its
// asynchronous events in each context that holds it, each naming that
// context's own handle, as the kernel delivers them to every opener; and
// in the context that still holds it once the maker's handle is gone. The
// event: the target's SRQ completes into a CQ nobody polls, and the
// completion it cannot deliver ends the target (IBA 11.4.2.1).

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "ibverbs/one_device.h"

namespace uroce::test {
namespace {

class VerbsXrc : public OneDeviceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OneDeviceTest::SetUp());
    // Both contexts open one domain through one file, as two processes
    // would.
    char path[] = "/tmp/uroce-xrcd-XXXXXX";
    fd_ = mkstemp(path);
    ASSERT_GE(fd_, 0);
    unlink(path);
    other_ = open_device("uroce0");
    ASSERT_NE(other_, nullptr);
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = fd_;
    xa.oflags = O_CREAT;
    xrcd_ = ibv_open_xrcd(ctx_, &xa);
    ASSERT_NE(xrcd_, nullptr);
    other_xrcd_ = ibv_open_xrcd(other_, &xa);
    ASSERT_NE(other_xrcd_, nullptr);

    ibv_qp_init_attr_ex ta{};
    ta.qp_type = IBV_QPT_XRC_RECV;
    ta.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    ta.xrcd = xrcd_;
    target_ = ibv_create_qp_ex(ctx_, &ta);
    ASSERT_NE(target_, nullptr);

    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_XRC_SEND;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = pd_;
    ia.send_cq = cq_;
    ia.cap.max_send_wr = 4;
    ia.cap.max_send_sge = 1;
    initiator_ = ibv_create_qp_ex(ctx_, &ia);
    ASSERT_NE(initiator_, nullptr);
    ASSERT_NO_FATAL_FAILURE(connect_to_self(target_, initiator_->qp_num, 0));
    ASSERT_NO_FATAL_FAILURE(connect_to_self(initiator_, target_->qp_num, 0));

    ibv_qp_open_attr oa{};
    oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    oa.qp_num = target_->qp_num;
    oa.xrcd = other_xrcd_;
    oa.qp_type = IBV_QPT_XRC_RECV;
    opened_ = ibv_open_qp(other_, &oa);
    ASSERT_NE(opened_, nullptr);
    EXPECT_EQ(opened_->qp_num, target_->qp_num);
    EXPECT_EQ(opened_->context, other_);
  }

  void TearDown() override {
    for (ibv_qp* q : {initiator_, opened_, target_}) {
      if (q) {
        EXPECT_EQ(ibv_destroy_qp(q), 0);
      }
    }
    if (srq_) {
      EXPECT_EQ(ibv_destroy_srq(srq_), 0);
    }
    if (small_) {
      EXPECT_EQ(ibv_destroy_cq(small_), 0);
    }
    for (ibv_xrcd* x : {other_xrcd_, xrcd_}) {
      if (x) {
        EXPECT_EQ(ibv_close_xrcd(x), 0);
      }
    }
    if (other_) {
      EXPECT_EQ(ibv_close_device(other_), 0);
    }
    if (fd_ >= 0) close(fd_);
    OneDeviceTest::TearDown();
  }

  // An XRC SRQ completing into a CQ of two entries that nobody polls, and
  // four SENDs to it: the third completion has no room.
  void overflow_the_targets_cq() {
    small_ = ibv_create_cq(ctx_, 2, nullptr, nullptr, 0);
    ASSERT_NE(small_, nullptr);
    ibv_srq_init_attr_ex sa{};
    sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                   IBV_SRQ_INIT_ATTR_CQ;
    sa.srq_type = IBV_SRQT_XRC;
    sa.pd = pd_;
    sa.xrcd = xrcd_;
    sa.cq = small_;
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    srq_ = ibv_create_srq_ex(ctx_, &sa);
    ASSERT_NE(srq_, nullptr);
    std::uint32_t srqn = 0;
    ASSERT_EQ(ibv_get_srq_num(srq_, &srqn), 0);
    for (int i = 0; i < 8; ++i) {
      ibv_recv_wr rwr{};
      rwr.wr_id = static_cast<std::uint64_t>(i);
      ibv_recv_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_srq_recv(srq_, &rwr, &bad), 0);
    }
    for (int i = 0; i < 4; ++i) {
      ibv_send_wr wr{};  // no data: where it lands is what counts
      wr.wr_id = static_cast<std::uint64_t>(i);
      wr.opcode = IBV_WR_SEND;
      wr.qp_type.xrc.remote_srqn = srqn;
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(initiator_, &wr, &bad), 0);
    }
  }

  // Expects the CQ's overflow, in the context that made the CQ.
  void expect_cq_error() {
    ibv_async_event e{};
    ASSERT_TRUE(next_async_event(ctx_, &e)) << "no asynchronous event";
    EXPECT_EQ(e.event_type, IBV_EVENT_CQ_ERR);
    EXPECT_EQ(e.element.cq, small_);
    ibv_ack_async_event(&e);
  }

  // Expects one QP_FATAL in `ctx`, naming `qp`.
  static void expect_fatal(ibv_context* ctx, ibv_qp* qp) {
    ibv_async_event e{};
    ASSERT_TRUE(next_async_event(ctx, &e)) << "no asynchronous event";
    EXPECT_EQ(e.event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(e.element.qp, qp);
    ibv_ack_async_event(&e);
  }

  int fd_ = -1;
  ibv_context* other_ = nullptr;
  ibv_xrcd* xrcd_ = nullptr;
  ibv_xrcd* other_xrcd_ = nullptr;
  ibv_qp* target_ = nullptr;
  ibv_qp* opened_ = nullptr;
  ibv_qp* initiator_ = nullptr;
  ibv_cq* small_ = nullptr;
  ibv_srq* srq_ = nullptr;
};

TEST_F(VerbsXrc, ATargetsFatalErrorReachesEveryHandleInItsOwnContext) {
  ASSERT_NO_FATAL_FAILURE(overflow_the_targets_cq());
  ASSERT_NO_FATAL_FAILURE(expect_cq_error());
  expect_fatal(ctx_, target_);
  expect_fatal(other_, opened_);
  ibv_async_event e{};
  EXPECT_FALSE(next_async_event(other_, &e, 200)) << "one event per handle";
}

TEST_F(VerbsXrc, ATargetWhoseMakerLetGoStillReportsToItsOtherHandle) {
  ASSERT_EQ(ibv_destroy_qp(target_), 0);
  target_ = nullptr;
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(opened_, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS) << "the target goes with its last handle";
  ASSERT_NO_FATAL_FAILURE(overflow_the_targets_cq());
  ASSERT_NO_FATAL_FAILURE(expect_cq_error());
  expect_fatal(other_, opened_);
  ibv_async_event e{};
  EXPECT_FALSE(next_async_event(ctx_, &e, 200)) << "the maker holds no handle";
}

}  // namespace
}  // namespace uroce::test
