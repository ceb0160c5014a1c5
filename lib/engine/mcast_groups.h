/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The multicast groups the device's QPs are attached to, and who is
// attached to each (rxe's mcg table, rxe_mcast.c): a RoCEv2 datagram to
// destination QP 0xFFFFFF, the multicast QPN, goes to every QP attached
// to the group its IP destination names, each its own copy (rxe_recv.c
// rxe_rcv_mcast_pkt). Part of
// the engine's queue-pair side; the engine changes and reads it holding
// itself. The limits on groups and attachments are the verbs' to check.

#include <cstdint>
#include <span>
#include <vector>

#include "transport/qp.h"
#include "wire/ip.h"

namespace uroce::engine {

class McastGroups {
 public:
  /// Attaches `qp` to `group`, making the group on first use. Attaching
  /// twice is attaching once.
  void attach(const wire::IpAddr& group, transport::Qp& qp);
  /// Detaches QP `qpn` from `group`; the group goes with its last QP.
  /// False when it was not attached.
  bool detach(const wire::IpAddr& group, std::uint32_t qpn);
  /// Detaches QP `qpn` from every group (the QP is going).
  void detach_all(std::uint32_t qpn);
  /// The QPs attached to `group`, empty when nobody joined it.
  std::span<transport::Qp* const> members(const wire::IpAddr& group) const;
  bool joined(const wire::IpAddr& group) const { return !members(group).empty(); }
  std::size_t size() const { return groups_.size(); }

 private:
  struct Group {
    wire::IpAddr gid;
    std::vector<transport::Qp*> qps;
  };
  // Few groups, read per multicast frame: a vector searched in order.
  std::vector<Group> groups_;
};

}  // namespace uroce::engine
