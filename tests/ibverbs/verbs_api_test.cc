/* SPDX-License-Identifier: BSD-3-Clause */
// The libibverbs API as a program built from source sees it: this test
// links liburoce-ibverbs ahead of libibverbs and calls verbs.h only. Two
// uroce devices in this one process, uroce0 and uroce1, face each other
// over a veth pair in a network namespace of the process's own.
// Good calls move data that arrives intact; bad calls get the errno or
// completion status libibverbs documents, and the process carries on.
// Needs root.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ibverbs/one_device.h"

namespace {

using namespace std::chrono_literals;

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// One side: a device, a PD, CQs and an RC QP, with a registered buffer
// between two guard regions that no operation may touch.
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<std::uint8_t> memory;  // guard | buffer | guard
  ibv_mr* mr = nullptr;
  static constexpr std::size_t kGuard = 4096;
  static constexpr std::size_t kSize = 1 << 16;
  std::uint8_t* buf() { return memory.data() + kGuard; }

  bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (memory[i] != 0xA5 || memory[kGuard + kSize + i] != 0xA5) return false;
    }
    return true;
  }
};

class VerbsApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_error_ = uroce::test::private_veth_devices("10.88.0.1/24", "10.88.0.2/24");
  }

  void SetUp() override {
    ASSERT_EQ(setup_error_, "") << "the suite's setup failed";
    a_.ctx = uroce::test::open_device("uroce0");
    b_.ctx = uroce::test::open_device("uroce1");
    ASSERT_NE(a_.ctx, nullptr);
    ASSERT_NE(b_.ctx, nullptr);
    for (Side* s : {&a_, &b_}) {
      s->pd = ibv_alloc_pd(s->ctx);
      ASSERT_NE(s->pd, nullptr);
      s->cq = ibv_create_cq(s->ctx, 64, nullptr, nullptr, 0);
      ASSERT_NE(s->cq, nullptr);
      s->qp = create_qp(*s, IBV_QPT_RC);
      ASSERT_NE(s->qp, nullptr);
      s->memory.assign(Side::kSize + 2 * Side::kGuard, 0xA5);
      s->mr = ibv_reg_mr(s->pd, s->buf(), Side::kSize, kAllAccess);
      ASSERT_NE(s->mr, nullptr);
    }
  }

  void TearDown() override {
    for (Side* s : {&a_, &b_}) {
      if (s->qp) {
        EXPECT_EQ(ibv_destroy_qp(s->qp), 0);
      }
      if (s->mr) {
        EXPECT_EQ(ibv_dereg_mr(s->mr), 0);
      }
      if (s->cq) {
        EXPECT_EQ(ibv_destroy_cq(s->cq), 0);
      }
      if (s->pd) {
        EXPECT_EQ(ibv_dealloc_pd(s->pd), 0);
      }
      if (s->ctx) {
        EXPECT_EQ(ibv_close_device(s->ctx), 0);
      }
    }
  }

  static ibv_qp* create_qp(Side& s, ibv_qp_type type) {
    ibv_qp_init_attr init{};
    init.send_cq = s.cq;
    init.recv_cq = s.cq;
    init.qp_type = type;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = 64;
    return ibv_create_qp(s.pd, &init);
  }

  static int to_init(ibv_qp* qp, int access = kAllAccess) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = static_cast<unsigned>(access);
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }

  static ibv_qp_attr rtr_attr(Side& peer, std::uint8_t peer_ip_last) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer.qp->qp_num;
    a.rq_psn = 0x1234;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 64;
    // An IPv4-mapped GID: ::ffff:10.88.0.x
    a.ah_attr.grh.dgid.raw[10] = 0xFF;
    a.ah_attr.grh.dgid.raw[11] = 0xFF;
    a.ah_attr.grh.dgid.raw[12] = 10;
    a.ah_attr.grh.dgid.raw[13] = 88;
    a.ah_attr.grh.dgid.raw[15] = peer_ip_last;
    return a;
  }
  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

  static int to_rts(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0x1234;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  }

  void connect() {
    ASSERT_EQ(to_init(a_.qp), 0);
    ASSERT_EQ(to_init(b_.qp), 0);
    ibv_qp_attr ra = rtr_attr(b_, 2);
    ASSERT_EQ(ibv_modify_qp(a_.qp, &ra, kRtrMask), 0);
    ibv_qp_attr rb = rtr_attr(a_, 1);
    ASSERT_EQ(ibv_modify_qp(b_.qp, &rb, kRtrMask), 0);
    ASSERT_EQ(to_rts(a_.qp), 0);
    ASSERT_EQ(to_rts(b_.qp), 0);
  }

  static ibv_wc wait(ibv_cq* cq) { return uroce::test::wait_one(cq); }

  // The next asynchronous event of `s`'s context is `type` on its QP,
  // and the QP is then in `state`; `attr` gets what ibv_query_qp said.
  static void expect_qp_event(Side& s, ibv_event_type type, ibv_qp_state state,
                              ibv_qp_attr* attr = nullptr) {
    ibv_async_event e{};
    ASSERT_TRUE(uroce::test::next_async_event(s.ctx, &e)) << "no asynchronous event";
    EXPECT_EQ(e.event_type, type) << ibv_event_type_str(e.event_type);
    EXPECT_EQ(e.element.qp, s.qp);
    ibv_ack_async_event(&e);
    ibv_qp_attr queried{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(s.qp, &queried, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(queried.qp_state, state);
    if (attr) *attr = queried;
  }
  static void expect_qp_error(Side& s, ibv_event_type type) {
    expect_qp_event(s, type, IBV_QPS_ERR);
  }
  // b's QP NAKed a request and says why.
  void expect_responder_error(ibv_event_type type) { expect_qp_error(b_, type); }

  // Before reading memory the peer's responder wrote. Across a network
  // the requester's completion orders it; here both devices share one
  // process and the ordering passes through the kernel's packet rings,
  // where ThreadSanitizer cannot see it.
  static void observe(Side& s) { uroce::test::observe(s.qp); }

  static int post(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote,
                  std::uint32_t rkey, ibv_send_wr** bad = nullptr) {
    return uroce::test::post_one(qp, op, sge, remote, rkey, 7, bad);
  }

  Side a_, b_;
  static inline std::string setup_error_;  // a failed setup fails each test (one_device.h)
};

TEST_F(VerbsApi, WriteReadSendAndAtomicsArriveIntact) {
  connect();
  for (std::size_t i = 0; i < 4096; ++i) a_.buf()[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const auto b_addr = reinterpret_cast<std::uint64_t>(b_.buf());

  // WRITE 4 KiB into b.
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 4096, a_.mr->lkey},
           b_addr, b_.mr->rkey),
      0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, 7u);
  observe(b_);
  EXPECT_EQ(std::memcmp(a_.buf(), b_.buf(), 4096), 0);

  // READ it back into another part of a.
  ASSERT_EQ(post(a_.qp, IBV_WR_RDMA_READ,
                 {reinterpret_cast<std::uint64_t>(a_.buf() + 8192), 4096, a_.mr->lkey}, b_addr,
                 b_.mr->rkey),
            0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 4096u);
  EXPECT_EQ(std::memcmp(a_.buf(), a_.buf() + 8192, 4096), 0);

  // SEND with immediate into a posted receive.
  ibv_sge rs{reinterpret_cast<std::uint64_t>(b_.buf() + 16384), 1000, b_.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 9;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b_.qp, &rwr, &rbad), 0);
  ibv_sge ss{reinterpret_cast<std::uint64_t>(a_.buf()), 1000, a_.mr->lkey};
  ibv_send_wr swr{};
  swr.wr_id = 8;
  swr.opcode = IBV_WR_SEND_WITH_IMM;
  swr.imm_data = htonl(0xC0FFEE);
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &swr, &sbad), 0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  wc = wait(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.byte_len, 1000u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xC0FFEEu);
  EXPECT_EQ(wc.qp_num, b_.qp->qp_num);
  EXPECT_EQ(std::memcmp(a_.buf(), b_.buf() + 16384, 1000), 0);

  // FETCH_AND_ADD then CMP_AND_SWAP on an 8-byte word of b.
  std::uint64_t word = 40;
  std::memcpy(b_.buf() + 32768, &word, 8);
  observe(b_);  // and b's engine after this write
  ibv_sge as{reinterpret_cast<std::uint64_t>(a_.buf() + 40000), 8, a_.mr->lkey};
  ibv_send_wr awr{};
  awr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  awr.sg_list = &as;
  awr.num_sge = 1;
  awr.send_flags = IBV_SEND_SIGNALED;
  awr.wr.atomic.remote_addr = b_addr + 32768;
  awr.wr.atomic.rkey = b_.mr->rkey;
  awr.wr.atomic.compare_add = 2;
  ASSERT_EQ(ibv_post_send(a_.qp, &awr, &sbad), 0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_FETCH_ADD);
  std::uint64_t found;
  std::memcpy(&found, a_.buf() + 40000, 8);
  EXPECT_EQ(found, 40u);
  awr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  awr.wr.atomic.compare_add = 42;
  awr.wr.atomic.swap = 1000;
  ASSERT_EQ(ibv_post_send(a_.qp, &awr, &sbad), 0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_COMP_SWAP);
  observe(b_);
  std::memcpy(&found, b_.buf() + 32768, 8);
  EXPECT_EQ(found, 1000u);
  EXPECT_TRUE(a_.guards_intact());
  EXPECT_TRUE(b_.guards_intact());
}

