/* SPDX-License-Identifier: BSD-3-Clause */
#include "ibverbs/one_device.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace uroce::test {

namespace {
// These tests link the binding alone, not the test support library (the
// engine would be in the program twice).
int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
}  // namespace

std::string private_veth_devices(const std::string& ip0, const std::string& ip1) {
  if (unshare(CLONE_NEWNET) != 0)
    return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno) +
           " (these tests need root, or CAP_SYS_ADMIN and CAP_NET_ADMIN)";
  if (sh("ip link add v0 type veth peer name v1") != 0) return "ip link add v0 type veth failed";
  sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
  if (sh("ip link set v0 up && ip link set v1 up") != 0) return "ip link set v0/v1 up failed";
  setenv("UROCE_DEVICE0_NAME", "uroce0", 1);
  setenv("UROCE_DEVICE0_PORT", "net_af_packet0,iface=v0", 1);
  setenv("UROCE_DEVICE0_IP", ip0.c_str(), 1);
  if (!ip1.empty()) {
    setenv("UROCE_DEVICE1_NAME", "uroce1", 1);
    setenv("UROCE_DEVICE1_PORT", "net_af_packet1,iface=v1", 1);
    setenv("UROCE_DEVICE1_IP", ip1.c_str(), 1);
  }
  return "";
}

ibv_context* open_device(const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return nullptr;
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && !ctx; ++i) {
    if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  return ctx;
}

bool next_async_event(ibv_context* ctx, ibv_async_event* e, int ms) {
  pollfd pfd{ctx->async_fd, POLLIN, 0};
  if (poll(&pfd, 1, ms) != 1) return false;
  return ibv_get_async_event(ctx, e) == 0;
}

void connect_to_self(ibv_qp* qp, std::uint32_t peer_qpn, int access) {
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(qp->context, 1, 1, &gid), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = static_cast<unsigned>(access);
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 0x100;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.dgid = gid;
  ASSERT_EQ(ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x100;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  ASSERT_EQ(ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &init);
}

int post_one(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote_addr,
             std::uint32_t rkey, std::uint64_t wr_id, ibv_send_wr** bad) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* ignored = nullptr;
  return ibv_post_send(qp, &wr, bad ? bad : &ignored);
}

ibv_wc wait_one(ibv_cq* cq) {
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ibv_poll_cq(cq, 1, &wc) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ADD_FAILURE() << "no completion";
      wc.status = IBV_WC_GENERAL_ERR;
      return wc;
    }
  }
  return wc;
}

void observe(ibv_qp* responder) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ibv_query_qp(responder, &attr, IBV_QP_STATE, &init);
}

void OneDeviceTest::SetUp() {
  ASSERT_EQ(setup_error_, "") << "the suite's setup failed";
  ctx_ = open_device("uroce0");
  ASSERT_NE(ctx_, nullptr);
  pd_ = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd_, nullptr);
  cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq_, nullptr);
}

void OneDeviceTest::destroy_qps() {
  for (ibv_qp* qp : qps_) EXPECT_EQ(ibv_destroy_qp(qp), 0);
  qps_.clear();
}

void OneDeviceTest::TearDown() {
  destroy_qps();
  if (cq_) {
    EXPECT_EQ(ibv_destroy_cq(cq_), 0);
  }
  if (pd_) {
    EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
  }
  if (ctx_) {
    EXPECT_EQ(ibv_close_device(ctx_), 0);
  }
}

void OneDeviceTest::connect_pair(int access) {
  destroy_qps();
  for (int i = 0; i < 2; ++i) {
    ibv_qp* qp = create_rc_qp(pd_, cq_);
    ASSERT_NE(qp, nullptr);
    qps_.push_back(qp);
  }
  connect_to_self(qps_[0], qps_[1]->qp_num, access);
  connect_to_self(qps_[1], qps_[0]->qp_num, access);
}

}  // namespace uroce::test
