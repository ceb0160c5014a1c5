/* SPDX-License-Identifier: BSD-3-Clause */
// Device memory (ibv_alloc_dm and friends) as a program built from source
// sees it: linked to liburoce-ibverbs ahead of libibverbs, calling verbs.h
// only. One uroce device on a veth in a network namespace of the process's
// own; its two RC QPs talk to each other through the device's loopback.
// Needs root.

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

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

constexpr unsigned kDmAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                               IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class DeviceMemoryApi : public uroce::test::OneDeviceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OneDeviceTest::SetUp());
    ibv_device_attr_ex attr{};
    ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
    max_dm_size_ = attr.max_dm_size;
    ASSERT_GT(max_dm_size_, 0u);
  }

  ibv_dm* alloc(std::size_t length, std::uint32_t log_align = 0) {
    ibv_alloc_dm_attr a{};
    a.length = length;
    a.log_align_req = log_align;
    return ibv_alloc_dm(ctx_, &a);
  }

  void connect_pair() {
    OneDeviceTest::connect_pair(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ);
  }
  int post(ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote, std::uint32_t rkey) {
    return OneDeviceTest::post(op, sge, remote, rkey, 3);
  }

  std::uint64_t max_dm_size_ = 0;
};

TEST_F(DeviceMemoryApi, BytesCopiedInComeBackOutIntact) {
  ibv_dm* dm = alloc(4096);
  ASSERT_NE(dm, nullptr) << std::strerror(errno);
  std::vector<std::uint8_t> in(1024);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 31 + 7);
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 512, in.data(), in.size()), 0);
  std::vector<std::uint8_t> out(4096, 0xEE);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm, 0, out.size()), 0);
  EXPECT_EQ(std::memcmp(out.data() + 512, in.data(), in.size()), 0);
  // New device memory is zeroed, and the copy stayed in its range.
  for (std::size_t i = 0; i < 512; ++i) ASSERT_EQ(out[i], 0) << i;
  for (std::size_t i = 512 + in.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 0) << i;
  // The whole allocation, to its last word.
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 4092, in.data(), 4), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm, 4092, 4), 0);
  EXPECT_EQ(std::memcmp(out.data(), in.data(), 4), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

TEST_F(DeviceMemoryApi, BadRequestsGetTheDocumentedErrno) {
  // Expect: nothing, more than the device has, a bad comp_mask or too
  // strict an alignment is EINVAL.
  errno = 0;
  EXPECT_EQ(alloc(0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(alloc(max_dm_size_ + 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(alloc(64, 31), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_alloc_dm_attr bad_mask{64, 0, 1};
  EXPECT_EQ(ibv_alloc_dm(ctx_, &bad_mask), nullptr);
  EXPECT_EQ(errno, EINVAL);

  // Expect: past what is left of the device's memory is ENOMEM, until
  // some is freed.
  ibv_dm* half = alloc(max_dm_size_ / 2);
  ASSERT_NE(half, nullptr);
  ibv_dm* rest = alloc(max_dm_size_ - max_dm_size_ / 2);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(alloc(4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(ibv_free_dm(rest), 0);

  // Expect: copies of unaligned offset or length are EINVAL, outside the
  // allocation EFAULT.
  ibv_dm* dm = alloc(100);
  ASSERT_NE(dm, nullptr);
  std::array<std::uint8_t, 256> buf{};
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 3, buf.data(), 4), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 4, buf.data(), 3), EINVAL);
  EXPECT_EQ(ibv_memcpy_from_dm(buf.data(), dm, 1, 4), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 104, buf.data(), 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(buf.data(), dm, 0, 104), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(buf.data(), dm, ~std::uint64_t{3}, 8), EFAULT);

  // Expect: a region on it must be zero-based and inside it.
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 100, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 104, kDmAccess), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 8, 96, kDmAccess), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 100, kDmAccess | IBV_ACCESS_ON_DEMAND), nullptr);
  EXPECT_EQ(errno, EINVAL);

  // Expect: memory a region covers cannot be freed (EBUSY).
  ibv_mr* mr = ibv_reg_dm_mr(pd_, dm, 4, 96, kDmAccess);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  EXPECT_EQ(mr->addr, nullptr);
  EXPECT_EQ(mr->length, 96u);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY);
  errno = 0;
  EXPECT_EQ(
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
      IBV_REREG_MR_ERR_INPUT)
      << "a region on device memory stays on it";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);

  // Another context of the process imports it: the same memory, which
  // outlives the original's free; an unknown handle is EINVAL.
  ibv_dm* imported = ibv_import_dm(ctx_, half->handle);
  ASSERT_NE(imported, nullptr);
  const std::uint32_t word = 0xC0FFEE11;
  ASSERT_EQ(ibv_memcpy_to_dm(half, 0, &word, sizeof(word)), 0);
  EXPECT_EQ(ibv_free_dm(half), 0);
  std::uint32_t back = 0;
  ASSERT_EQ(ibv_memcpy_from_dm(&back, imported, 0, sizeof(back)), 0);
  EXPECT_EQ(back, word);
  ibv_unimport_dm(imported);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(ctx_, 0xFFFFFF), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(DeviceMemoryApi, AZeroBasedRegionServesWriteAndReadBetweenTwoQps) {
  connect_pair();
  constexpr std::size_t kDm = 8192;
  constexpr std::uint64_t kMrOffset = 4096;  // the region: the upper half
  constexpr std::size_t kLen = 1536;         // two packets at MTU 1024
  ibv_dm* dm = alloc(kDm);
  ASSERT_NE(dm, nullptr);
  ibv_mr* dm_mr = ibv_reg_dm_mr(pd_, dm, kMrOffset, kDm - kMrOffset, kDmAccess);
  ASSERT_NE(dm_mr, nullptr) << std::strerror(errno);
  std::vector<std::uint8_t> host(8192);
  for (std::size_t i = 0; i < kLen; ++i) host[i] = static_cast<std::uint8_t>(i * 11 + 3);
  ibv_mr* host_mr =
      ibv_reg_mr(pd_, host.data(), host.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(host_mr, nullptr);

  // WRITE from host memory to address 256 of the region: offset 4096 + 256
  // of the device memory.
  ASSERT_EQ(
      post(IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(host.data()), kLen, host_mr->lkey},
           256, dm_mr->rkey),
      0);
  ibv_wc wc = wait();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  observe();
  std::vector<std::uint8_t> seen(kDm, 0xEE);
  ASSERT_EQ(ibv_memcpy_from_dm(seen.data(), dm, 0, kDm), 0);
  EXPECT_EQ(std::memcmp(seen.data() + kMrOffset + 256, host.data(), kLen), 0);
  for (std::size_t i = 0; i < kDm; ++i) {
    if (i < kMrOffset + 256 || i >= kMrOffset + 256 + kLen) {
      ASSERT_EQ(seen[i], 0) << i;
    }
  }

  // READ it back from the region into another part of host memory, and
  // WRITE from the region (its lkey, address 256) into host memory.
  ASSERT_EQ(post(IBV_WR_RDMA_READ,
                 {reinterpret_cast<std::uint64_t>(host.data() + 2048), kLen, host_mr->lkey}, 256,
                 dm_mr->rkey),
            0);
  wc = wait();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, kLen);
  EXPECT_EQ(std::memcmp(host.data() + 2048, host.data(), kLen), 0);
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, {256, kLen, dm_mr->lkey},
                 reinterpret_cast<std::uint64_t>(host.data() + 4096), host_mr->rkey),
            0);
  wc = wait();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  observe();
  EXPECT_EQ(std::memcmp(host.data() + 4096, host.data(), kLen), 0);

  // Expect: a WRITE reaching past the region's end is refused at the
  // responder and touches none of the device memory.
  ASSERT_EQ(
      post(IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(host.data()), 512, host_mr->lkey},
           kDm - kMrOffset - 256, dm_mr->rkey),
      0);
  wc = wait();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  observe();
  std::vector<std::uint8_t> after(kDm, 0xEE);
  ASSERT_EQ(ibv_memcpy_from_dm(after.data(), dm, 0, kDm), 0);
  EXPECT_EQ(after, seen);

  // Drain the flushed completions the error left, then tear down.
  while (ibv_poll_cq(cq_, 1, &wc) > 0) {
  }
  EXPECT_EQ(ibv_dereg_mr(host_mr), 0);
  EXPECT_EQ(ibv_dereg_mr(dm_mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

}  // namespace