TEST_F(VerbsApi, ModifyQpRefusesBadMasksAndAttributes) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), EINVAL) << "RESET -> RTR";
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL)
      << "RC INIT needs access flags";
  EXPECT_EQ(ibv_modify_qp(
                a_.qp, &a,
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY),
            EINVAL)
      << "an RC QP has no Q_Key";
  a.port_num = 2;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            EINVAL)
      << "uroce devices have one port";
  ASSERT_EQ(to_init(a_.qp), 0);
  ibv_qp_attr r = rtr_attr(b_, 2);
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
  r.ah_attr.is_global = 0;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask), EINVAL) << "RoCE needs a GRH";
  r = rtr_attr(b_, 2);
  r.ah_attr.grh.sgid_index = 9;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask), EINVAL) << "no such GID";
  r = rtr_attr(b_, 2);
  r.timeout = 40;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &r, kRtrMask | IBV_QP_CAP), EINVAL) << "no resizing";
  ibv_qp_attr got{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &got, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(got.qp_state, IBV_QPS_INIT) << "failed calls change nothing";
  EXPECT_EQ(a_.qp->state, IBV_QPS_INIT);
  EXPECT_EQ(init.cap.max_inline_data, 64u);
}

TEST_F(VerbsApi, PostingOutsideRtsOrBeyondTheQueueFails) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(a_.buf()), 8, a_.mr->lkey};
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(post(a_.qp, IBV_WR_SEND, sge, 0, 0, &bad), EINVAL) << "a QP in RESET";
  EXPECT_NE(bad, nullptr) << "bad_wr names the WR";
  connect();
  ibv_send_wr wr{};
  std::array<ibv_sge, 3> sges{sge, sge, sge};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = sges.data();
  wr.num_sge = 3;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EINVAL) << "more SGEs than max_send_sge";
  std::vector<std::uint8_t> big(65);
  ibv_sge inl{reinterpret_cast<std::uint64_t>(big.data()), 65, 0};
  wr.sg_list = &inl;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EINVAL) << "inline beyond max_inline_data";
  wr.opcode = static_cast<ibv_wr_opcode>(99);
  wr.send_flags = 0;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EINVAL) << "no such opcode";
  // The receive queue takes 16; the 17th finds it full.
  ibv_sge rs{reinterpret_cast<std::uint64_t>(b_.buf()), 64, b_.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  int rc = 0;
  for (int i = 0; i < 17 && rc == 0; ++i) rc = ibv_post_recv(b_.qp, &rwr, &rbad);
  EXPECT_EQ(rc, ENOMEM);
}

