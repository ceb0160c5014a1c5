/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the binding's tests share: uroce devices on a veth pair in a
// network namespace of the test process's own, RC QPs of one device
// connected to each other (the engine loops frames to itself back), and
// posting and waiting. Needs root.

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::test {

/// Moves the process into a network namespace of its own with a veth pair
/// v0-v1 (it goes away with the process, however the process ends; the
/// devices' threads, made later, live in it too) and configures uroce0 on
/// v0 with address `ip0` and, if given, uroce1 on v1 with `ip1` (CIDRs).
/// Returns what went wrong, or an empty string.
///
/// A suite calls it from SetUpTestSuite and every test's SetUp fails on
/// its error: gtest skips, rather than fails, the tests of a suite whose
/// SetUpTestSuite fails, and ctest would count the skips as passed.
[[nodiscard]] std::string private_veth_devices(const std::string& ip0, const std::string& ip1 = "");

/// Opens the uroce device `name` ("uroce0"); nullptr if there is none.
ibv_context* open_device(const std::string& name);

/// Brings the RC QP `qp` from RESET to RTS, facing QP `peer_qpn` of its
/// own device at the device's GID 1 (its IPv4 address): path MTU 1024,
/// QP access `access`, 4 READs/atomics each way.
void connect_to_self(ibv_qp* qp, std::uint32_t peer_qpn, int access);

/// Posts one signaled WR of one SGE (RDMA fields set, for those that take
/// them); ibv_post_send's result, the refused WR in `*bad` if given.
int post_one(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote_addr,
             std::uint32_t rkey, std::uint64_t wr_id = 1, ibv_send_wr** bad = nullptr);

/// Waits up to 30 s for one completion; a failure and IBV_WC_GENERAL_ERR
/// after that.
ibv_wc wait_one(ibv_cq* cq);

/// The next asynchronous event of `ctx`, waiting up to `ms` for one;
/// false if none came.
bool next_async_event(ibv_context* ctx, ibv_async_event* e, int ms = 10000);

/// Before reading memory a responder wrote: querying its QP takes its
/// engine, which orders the caller after the iteration that wrote (the
/// completion already does; this shows it to ThreadSanitizer too).
void observe(ibv_qp* responder);

/// An RC QP of `pd` completing into `cq`, 16 WRs and one SGE each way.
ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* cq);

/// A test on uroce0 alone (10.89.0.1 on a private veth): its context, a
/// PD, a CQ, and a pair of RC QPs connected to each other on demand.
/// A test that adds objects destroys them in its TearDown, after
/// destroy_qps() and before OneDeviceTest::TearDown().
class OneDeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setup_error_ = private_veth_devices("10.89.0.1/24"); }
  /// Fails (fatally) if the suite's setup did; a derived fixture's SetUp
  /// calls it under ASSERT_NO_FATAL_FAILURE.
  void SetUp() override;
  void TearDown() override;

  /// A fresh pair of QPs connected with QP access `access` (a QP that saw
  /// an error stays in ERR); qps_[0] posts, qps_[1] responds.
  void connect_pair(int access);
  void destroy_qps();
  int post(ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote, std::uint32_t rkey,
           std::uint64_t wr_id = 1) {
    return post_one(qps_[0], op, sge, remote, rkey, wr_id);
  }
  ibv_wc wait() { return wait_one(cq_); }
  void observe() { test::observe(qps_[1]); }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;

 private:
  static inline std::string setup_error_;
};

}  // namespace uroce::test
