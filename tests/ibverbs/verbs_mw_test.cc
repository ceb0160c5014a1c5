/* SPDX-License-Identifier: BSD-3-Clause */
// Memory windows (ibv_alloc_mw, ibv_bind_mw, IBV_WR_BIND_MW, LOCAL_INV,
// SEND_WITH_INV) as a program built from source sees them: linked to
// liburoce-ibverbs ahead of libibverbs, calling verbs.h only. The window
// covers the middle page of a three-page region, so a stray access shows. One uroce device on a
// veth in a network namespace of the process's own; its two RC QPs talk to each other through the
// device's loopback. Needs root.

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ibverbs/one_device.h"

namespace {

using namespace std::chrono_literals;

constexpr int kMrAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
constexpr std::size_t kPage = 4096;

class MemoryWindowApi : public uroce::test::OneDeviceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OneDeviceTest::SetUp());
    // The target: three pages, the window over the middle one.
    target_.assign(3 * kPage, 0xA5);
    source_.resize(kPage);
    for (std::size_t i = 0; i < kPage; ++i) source_[i] = static_cast<std::uint8_t>(i * 13 + 1);
    mr_ = ibv_reg_mr(pd_, target_.data(), target_.size(), kMrAccess);
    ASSERT_NE(mr_, nullptr);
    src_mr_ = ibv_reg_mr(pd_, source_.data(), source_.size(), int{IBV_ACCESS_LOCAL_WRITE});
    ASSERT_NE(src_mr_, nullptr);
    connect_pair(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }

  void TearDown() override {
    destroy_qps();  // first: a type 2 window bound to a QP goes with it
    if (mw_) {
      EXPECT_EQ(ibv_dealloc_mw(mw_), 0);
    }
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (src_mr_) {
      EXPECT_EQ(ibv_dereg_mr(src_mr_), 0);
    }
    OneDeviceTest::TearDown();
  }

  int post(ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote, std::uint32_t rkey) {
    return OneDeviceTest::post(op, sge, remote, rkey, 3);
  }

  std::vector<std::uint8_t> target_;
  std::vector<std::uint8_t> source_;
  ibv_mr* mr_ = nullptr;
  ibv_mr* src_mr_ = nullptr;
  ibv_mw* mw_ = nullptr;

  std::uint64_t window() const { return reinterpret_cast<std::uint64_t>(target_.data()) + kPage; }
  ibv_sge sge(std::size_t length) {
    return {reinterpret_cast<std::uint64_t>(source_.data()), static_cast<std::uint32_t>(length),
            src_mr_->lkey};
  }
  ibv_mw_bind_info bind_info(unsigned access, std::uint64_t length = kPage) const {
    ibv_mw_bind_info info{};
    info.mr = mr_;
    info.addr = window();
    info.length = length;
    info.mw_access_flags = access;
    return info;
  }
  // Binds a type 1 window on the target QP (ibv_bind_mw) and waits.
  ibv_wc bind_type1(unsigned access) {
    ibv_mw_bind b{};
    b.wr_id = 7;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = bind_info(access);
    EXPECT_EQ(ibv_bind_mw(qps_[1], mw_, &b), 0);
    return wait();
  }
  // Binds a type 2 window on the target QP (IBV_WR_BIND_MW) to `rkey`.
  ibv_wc bind_type2(unsigned access, std::uint32_t rkey) {
    ibv_send_wr wr{};
    wr.wr_id = 8;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw_;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info = bind_info(access);
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qps_[1], &wr, &bad), 0);
    return wait();
  }
  // The target's bytes outside [from, from + n) are as they were.
  bool untouched_but(std::size_t from, std::size_t n) const {
    for (std::size_t i = 0; i < target_.size(); ++i) {
      if ((i < from || i >= from + n) && target_[i] != 0xA5) return false;
    }
    return true;
  }
};

TEST_F(MemoryWindowApi, TheDeviceReportsWindowsOfBothTypes) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_GT(attr.max_mw, 0);
}