TEST_F(VerbsApi, BadKeysCompleteInErrorAndTouchNothing) {
  connect();
  const auto b_addr = reinterpret_cast<std::uint64_t>(b_.buf());
  std::memset(a_.buf(), 0x11, 4096);
  // A remote key that is not b's.
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 4096, a_.mr->lkey},
           b_addr, b_.mr->rkey ^ 0x5A),
      0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(b_.guards_intact());
  EXPECT_EQ(b_.buf()[0], 0xA5) << "nothing written";
  // b's QP, which NAKed it, is in the error state too, and says why in
  // b's asynchronous events, as mlx5 does: b has no receive WQE to
  // report a WRITE's error in.
  expect_responder_error(IBV_EVENT_QP_ACCESS_ERR);
  // The QP is in the error state now: the next WR flushes.
  ASSERT_EQ(post(a_.qp, IBV_WR_RDMA_WRITE,
                 {reinterpret_cast<std::uint64_t>(a_.buf()), 8, a_.mr->lkey}, b_addr, b_.mr->rkey),
            0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

// An atomic on a word that is not 8-byte aligned is an invalid request
// (IBA 9.4.5): NAKed, and the responder's QP reports it.
TEST_F(VerbsApi, AMisalignedAtomicIsAnInvalidRequestAndTheResponderSaysSo) {
  connect();
  ibv_sge as{reinterpret_cast<std::uint64_t>(a_.buf()), 8, a_.mr->lkey};
  ibv_send_wr awr{};
  awr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  awr.sg_list = &as;
  awr.num_sge = 1;
  awr.send_flags = IBV_SEND_SIGNALED;
  awr.wr.atomic.remote_addr = reinterpret_cast<std::uint64_t>(b_.buf()) + 4;
  awr.wr.atomic.rkey = b_.mr->rkey;
  awr.wr.atomic.compare_add = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &awr, &bad), 0);
  const ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(wc.status);
  expect_responder_error(IBV_EVENT_QP_REQ_ERR);
  EXPECT_TRUE(b_.guards_intact());
  EXPECT_EQ(b_.buf()[4], 0xA5) << "nothing added";
}

