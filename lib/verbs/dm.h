/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Device memory as a verbs object (ibv_alloc_dm): an allocation of the
// device's pool (device_memory.h), owned by a context, which regions may
// cover (ibv_reg_dm_mr) and another context of the device may import.

#include <cstdint>
#include <memory>

#include "verbs/context.h"
#include "verbs/device_memory.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Dm {
 public:
  /// `length` bytes aligned to 2^log_align. EINVAL or ENOMEM as
  /// DmPool::alloc.
  static int alloc(Context& ctx, std::uint64_t length, std::uint32_t log_align,
                   std::unique_ptr<Dm>* out);
  /// The same memory, in another context of the same device (EINVAL
  /// otherwise); it lives while either does.
  static int import(Context& ctx, Dm& orig, std::unique_ptr<Dm>* out);
  /// EBUSY while memory regions cover it.
  static int destroy(std::unique_ptr<Dm>& dm);
  /// Ends an import (ibv_unimport_dm) whatever uses it: regions on it
  /// may outlive the handle, and it goes with the last of them.
  static void unimport(std::unique_ptr<Dm>& dm);
  ~Dm();
  Dm(const Dm&) = delete;
  Dm& operator=(const Dm&) = delete;

  Context& context() const { return ctx_; }
  /// Names the allocation device-wide, as the kernel's handle does.
  std::uint32_t handle() const { return handle_; }
  bool imported() const { return imported_; }
  DeviceMemory& memory() { return *mem_; }
  UseCount& users() { return users_; }

  /// ibv_memcpy_to_dm / ibv_memcpy_from_dm: EINVAL for a null buffer with
  /// a length, else as DeviceMemory's copies.
  int copy_to(std::uint64_t offset, const void* host, std::size_t length);
  int copy_from(void* host, std::uint64_t offset, std::size_t length) const;

 private:
  Dm(Context& ctx, std::shared_ptr<DeviceMemory> mem, std::uint32_t handle, bool imported)
      : ctx_(ctx), mem_(std::move(mem)), handle_(handle), imported_(imported) {}
  Context& ctx_;
  std::shared_ptr<DeviceMemory> mem_;
  const std::uint32_t handle_;
  const bool imported_;
  UseCount users_;
};

}  // namespace uroce::verbs
