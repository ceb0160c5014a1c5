/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the binding's tests share: uroce devices on a veth pair in a
// network namespace of the test process's own, RC QPs of one device
// connected to each other (the engine loops frames to itself back), and
// posting and waiting. Needs root.

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::test {

/// Moves the process into a network namespace of its own with a veth pair
/// v0-v1 (it goes away with the process, however the process ends; the
/// devices' threads, made later, live in it too) and configures uroce0 on
/// v0 with address `ip0` and, if given, uroce1 on v1 with `ip1` (CIDRs).
void private_veth_devices(const std::string& ip0, const std::string& ip1 = "");

/// Opens the uroce device `name` ("uroce0"); nullptr if there is none.
ibv_context* open_device(const std::string& name);

/// Brings the RC QP `qp` from RESET to RTS, facing QP `peer_qpn` of its
/// own device at the device's GID 1 (its IPv4 address): path MTU 1024,
/// QP access `access`, 4 READs/atomics each way.
void connect_to_self(ibv_qp* qp, std::uint32_t peer_qpn, int access);

/// Two RC QPs of `pd`'s device completing into `cq` (16 WRs, one SGE
/// each way), connected to each other with QP access `access`; appended
/// to `qps`.
void loopback_pair(ibv_pd* pd, ibv_cq* cq, int access, std::vector<ibv_qp*>* qps);

/// Posts one signaled WR of one SGE (RDMA fields set, for those that take
/// them); ibv_post_send's result.
int post_one(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, std::uint64_t remote_addr,
             std::uint32_t rkey, std::uint64_t wr_id = 1);

/// Waits up to 30 s for one completion; a failure and IBV_WC_GENERAL_ERR
/// after that.
ibv_wc wait_one(ibv_cq* cq);

/// Before reading memory a responder wrote: querying its QP takes its
/// engine, which orders the caller after the iteration that wrote (the
/// completion already does; this shows it to ThreadSanitizer too).
void observe(ibv_qp* responder);

}  // namespace uroce::test