TEST_F(MemoryWindowApi, AType1WindowCarriesWriteAndReadIntact) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw_, nullptr) << std::strerror(errno);
  const std::uint32_t old_rkey = mw_->rkey;
  EXPECT_NE(old_rkey >> 8, mr_->rkey >> 8) << "window and region keys never collide";
  const ibv_wc b = bind_type1(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(b.status, IBV_WC_SUCCESS) << ibv_wc_status_str(b.status);
  EXPECT_EQ(b.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(b.wr_id, 7u);
  EXPECT_NE(mw_->rkey, old_rkey) << "a bind gives a new key";
  EXPECT_EQ(mw_->rkey >> 8, old_rkey >> 8);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(kPage), window(), mw_->rkey), 0);
  ibv_wc wc = wait();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  observe();
  EXPECT_EQ(std::memcmp(target_.data() + kPage, source_.data(), kPage), 0);
  EXPECT_TRUE(untouched_but(kPage, kPage));
  std::fill(source_.begin(), source_.end(), 0);
  ASSERT_EQ(post(IBV_WR_RDMA_READ, sge(256), window() + 512, mw_->rkey), 0);
  wc = wait();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(source_.data(), target_.data() + kPage + 512, 256), 0);
  // The region is held while the window is bound (EBUSY, as the kernel).
  EXPECT_EQ(ibv_dereg_mr(mr_), EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);
}

TEST_F(MemoryWindowApi, AWriteLeavingTheWindowIsARemoteAccessErrorAndTouchesNothing) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw_, nullptr);
  ASSERT_EQ(bind_type1(IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
  // The region goes on past the window: only the window counts.
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(16), window() + kPage - 8, mw_->rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
  observe();
  EXPECT_TRUE(untouched_but(0, 0));
}

TEST_F(MemoryWindowApi, AWriteThroughAReadOnlyWindowIsARemoteAccessError) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw_, nullptr);
  ASSERT_EQ(bind_type1(IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(16), window(), mw_->rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
  observe();
  EXPECT_TRUE(untouched_but(0, 0));
}

TEST_F(MemoryWindowApi, AType1WindowUnboundByAnEmptyBindReachesNothing) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw_, nullptr);
  ASSERT_EQ(bind_type1(IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
  ibv_mw_bind unbind{};
  unbind.wr_id = 9;
  unbind.send_flags = IBV_SEND_SIGNALED;
  unbind.bind_info.mr = mr_;
  ASSERT_EQ(ibv_bind_mw(qps_[1], mw_, &unbind), 0);
  ASSERT_EQ(wait().status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(src_mr_), 0) << "any region may go";
  src_mr_ = ibv_reg_mr(pd_, source_.data(), source_.size(), int{IBV_ACCESS_LOCAL_WRITE});
  ASSERT_NE(src_mr_, nullptr);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(16), window(), mw_->rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
  observe();
  EXPECT_TRUE(untouched_but(0, 0));
}

TEST_F(MemoryWindowApi, AType2WindowWorksUntilLocallyInvalidated) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw_, nullptr);
  const std::uint32_t rkey = ibv_inc_rkey(mw_->rkey);
  const ibv_wc b = bind_type2(IBV_ACCESS_REMOTE_WRITE, rkey);
  ASSERT_EQ(b.status, IBV_WC_SUCCESS) << ibv_wc_status_str(b.status);
  EXPECT_EQ(b.opcode, IBV_WC_BIND_MW);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(64), window() + 64, rkey), 0);
  ASSERT_EQ(wait().status, IBV_WC_SUCCESS);
  observe();
  EXPECT_EQ(std::memcmp(target_.data() + kPage + 64, source_.data(), 64), 0);
  EXPECT_TRUE(untouched_but(kPage + 64, 64));
  ibv_send_wr inv{};
  inv.wr_id = 10;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey;
  inv.num_sge = 99;  // carries no data: the SGL is not looked at
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qps_[1], &inv, &bad), 0);
  const ibv_wc i = wait();
  ASSERT_EQ(i.status, IBV_WC_SUCCESS);
  EXPECT_EQ(i.opcode, IBV_WC_LOCAL_INV);
  std::fill(target_.begin(), target_.end(), 0xA5);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(64), window() + 64, rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
  observe();
  EXPECT_TRUE(untouched_but(0, 0));
}

