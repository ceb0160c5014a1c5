/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/dm.h"

#include <cerrno>

#include "verbs/device.h"

namespace uroce::verbs {

int Dm::alloc(Context& ctx, std::uint64_t length, std::uint32_t log_align,
              std::unique_ptr<Dm>* out) {
  int err = 0;
  std::unique_ptr<DeviceMemory> mem = ctx.device().dm().alloc(length, log_align, &err);
  if (!mem) return err;
  auto dm = std::unique_ptr<Dm>(new Dm(ctx, std::move(mem), ctx.device().alloc_dm_handle(), false));
  ctx.objects().acquire();
  ctx.device().remember(*dm);
  *out = std::move(dm);
  return 0;
}

int Dm::import(Context& ctx, Dm& orig, std::unique_ptr<Dm>* out) {
  if (&orig.ctx_.device() != &ctx.device()) return EINVAL;
  *out = std::unique_ptr<Dm>(new Dm(ctx, orig.mem_, orig.handle_, true));
  ctx.objects().acquire();
  return 0;
}

int Dm::destroy(std::unique_ptr<Dm>& dm) {
  if (dm->imported_) {
    if (dm->users_.busy()) return EBUSY;
  } else if (int rc = dm->ctx_.device().retire(*dm); rc != 0) {
    return rc;
  }
  dm.reset();
  return 0;
}

void Dm::unimport(std::unique_ptr<Dm>& dm) {
  Dm* d = dm.release();
  if (!d->users_.abandon([d] { delete d; })) delete d;
}

Dm::~Dm() {
  if (!imported_) ctx_.device().forget(*this);
  ctx_.objects().release();
}

int Dm::copy_to(std::uint64_t offset, const void* host, std::size_t length) {
  if (host == nullptr && length != 0) return EINVAL;
  return mem_->copy_to(offset, host, length);
}

int Dm::copy_from(void* host, std::uint64_t offset, std::size_t length) const {
  if (host == nullptr && length != 0) return EINVAL;
  return mem_->copy_from(host, offset, length);
}

}  // namespace uroce::verbs
