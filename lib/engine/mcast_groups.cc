/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/mcast_groups.h"

#include <algorithm>

namespace uroce::engine {

void McastGroups::attach(const wire::IpAddr& group, transport::Qp& qp) {
  auto g = std::find_if(groups_.begin(), groups_.end(),
                        [&](const Group& x) { return x.gid == group; });
  if (g == groups_.end()) g = groups_.insert(groups_.end(), Group{group, {}});
  if (std::find(g->qps.begin(), g->qps.end(), &qp) == g->qps.end()) g->qps.push_back(&qp);
}

bool McastGroups::detach(const wire::IpAddr& group, std::uint32_t qpn) {
  const auto g = std::find_if(groups_.begin(), groups_.end(),
                              [&](const Group& x) { return x.gid == group; });
  if (g == groups_.end()) return false;
  const auto n = std::erase_if(g->qps, [qpn](const transport::Qp* q) { return q->qpn() == qpn; });
  if (g->qps.empty()) groups_.erase(g);
  return n != 0;
}

void McastGroups::detach_all(std::uint32_t qpn) {
  for (Group& g : groups_)
    std::erase_if(g.qps, [qpn](const transport::Qp* q) { return q->qpn() == qpn; });
  std::erase_if(groups_, [](const Group& g) { return g.qps.empty(); });
}

std::span<transport::Qp* const> McastGroups::members(const wire::IpAddr& group) const {
  for (const Group& g : groups_)
    if (g.gid == group) return g.qps;
  return {};
}

}  // namespace uroce::engine