TEST_F(VerbsApi, WritingPastTheRegionIsRefusedAtTheResponder) {
  connect();
  const auto b_end = reinterpret_cast<std::uint64_t>(b_.buf()) + Side::kSize;
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 2048, a_.mr->lkey},
           b_end - 1024, b_.mr->rkey),
      0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(b_.guards_intact());
  expect_responder_error(IBV_EVENT_QP_ACCESS_ERR);
}

TEST_F(VerbsApi, ABadLocalKeyIsALocalProtectionError) {
  connect();
  ASSERT_EQ(post(a_.qp, IBV_WR_RDMA_WRITE,
                 {reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey + 1},
                 reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
            0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(VerbsApi, RemoteWriteNeedsTheRegionsPermission) {
  ibv_mr* ro = ibv_reg_mr(b_.pd, b_.buf() + 4096, 4096, int{IBV_ACCESS_REMOTE_READ});
  ASSERT_NE(ro, nullptr);
  connect();
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey},
           reinterpret_cast<std::uint64_t>(b_.buf() + 4096), ro->rkey),
      0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  expect_responder_error(IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
}

TEST_F(VerbsApi, ReregMrChangesAccessAndTranslationInPlace) {
  // Bad input: libibverbs' codes, errno EINVAL, the region unchanged.
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(b_.mr, 1 << 7, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, kAllAccess),
            IBV_REREG_MR_ERR_INPUT)
      << "access flags without IBV_REREG_MR_CHANGE_ACCESS";
  EXPECT_EQ(ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 64, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(
      ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE),
      IBV_REREG_MR_ERR_CMD)
      << "remote write without local write";
  EXPECT_EQ(errno, EINVAL);

  // The second half of b's buffer only, the same keys.
  const std::uint32_t rkey = b_.mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b_.buf() + 4096,
                         Side::kSize - 4096, 0),
            0);
  EXPECT_EQ(b_.mr->rkey, rkey);
  EXPECT_EQ(b_.mr->addr, b_.buf() + 4096);
  connect();
  std::memset(a_.buf(), 0x22, 64);
  const auto a_sge = ibv_sge{reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey};
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, a_sge, reinterpret_cast<std::uint64_t>(b_.buf() + 4096), rkey),
      0);
  ibv_wc wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  observe(b_);
  EXPECT_EQ(b_.buf()[4096], 0x22);
  // Read-only now: a WRITE is a remote access error and writes nothing.
  ASSERT_EQ(ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            0);
  std::memset(a_.buf(), 0x33, 64);
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, a_sge, reinterpret_cast<std::uint64_t>(b_.buf() + 8192), rkey),
      0);
  wc = wait(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  observe(b_);
  EXPECT_EQ(b_.buf()[8192], 0xA5) << "nothing written";
  EXPECT_TRUE(b_.guards_intact());
}

