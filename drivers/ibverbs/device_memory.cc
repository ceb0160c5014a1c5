/* SPDX-License-Identifier: BSD-3-Clause */
// Device memory (verbs/dm.h): ibv_alloc_dm and ibv_free_dm reach these
// through the context (they are verbs.h inline functions), and
// ibv_memcpy_to_dm / ibv_memcpy_from_dm through the pointers in the ibv_dm
// itself.

#include <cerrno>
#include <cstdint>

#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

int memcpy_to_dm(ibv_dm* dm, uint64_t dm_offset, const void* host_addr, size_t length) {
  if (dm == nullptr) return EINVAL;
  return to_u<UDm>(dm)->dm->copy_to(dm_offset, host_addr, length);
}

int memcpy_from_dm(void* host_addr, ibv_dm* dm, uint64_t dm_offset, size_t length) {
  if (dm == nullptr) return EINVAL;
  return to_u<UDm>(dm)->dm->copy_from(host_addr, dm_offset, length);
}

}  // namespace

ibv_dm* publish_dm(ibv_context* ctx, std::unique_ptr<verbs::Dm> dm) {
  auto* d = new UDm();
  d->ibv.context = ctx;
  d->ibv.memcpy_to_dm = memcpy_to_dm;
  d->ibv.memcpy_from_dm = memcpy_from_dm;
  // The handle names the allocation, as the kernel's does: another
  // context of the device may import it.
  d->ibv.handle = dm->handle();
  d->ibv.comp_mask = IBV_DM_MASK_HANDLE;
  d->dm = std::move(dm);
  return &d->ibv;
}

ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  // No comp_mask bits are defined for the request.
  if (!ours(ctx) || attr == nullptr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  std::unique_ptr<verbs::Dm> dm;
  if (int rc = verbs::Dm::alloc(ctx_of(ctx), attr->length, attr->log_align_req, &dm); rc != 0) {
    errno = rc;
    return nullptr;
  }
  return publish_dm(ctx, std::move(dm));
}

int free_dm(ibv_dm* dm) {
  if (dm == nullptr || !ours(dm->context)) return EINVAL;
  UDm* d = to_u<UDm>(dm);
  if (int rc = verbs::Dm::destroy(d->dm); rc != 0) return rc;  // regions still cover it
  delete d;
  return 0;
}

}  // namespace uroce::ibverbs
