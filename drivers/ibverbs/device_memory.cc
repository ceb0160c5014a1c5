/* SPDX-License-Identifier: BSD-3-Clause */
// Device memory: ibv_alloc_dm and ibv_free_dm reach these through the
// context (they are verbs.h inline functions), and ibv_memcpy_to_dm /
// ibv_memcpy_from_dm through the pointers in the ibv_dm itself. The memory
// is the device's pool of host memory (lib/verbs/device_memory.h).

#include <cerrno>
#include <cstdint>

#include "drivers/ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

int memcpy_to_dm(ibv_dm* dm, uint64_t dm_offset, const void* host_addr, size_t length) {
  if (dm == nullptr || (host_addr == nullptr && length != 0)) return EINVAL;
  return to_u<UDm>(dm)->mem->copy_to(dm_offset, host_addr, length);
}

int memcpy_from_dm(void* host_addr, ibv_dm* dm, uint64_t dm_offset, size_t length) {
  if (dm == nullptr || (host_addr == nullptr && length != 0)) return EINVAL;
  return to_u<UDm>(dm)->mem->copy_from(host_addr, dm_offset, length);
}

}  // namespace

ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  UContext* c = ours(ctx);
  // No comp_mask bits are defined for the request.
  if (c == nullptr || attr == nullptr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  int err = 0;
  std::unique_ptr<verbs::DeviceMemory> mem =
      c->dev->dm().alloc(attr->length, attr->log_align_req, &err);
  if (!mem) {
    errno = err;
    return nullptr;
  }
  static std::atomic<std::uint32_t> next_handle{1};
  auto* d = new UDm();
  d->mem = std::move(mem);
  d->ibv.context = ctx;
  d->ibv.memcpy_to_dm = memcpy_to_dm;
  d->ibv.memcpy_from_dm = memcpy_from_dm;
  // The handle names the allocation, as the kernel's does: another
  // context of the device may import it (import.cc).
  d->ibv.handle = next_handle.fetch_add(1);
  d->ibv.comp_mask = IBV_DM_MASK_HANDLE;
  c->objects.fetch_add(1);
  remember(c->udev, d);
  return &d->ibv;
}

int free_dm(ibv_dm* dm) {
  UContext* c = dm ? ours(dm->context) : nullptr;
  if (c == nullptr) return EINVAL;
  UDm* d = to_u<UDm>(dm);
  if (d->users.load() != 0) return EBUSY;  // memory regions still cover it
  c->objects.fetch_sub(1);
  forget(c->udev, d);
  delete d;
  return 0;
}

}  // namespace uroce::ibverbs