TEST_F(VerbsApi, ExtendedCqPollsOneCompletionAtATime) {
  ibv_cq_init_attr_ex bad{};
  bad.cqe = 16;
  bad.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &bad), nullptr) << "no timestamps";
  EXPECT_EQ(errno, EOPNOTSUPP);
  bad.wc_flags = 0;
  bad.cqe = 0;
  EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &bad), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_cq_init_attr_ex attr{};
  attr.cqe = 16;
  attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cqx = ibv_create_cq_ex(a_.ctx, &attr);
  ASSERT_NE(cqx, nullptr);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cqx, &pa), ENOENT) << "empty";
  // a's QP completes into the extended CQ.
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = uroce::test::create_rc_qp(a_.pd, ibv_cq_ex_to_cq(cqx));
  ASSERT_NE(a_.qp, nullptr);
  connect();
  const ibv_sge sge{reinterpret_cast<std::uint64_t>(a_.buf()), 256, a_.mr->lkey};
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(
        post(a_.qp, IBV_WR_RDMA_WRITE, sge, reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
        0);
  const auto end = std::chrono::steady_clock::now() + 30s;
  int rc;
  while ((rc = ibv_start_poll(cqx, &pa)) == ENOENT && std::chrono::steady_clock::now() < end) {
  }
  ASSERT_EQ(rc, 0);
  for (int seen = 1;; ++seen) {
    EXPECT_EQ(cqx->wr_id, 7u);
    EXPECT_EQ(cqx->status, IBV_WC_SUCCESS) << ibv_wc_status_str(cqx->status);
    EXPECT_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RDMA_WRITE);
    EXPECT_EQ(ibv_wc_read_qp_num(cqx), a_.qp->qp_num);
    if (seen == 2) break;
    while ((rc = ibv_next_poll(cqx)) == ENOENT && std::chrono::steady_clock::now() < end) {
    }
    ASSERT_EQ(rc, 0);
  }
  ibv_end_poll(cqx);
  EXPECT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = nullptr;
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
}

TEST_F(VerbsApi, ResizeCqChangesTheDepthAndTheQpGoesOn) {
  EXPECT_EQ(ibv_resize_cq(a_.cq, 0), EINVAL);
  EXPECT_EQ(ibv_resize_cq(a_.cq, 1 << 30), EINVAL);
  ASSERT_EQ(ibv_resize_cq(a_.cq, 4), 0);
  EXPECT_EQ(a_.cq->cqe, 4);
  connect();
  const ibv_sge sge{reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey};
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, sge, reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
      0);
  EXPECT_EQ(wait(a_.cq).status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_resize_cq(a_.cq, 256), 0);
  EXPECT_EQ(a_.cq->cqe, 256);
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, sge, reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
      0);
  EXPECT_EQ(wait(a_.cq).status, IBV_WC_SUCCESS);
}

