/* SPDX-License-Identifier: BSD-3-Clause */
// Multicast joins of UD ids on RoCE (cma.c rdma_join_multicast,
// cma_iboe_join_multicast, cma_make_mc_event, rdma_leave_multicast).
// RoCE has no SA to join through: a join is local, its event immediate;
// the consumer attaches its QP to the MGID the event names (librdmacm
// does, with ibv_attach_mcast) and sends to it with the event's address
// vector.

#include <algorithm>
#include <cerrno>

#include "cm/cma.h"
#include "wire/multicast.h"

namespace uroce::cm {

namespace {

// IPV6_DEFAULT_HOPLIMIT: cma_iboe_join_multicast's hop limit for
// RoCEv2 groups.
constexpr std::uint8_t kDefaultHopLimit = 64;

bool is_zero(const wire::IpAddr& a) {
  return a == wire::IpAddr{} || a == wire::IpAddr::from_v4(0);
}

}  // namespace

int Cma::join_multicast(std::uint32_t n, const wire::IpAddr& group, McJoinState state,
                        std::uint64_t mc) {
  Id* id = find(n);
  if (!id) return EINVAL;
  // rdma_join_multicast: a UD id with a device, bound or resolved.
  if (id->qp_type != QpType::kUd ||
      (id->state != CmaState::kAddrBound && id->state != CmaState::kAddrResolved) ||
      !is_device_ip(id->src.ip))
    return EINVAL;
  if (is_zero(group)) return EINVAL;  // cma_zero_addr
  // cma_iboe_join_multicast: RoCEv2 groups are IPv4 ones (-ENOTSUPP).
  if (!group.is_v4()) return EOPNOTSUPP;
  // cma_set_default_qkey: RDMA_UDP_QKEY for the UDP port space.
  if (int rc = set_qkey(*id, 0); rc != 0) return rc;
  id->mc_list.push_back({group, state, mc});

  // cma_make_mc_event with ib_init_ah_from_mcmember: the group's MGID
  // (cma_iboe_set_mgid: the IPv4-mapped address for RoCEv2), the id's
  // source GID, hop limit 64, no LID.
  CmaEvent ev;
  ev.event = CmaEventType::kMulticastJoin;
  ev.mc = mc;
  AhAttr& ah = ev.ud.ah_attr;
  ah.grh.dgid = group;
  ah.grh.sgid_index = sgid_index(id->src.ip);
  ah.grh.hop_limit = kDefaultHopLimit;
  ah.is_global = 1;
  ah.port_num = device_.port_num;
  ah.dmac = wire::multicast_mac(group);
  ev.ud.qp_num = wire::kMulticastQpn;
  ev.ud.qkey = id->qkey;
  queue(*id, ev);
  return 0;
}

int Cma::leave_multicast(std::uint32_t n, std::uint64_t mc) {
  Id* id = find(n);
  if (!id) return EINVAL;
  const auto it = std::find_if(id->mc_list.begin(), id->mc_list.end(),
                               [&](const Id::McJoin& j) { return j.mc == mc; });
  if (it == id->mc_list.end()) return EINVAL;
  id->mc_list.erase(it);
  // ucma_cleanup_mc_events: the join's events nobody took go with it.
  std::erase_if(channels_[id->channel], [&](const CmaEvent& e) {
    return e.id == n && e.mc == mc &&
           (e.event == CmaEventType::kMulticastJoin || e.event == CmaEventType::kMulticastError);
  });
  return 0;
}

}  // namespace uroce::cm
