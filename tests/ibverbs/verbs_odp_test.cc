/* SPDX-License-Identifier: BSD-3-Clause */
// On-demand paging through the libibverbs API: explicit and implicit ODP
// regions carry RDMA WRITE, READ and SEND between two RC QPs of one
// device (the engine loops frames to itself back), ibv_advise_mr takes
// what ibv_advise_mr(3) allows and refuses the rest with its errno, and a
// remote peer naming an unmapped address through an implicit rkey gets a
// remote access error while the process and its device carry on. The
// device sits on one end of a veth pair in a network namespace of the
// process's own. Needs root.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ibverbs/one_device.h"

namespace {

using namespace std::chrono_literals;

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr std::size_t kSize = 1 << 16;

std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uint64_t>(p); }

class VerbsOdp : public uroce::test::OneDeviceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OneDeviceTest::SetUp());
    a_.assign(kSize, 0);
    b_.assign(kSize, 0);
  }

  void TearDown() override {
    destroy_qps();
    for (ibv_mr* mr : mrs_) EXPECT_EQ(ibv_dereg_mr(mr), 0);
    OneDeviceTest::TearDown();
  }

  ibv_mr* reg(void* addr, std::size_t length, int access) {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, length, access);
    if (mr) mrs_.push_back(mr);
    return mr;
  }

  void connect_pair() { OneDeviceTest::connect_pair(kRemoteAccess); }

  // Write, read back and send through `local` (on a_) and `remote` (on
  // b_), checking the bytes each time.
  void carry(ibv_mr* local, ibv_mr* remote) {
    for (std::size_t i = 0; i < kSize; ++i) a_[i] = static_cast<std::uint8_t>(i * 13 + 5);
    // WRITE 10000 bytes (ten packets) into b_.
    ASSERT_EQ(post(IBV_WR_RDMA_WRITE, {addr_of(a_.data()), 10000, local->lkey}, addr_of(b_.data()),
                   remote->rkey),
              0);
    ibv_wc wc = wait();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(std::memcmp(a_.data(), b_.data(), 10000), 0);
    // READ it back into the upper half of a_.
    ASSERT_EQ(post(IBV_WR_RDMA_READ, {addr_of(a_.data() + kSize / 2), 10000, local->lkey},
                   addr_of(b_.data()), remote->rkey),
              0);
    wc = wait();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.byte_len, 10000u);
    EXPECT_EQ(std::memcmp(a_.data(), a_.data() + kSize / 2, 10000), 0);
    // SEND 3000 bytes into a receive on b_'s QP, at 20000 in b_.
    ibv_sge rs{addr_of(b_.data() + 20000), 3000, remote->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 2;
    rwr.sg_list = &rs;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(qps_[1], &rwr, &rbad), 0);
    ASSERT_EQ(post(IBV_WR_SEND, {addr_of(a_.data() + 100), 3000, local->lkey}, 0, 0), 0);
    for (int i = 0; i < 2; ++i) {
      wc = wait();
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
      if (wc.opcode == IBV_WC_RECV) {
        EXPECT_EQ(wc.byte_len, 3000u);
      }
    }
    EXPECT_EQ(std::memcmp(a_.data() + 100, b_.data() + 20000, 3000), 0);
  }

  std::vector<ibv_mr*> mrs_;
  std::vector<std::uint8_t> a_, b_;
};

TEST_F(VerbsOdp, TheDeviceReportsOdpCaps) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
  EXPECT_EQ(attr.odp_caps.general_caps, IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
  const std::uint32_t rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
  for (std::uint32_t cap :
       {IBV_ODP_SUPPORT_SEND, IBV_ODP_SUPPORT_RECV, IBV_ODP_SUPPORT_WRITE, IBV_ODP_SUPPORT_READ,
        IBV_ODP_SUPPORT_ATOMIC, IBV_ODP_SUPPORT_SRQ_RECV}) {
    EXPECT_TRUE(rc & cap) << cap;
  }
  EXPECT_EQ(attr.odp_caps.per_transport_caps.ud_odp_caps,
            IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV);
}