TEST_F(VerbsApi, AParentDomainIsAPdWithItsParentsProtection) {
  ibv_td_init_attr tda{};
  ibv_td* td = ibv_alloc_td(a_.ctx, &tda);
  ASSERT_NE(td, nullptr);
  ibv_parent_domain_init_attr bad{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(a_.ctx, &bad), nullptr) << "no PD";
  EXPECT_EQ(errno, EINVAL);
  bad.pd = b_.pd;  // another device's
  EXPECT_EQ(ibv_alloc_parent_domain(a_.ctx, &bad), nullptr);
  ibv_parent_domain_init_attr pa{};
  pa.pd = a_.pd;
  pa.td = td;
  ibv_pd* pdom = ibv_alloc_parent_domain(a_.ctx, &pa);
  ASSERT_NE(pdom, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY) << "the parent domain holds it";
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY);
  // A QP of the parent domain writes with a region of the PD.
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = uroce::test::create_rc_qp(pdom, a_.cq);
  ASSERT_NE(a_.qp, nullptr);
  connect();
  std::memset(a_.buf(), 0x5C, 128);
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 128, a_.mr->lkey},
           reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
      0);
  EXPECT_EQ(wait(a_.cq).status, IBV_WC_SUCCESS);
  observe(b_);
  EXPECT_EQ(b_.buf()[127], 0x5C);
  EXPECT_EQ(ibv_dealloc_pd(pdom), EBUSY) << "its QP";
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = nullptr;
  EXPECT_EQ(ibv_dealloc_pd(pdom), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

TEST_F(VerbsApi, AnotherContextOfTheProcessImportsThePdAndTheRegion) {
  ibv_context* ctx2 = ibv_import_device(dup(a_.ctx->cmd_fd));
  ASSERT_NE(ctx2, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(ctx2, a_.pd->handle + 1000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_pd* pd2 = ibv_import_pd(ctx2, a_.pd->handle);
  ASSERT_NE(pd2, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY) << "imported";
  ibv_mr* mr2 = ibv_import_mr(pd2, a_.mr->handle);
  ASSERT_NE(mr2, nullptr);
  EXPECT_EQ(mr2->lkey, a_.mr->lkey);
  EXPECT_EQ(mr2->rkey, a_.mr->rkey);
  // A QP of the imported context and PD writes from the imported region.
  ibv_cq* cq2 = ibv_create_cq(ctx2, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq2, nullptr);
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = uroce::test::create_rc_qp(pd2, cq2);
  ASSERT_NE(a_.qp, nullptr);
  connect();
  std::memset(a_.buf(), 0x6D, 64);
  ASSERT_EQ(
      post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 64, mr2->lkey},
           reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
      0);
  EXPECT_EQ(wait(cq2).status, IBV_WC_SUCCESS);
  observe(b_);
  EXPECT_EQ(b_.buf()[63], 0x6D);
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = nullptr;
  EXPECT_EQ(ibv_destroy_cq(cq2), 0);
  ibv_unimport_mr(mr2);
  ibv_unimport_pd(pd2);
  EXPECT_EQ(ibv_close_device(ctx2), 0);
}

TEST_F(VerbsApi, ObjectsInUseCannotBeDestroyed) {
  EXPECT_EQ(ibv_destroy_cq(a_.cq), EBUSY) << "a QP completes into it";
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY) << "a QP and an MR use it";
  ibv_comp_channel* ch = ibv_create_comp_channel(a_.ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(a_.ctx, 8, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY) << "a CQ reports to it";
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(a_.pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 1;
  init.cap.max_send_sge = 1;
  ibv_qp* qp = ibv_create_qp(a_.pd, &init);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY) << "a QP receives from it";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  // rdma_destroy_qp on an id without a QP comes here with none.
  EXPECT_EQ(ibv_destroy_qp(nullptr), EINVAL);
}

TEST_F(VerbsApi, CreationChecksItsArguments) {
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(a_.ctx, &dev), 0);
  ibv_qp_init_attr init{};
  init.send_cq = a_.cq;
  init.recv_cq = a_.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<std::uint32_t>(dev.max_qp_wr) + 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a_.pd, &init), nullptr);
  EXPECT_EQ(errno, EINVAL) << "deeper than max_qp_wr";
  init.cap.max_send_wr = 1;
  init.cap.max_send_sge = static_cast<std::uint32_t>(dev.max_sge) + 1;
  EXPECT_EQ(ibv_create_qp(a_.pd, &init), nullptr);
  EXPECT_EQ(errno, EINVAL) << "more SGEs than max_sge";
  init.cap.max_send_sge = 1;
  init.qp_type = IBV_QPT_RAW_PACKET;
  EXPECT_EQ(ibv_create_qp(a_.pd, &init), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP) << "no raw packet QPs";
  EXPECT_EQ(ibv_create_cq(a_.ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL) << "a CQ needs an entry";
  EXPECT_EQ(ibv_reg_mr(a_.pd, a_.buf(), 64, int{IBV_ACCESS_REMOTE_WRITE}), nullptr);
  EXPECT_EQ(errno, EINVAL) << "remote write needs local write (IBA 10.6.3.1)";
  ibv_port_attr port{};
  EXPECT_EQ(ibv_query_port(a_.ctx, 2, &port), EINVAL);
  ibv_gid gid{};
  EXPECT_EQ(ibv_query_gid(a_.ctx, 1, 1, &gid), 0);
  EXPECT_EQ(gid.raw[12], 10);
  EXPECT_EQ(gid.raw[15], 1);
}

