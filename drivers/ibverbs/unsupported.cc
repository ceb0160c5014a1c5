/* SPDX-License-Identifier: BSD-3-Clause */
// Entry points uroce does not serve. For a uroce object each fails with
// EOPNOTSUPP; it is never forwarded, since the real libibverbs would
// dereference provider state our objects do not have. Other devices'
// objects go to the real library.

#include <cerrno>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

using namespace uroce::ibverbs;

extern "C" {

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access) {
  if (pd && ours(pd->context)) {
    errno = EOPNOTSUPP;  // no device memory to import into
    return nullptr;
  }
  UROCE_FORWARD(ibv_reg_dmabuf_mr, "IBVERBS_1.12", nullptr, pd, offset, length, iova, fd, access);
}

int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr,
                                uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t* vid) {
  if (ours(context)) return EOPNOTSUPP;
  UROCE_FORWARD(ibv_resolve_eth_l2_from_gid, "IBVERBS_1.1", ENOSYS, context, attr, eth_mac, vid);
}

int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  if (qp && ours(qp->context)) return EOPNOTSUPP;
  UROCE_FORWARD(ibv_set_ece, "IBVERBS_1.10", ENOSYS, qp, ece);
}

int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  if (qp && ours(qp->context)) return EOPNOTSUPP;
  UROCE_FORWARD(ibv_query_ece, "IBVERBS_1.10", ENOSYS, qp, ece);
}

int ibv_query_qp_data_in_order(ibv_qp* qp, enum ibv_wr_opcode op, uint32_t flags) {
  // uroce places data in order (one engine thread, PSN order) for every
  // opcode.
  if (qp && ours(qp->context)) return 1;
  UROCE_FORWARD(ibv_query_qp_data_in_order, "IBVERBS_1.14", 0, qp, op, flags);
}

}  // extern "C"