TEST_F(VerbsOdp, AnOdpRegionCarriesWriteReadAndSendIntact) {
  ibv_mr* la = reg(a_.data(), kSize, kRemoteAccess | IBV_ACCESS_ON_DEMAND);
  ibv_mr* lb = reg(b_.data(), kSize, kRemoteAccess | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(la, nullptr);
  ASSERT_NE(lb, nullptr);
  connect_pair();
  carry(la, lb);
}

TEST_F(VerbsOdp, AnImplicitRegionCarriesWriteReadAndSendIntact) {
  ibv_mr* all = reg(nullptr, SIZE_MAX, kRemoteAccess | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->addr, nullptr);
  EXPECT_EQ(all->length, SIZE_MAX);
  connect_pair();
  carry(all, all);
}

TEST_F(VerbsOdp, ImplicitRegistrationNeedsOnDemandAccess) {
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd_, nullptr, SIZE_MAX, kRemoteAccess), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd_, nullptr, 4096, kRemoteAccess | IBV_ACCESS_ON_DEMAND), nullptr)
      << "a null address spans the whole address space or nothing";
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(VerbsOdp, AdviseMrTakesOdpRangesAndRefusesTheRest) {
  ibv_mr* odp = reg(a_.data(), kSize, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  ibv_mr* odp_ro = reg(b_.data(), kSize, IBV_ACCESS_ON_DEMAND);
  ibv_mr* pinned = reg(b_.data(), kSize, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* all = reg(nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  ASSERT_TRUE(odp && odp_ro && pinned && all);
  ibv_sge sge{addr_of(a_.data()), kSize, odp->lkey};
  constexpr auto kFlush = IBV_ADVISE_MR_FLAG_FLUSH;
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &sge, 1), 0);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, kFlush, &sge, 1), 0);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &sge, 1), 0);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, kFlush, &sge, 1), 0);
  ibv_sge two[2] = {sge, {addr_of(b_.data()), 64, all->lkey}};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, two, 2), 0);

  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x2, &sge, 1), EINVAL) << "flags";
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &sge, 0), EINVAL);
  EXPECT_EQ(ibv_advise_mr(pd_, static_cast<ibv_advise_mr_advice>(7), kFlush, &sge, 1), ENOTSUP);
  ibv_sge bad = sge;
  bad.lkey ^= 0x5A;
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &bad, 1), EFAULT) << "key";
  bad = sge;
  bad.addr += 1;
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &bad, 1), EFAULT)
      << "past the region";
  bad = {addr_of(b_.data()), 64, pinned->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &bad, 1), ENOENT)
      << "not an ODP region";
  bad = {addr_of(b_.data()), 64, odp_ro->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, kFlush, &bad, 1), EPERM);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &bad, 1), 0);

  // A range of the implicit region no access reaches: a flushed prefetch
  // says so. A PROT_NONE page rather than an unmapped one, which another
  // thread's allocator could map again before the call.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* none = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(none, MAP_FAILED);
  bad = {addr_of(none), 64, all->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, kFlush, &bad, 1), EFAULT);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, kFlush, &bad, 1), 0);
  EXPECT_EQ(munmap(none, page), 0);
}

TEST_F(VerbsOdp, AnUnmappedAddressThroughAnImplicitRkeyIsARemoteAccessError) {
  ibv_mr* la = reg(a_.data(), kSize, kRemoteAccess);
  ibv_mr* all = reg(nullptr, SIZE_MAX, kRemoteAccess | IBV_ACCESS_ON_DEMAND);
  ASSERT_TRUE(la && all);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // A page no access reaches and a read-only one. Not an unmapped page:
  // the engine thread's allocator could map the hole again before the
  // peer's request arrives (address 0 below stands for unmapped memory).
  auto* none = static_cast<std::uint8_t*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(none, MAP_FAILED);
  ASSERT_EQ(mprotect(none, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(none + page, page, PROT_READ), 0);
  auto* read_only = none + page;

  struct Case {
    ibv_wr_opcode op;
    std::uint64_t remote;
    const char* what;
  };
  for (const Case& c : {Case{IBV_WR_RDMA_WRITE, addr_of(none), "write to a PROT_NONE page"},
                        Case{IBV_WR_RDMA_READ, addr_of(none), "read of a PROT_NONE page"},
                        Case{IBV_WR_RDMA_WRITE, addr_of(read_only), "write to a read-only page"},
                        Case{IBV_WR_RDMA_WRITE, 0, "write to address 0"},
                        Case{IBV_WR_RDMA_READ, 0xFFFF800000001000ull, "read of kernel space"}}) {
    connect_pair();
    ASSERT_EQ(post(c.op, {addr_of(a_.data()), 2048, la->lkey}, c.remote, all->rkey), 0);
    const ibv_wc wc = wait();
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << c.what << ": " << ibv_wc_status_str(wc.status);
  }
  // The read-only page may still be read, and the device carries on.
  connect_pair();
  ASSERT_EQ(
      post(IBV_WR_RDMA_READ, {addr_of(a_.data()), 64, la->lkey}, addr_of(read_only), all->rkey), 0);
  const ibv_wc wc = wait();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(munmap(none, 2 * page), 0);
  carry(all, all);
}

}  // namespace