TEST_F(VerbsApi, CompletionChannelDeliversTheArmedCq) {
  ibv_comp_channel* ch = ibv_create_comp_channel(b_.ctx);
  ASSERT_NE(ch, nullptr);
  int cookie = 0;
  ibv_cq* rcq = ibv_create_cq(b_.ctx, 8, &cookie, ch, 0);
  ASSERT_NE(rcq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = b_.cq;
  init.recv_cq = rcq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 4;
  init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ASSERT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = ibv_create_qp(b_.pd, &init);
  ASSERT_NE(b_.qp, nullptr);
  connect();
  ibv_sge rs{reinterpret_cast<std::uint64_t>(b_.buf()), 64, b_.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b_.qp, &rwr, &rbad), 0);
  ASSERT_EQ(ibv_req_notify_cq(rcq, 0), 0);
  ASSERT_EQ(
      post(a_.qp, IBV_WR_SEND, {reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey}, 0, 0),
      0);
  pollfd pfd{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1) << "the channel's descriptor becomes readable";
  ibv_cq* got = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &got, &ctx), 0);
  EXPECT_EQ(got, rcq);
  EXPECT_EQ(ctx, &cookie);
  ibv_ack_cq_events(got, 1);
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(rcq, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = nullptr;
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsApi, CqOverflowIsAnAsyncEventAndEndsTheQp) {
  // a's QP completes into a CQ of two entries, and nobody polls it.
  ibv_cq* small = ibv_create_cq(a_.ctx, 2, nullptr, nullptr, 0);
  ASSERT_NE(small, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = small;
  init.recv_cq = small;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 8;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ASSERT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = ibv_create_qp(a_.pd, &init);
  ASSERT_NE(a_.qp, nullptr);
  connect();
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(
        post(a_.qp, IBV_WR_RDMA_WRITE, {reinterpret_cast<std::uint64_t>(a_.buf()), 8, a_.mr->lkey},
             reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey),
        0);
  }
  ibv_async_event e{};
  ASSERT_TRUE(uroce::test::next_async_event(a_.ctx, &e)) << "no asynchronous event";
  EXPECT_EQ(e.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(e.element.cq, small);
  ibv_ack_async_event(&e);
  expect_qp_error(a_, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ibv_destroy_qp(a_.qp), 0);
  a_.qp = nullptr;
  EXPECT_EQ(ibv_destroy_cq(small), 0);
}

TEST_F(VerbsApi, LinkStateIsThePortStateAndAnAsyncEvent) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(a_.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  // Taking the peer's end down takes away a's carrier.
  ASSERT_EQ(sh("ip link set v1 down"), 0);
  ibv_async_event e{};
  ASSERT_TRUE(uroce::test::next_async_event(a_.ctx, &e)) << "no asynchronous event";
  EXPECT_EQ(e.event_type, IBV_EVENT_PORT_ERR);
  EXPECT_EQ(e.element.port_num, 1);
  ibv_ack_async_event(&e);
  ASSERT_EQ(ibv_query_port(a_.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_DOWN);
  ASSERT_EQ(sh("ip link set v1 up"), 0);
  ASSERT_TRUE(uroce::test::next_async_event(a_.ctx, &e)) << "no asynchronous event";
  EXPECT_EQ(e.event_type, IBV_EVENT_PORT_ACTIVE);
  ibv_ack_async_event(&e);
  ASSERT_EQ(ibv_query_port(a_.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
}

// Middleware checks a device's node before it takes the device (UCX:
// stat says S_ISCHR and access(R_OK|W_OK) succeeds); uroce has none in
// /dev, so the binding answers for the nodes of its devices alone.
TEST_F(VerbsApi, TheDeviceNodeIsACharacterDeviceToStatAndAccess) {
  const std::string node = std::string("/dev/infiniband/") + a_.ctx->device->dev_name;
  EXPECT_EQ(node, "/dev/infiniband/uverbs-uroce0");
  struct stat st {};
  ASSERT_EQ(stat(node.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(major(st.st_rdev), 231u) << "the kernel's uverbs major";
  st = {};
  ASSERT_EQ(lstat(node.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  st = {};
  ASSERT_EQ(fstatat(AT_FDCWD, node.c_str(), &st, 0), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  struct statx stx {};
  ASSERT_EQ(statx(AT_FDCWD, node.c_str(), 0, STATX_TYPE, &stx), 0);
  EXPECT_TRUE(S_ISCHR(stx.stx_mode));
  EXPECT_EQ(access(node.c_str(), R_OK | W_OK), 0);
  EXPECT_EQ(faccessat(AT_FDCWD, node.c_str(), R_OK | W_OK, 0), 0);
  EXPECT_EQ(access(node.c_str(), X_OK), -1);
  EXPECT_EQ(errno, EACCES);
  // Another name in the directory, and other paths, are the kernel's.
  EXPECT_EQ(stat("/dev/infiniband/uverbs-uroce7", &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(access("/dev/infiniband/uverbs-uroce0x", F_OK), -1);
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_EQ(major(st.st_rdev), 1u);
}

TEST_F(VerbsApi, SqdDrainsWhatWasBegunAndSaysSo) {
  connect();
  // Four 64 KiB WRITEs (64 packets each at the path MTU), then SQD with
  // the drain reported: what was begun finishes, the rest waits for RTS.
  const ibv_sge sge{reinterpret_cast<std::uint64_t>(a_.buf()), Side::kSize, a_.mr->lkey};
  std::memset(a_.buf(), 0x3C, Side::kSize);
  for (std::uint64_t id = 1; id <= 4; ++id)
    ASSERT_EQ(uroce::test::post_one(a_.qp, IBV_WR_RDMA_WRITE, sge,
                                    reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey, id),
              0);
  ibv_qp_attr sqd{};
  sqd.qp_state = IBV_QPS_SQD;
  sqd.en_sqd_async_notify = 1;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &sqd, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  // Posting in SQD is allowed; the WR is not begun there.
  ASSERT_EQ(uroce::test::post_one(a_.qp, IBV_WR_RDMA_WRITE, sge,
                                  reinterpret_cast<std::uint64_t>(b_.buf()), b_.mr->rkey, 5),
            0);
  ibv_qp_attr attr{};
  expect_qp_event(a_, IBV_EVENT_SQ_DRAINED, IBV_QPS_SQD, &attr);
  EXPECT_EQ(attr.sq_draining, 0);
  // Drained: every WR begun has completed, in order, and none after it.
  std::vector<ibv_wc> done(8);
  const int n = ibv_poll_cq(a_.cq, static_cast<int>(done.size()), done.data());
  ASSERT_GE(n, 0);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(done[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(done[i].wr_id, static_cast<std::uint64_t>(i + 1));
  }
  EXPECT_LE(n, 4) << "the WR posted in SQD completed in SQD";
  // Back to RTS: the rest goes, and every byte arrives.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &rts, IBV_QP_STATE), 0);
  for (int id = n + 1; id <= 5; ++id) {
    const ibv_wc wc = wait(a_.cq);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, static_cast<std::uint64_t>(id));
  }
  observe(b_);
  EXPECT_EQ(std::memcmp(a_.buf(), b_.buf(), Side::kSize), 0);
}

TEST_F(VerbsApi, SrqLimitIsAnAsyncEvent) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  sa.attr.srq_limit = 2;
  ibv_srq* srq = ibv_create_srq(b_.pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 2u);
  ibv_qp_init_attr init{};
  init.send_cq = b_.cq;
  init.recv_cq = b_.cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 4;
  init.cap.max_send_sge = 1;
  ASSERT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = ibv_create_qp(b_.pd, &init);
  ASSERT_NE(b_.qp, nullptr);
  connect();
  ibv_sge rs{reinterpret_cast<std::uint64_t>(b_.buf()), 64, b_.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &bad), 0);
  // Three SENDs take three of the four receives: one left, below 2.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(post(a_.qp, IBV_WR_SEND, {reinterpret_cast<std::uint64_t>(a_.buf()), 64, a_.mr->lkey},
                   0, 0),
              0);
    EXPECT_EQ(wait(a_.cq).status, IBV_WC_SUCCESS);
  }
  ibv_async_event e{};
  ASSERT_TRUE(uroce::test::next_async_event(b_.ctx, &e)) << "no asynchronous event";
  EXPECT_EQ(e.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(e.element.srq, srq);
  ibv_ack_async_event(&e);
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u) << "the limit disarms once reported";
  EXPECT_EQ(ibv_destroy_qp(b_.qp), 0);
  b_.qp = nullptr;
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

}  // namespace
