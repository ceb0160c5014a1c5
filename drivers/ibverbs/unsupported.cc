/* SPDX-License-Identifier: BSD-3-Clause */
// Entry points uroce does not serve. For a uroce object each fails with
// EOPNOTSUPP; it is never forwarded, since the real libibverbs would
// dereference provider state our objects do not have. Other devices'
// objects go to the real library.

#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "drivers/ibverbs/forward.h"
#include "drivers/ibverbs/provider.h"

using namespace uroce::ibverbs;

extern "C" {

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp && ours(qp->context)) return EOPNOTSUPP;  // no multicast groups
  UROCE_FORWARD(ibv_attach_mcast, "IBVERBS_1.1", ENOSYS, qp, gid, lid);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp && ours(qp->context)) return EOPNOTSUPP;
  UROCE_FORWARD(ibv_detach_mcast, "IBVERBS_1.1", ENOSYS, qp, gid, lid);
}

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

ibv_context* ibv_import_device(int cmd_fd) {
  // A uroce context lives in its process: there is no kernel object that
  // another context could share. Its command descriptor is a memfd named
  // kContextFdName, which /proc shows as "/memfd:NAME (deleted)".
  char link[128];
  const std::string fd_path = "/proc/self/fd/" + std::to_string(cmd_fd);
  const ssize_t n = readlink(fd_path.c_str(), link, sizeof(link));
  if (n > 0 && std::string_view(link, static_cast<std::size_t>(n))
                   .starts_with(std::string("/memfd:") + kContextFdName)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UROCE_FORWARD(ibv_import_device, "IBVERBS_1.10", nullptr, cmd_fd);
}

ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  if (ours(context)) {
    errno = EOPNOTSUPP;  // objects are not shared between processes
    return nullptr;
  }
  UROCE_FORWARD(ibv_import_pd, "IBVERBS_1.10", nullptr, context, pd_handle);
}

void ibv_unimport_pd(ibv_pd* pd) {
  if (pd && ours(pd->context)) return;
  static const auto real = real_fn<decltype(&ibv_unimport_pd)>("ibv_unimport_pd", "IBVERBS_1.10");
  if (real) real(pd);
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (pd && ours(pd->context)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UROCE_FORWARD(ibv_import_mr, "IBVERBS_1.10", nullptr, pd, mr_handle);
}

void ibv_unimport_mr(ibv_mr* mr) {
  if (mr && ours(mr->context)) return;
  static const auto real = real_fn<decltype(&ibv_unimport_mr)>("ibv_unimport_mr", "IBVERBS_1.10");
  if (real) real(mr);
}

ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  if (ours(context)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UROCE_FORWARD(ibv_import_dm, "IBVERBS_1.13", nullptr, context, dm_handle);
}

void ibv_unimport_dm(ibv_dm* dm) {
  if (dm && ours(dm->context)) return;
  static const auto real = real_fn<decltype(&ibv_unimport_dm)>("ibv_unimport_dm", "IBVERBS_1.13");
  if (real) real(dm);
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