TEST_F(MemoryWindowApi, ASendWithInvalidateFreesAType2Window) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw_, nullptr);
  const std::uint32_t rkey = ibv_inc_rkey(mw_->rkey);
  ASSERT_EQ(bind_type2(IBV_ACCESS_REMOTE_WRITE, rkey).status, IBV_WC_SUCCESS);
  std::vector<std::uint8_t> inbox(64);
  ibv_mr* inbox_mr = ibv_reg_mr(pd_, inbox.data(), inbox.size(), int{IBV_ACCESS_LOCAL_WRITE});
  ASSERT_NE(inbox_mr, nullptr);
  ibv_sge r{reinterpret_cast<std::uint64_t>(inbox.data()), 64, inbox_mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 11;
  rwr.sg_list = &r;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(qps_[1], &rwr, &rbad), 0);
  ibv_sge s = sge(8);
  ibv_send_wr wr{};
  wr.wr_id = 12;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qps_[0], &wr, &bad), 0);
  bool got_recv = false;
  for (int n = 0; n < 2; ++n) {
    const ibv_wc wc = wait();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.wr_id == 11) {
      got_recv = true;
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, rkey);
    }
  }
  EXPECT_TRUE(got_recv);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(64), window(), rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
  observe();
  EXPECT_TRUE(untouched_but(0, 0));
  EXPECT_EQ(ibv_dereg_mr(inbox_mr), 0);
}

TEST_F(MemoryWindowApi, ADeallocatedWindowReachesNothing) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw_, nullptr);
  const std::uint32_t rkey = ibv_inc_rkey(mw_->rkey);
  ASSERT_EQ(bind_type2(IBV_ACCESS_REMOTE_WRITE, rkey).status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_dealloc_mw(mw_), 0);
  mw_ = nullptr;
  EXPECT_EQ(ibv_dereg_mr(mr_), 0) << "the window let the region go";
  mr_ = nullptr;
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, sge(64), window(), rkey), 0);
  EXPECT_EQ(wait().status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MemoryWindowApi, DestroyingItsQpFreesAType2Window) {
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw_, nullptr);
  ASSERT_EQ(bind_type2(IBV_ACCESS_REMOTE_WRITE, ibv_inc_rkey(mw_->rkey)).status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(mr_), EBUSY);
  ASSERT_EQ(ibv_destroy_qp(qps_[1]), 0);
  qps_.pop_back();
  EXPECT_EQ(ibv_dereg_mr(mr_), 0) << "the window went with its QP";
  mr_ = nullptr;
}

TEST_F(MemoryWindowApi, BadInputsGetTheirErrno) {
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw_, nullptr);
  // A type 2 window is bound by a WR, never by ibv_bind_mw.
  ibv_mw_bind b{};
  b.bind_info = bind_info(IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ibv_bind_mw(qps_[1], mw_, &b), EINVAL);
  // Zero-based windows are not offered.
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw_;
  wr.bind_mw.rkey = ibv_inc_rkey(mw_->rkey);
  wr.bind_mw.bind_info = bind_info(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qps_[1], &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  // A type 1 window is bound by ibv_bind_mw, never by a WR.
  ibv_mw* one = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(one, nullptr);
  wr.bind_mw.mw = one;
  wr.bind_mw.bind_info = bind_info(IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ibv_post_send(qps_[1], &wr, &bad), EINVAL);
  EXPECT_EQ(ibv_dealloc_mw(one), 0);
  // A region without IBV_ACCESS_MW_BIND: the bind fails when it runs
  // (C10-73), with IBV_WC_MW_BIND_ERR, unsignaled or not.
  wr.bind_mw.mw = mw_;
  wr.bind_mw.bind_info.mr = src_mr_;
  wr.bind_mw.bind_info.addr = reinterpret_cast<std::uint64_t>(source_.data());
  wr.wr_id = 13;
  ASSERT_EQ(ibv_post_send(qps_[1], &wr, &bad), 0);
  const ibv_wc wc = wait();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 13u);
}

}  // namespace
