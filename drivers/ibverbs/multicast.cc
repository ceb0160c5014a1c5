/* SPDX-License-Identifier: BSD-3-Clause */
// Multicast attachments of UD QPs (ibv_attach_mcast, ibv_detach_mcast);
// the rules are lib/verbs' (QueuePair::attach_mcast).

#include <array>
#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

std::array<std::uint8_t, 16> gid_bytes(const ibv_gid* gid) {
  std::array<std::uint8_t, 16> b{};
  std::memcpy(b.data(), gid->raw, b.size());
  return b;
}

}  // namespace

int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!gid) return EINVAL;
  return qp_of(qp).attach_mcast(gid_bytes(gid), lid);
}

int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!gid) return EINVAL;
  return qp_of(qp).detach_mcast(gid_bytes(gid), lid);
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp && ours(qp->context)) return attach_mcast(qp, gid, lid);
  UROCE_FORWARD(ibv_attach_mcast, "IBVERBS_1.1", ENOSYS, qp, gid, lid);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp && ours(qp->context)) return detach_mcast(qp, gid, lid);
  UROCE_FORWARD(ibv_detach_mcast, "IBVERBS_1.1", ENOSYS, qp, gid, lid);
}

}  // extern "C"
