/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/odp.h"

#include <sys/mman.h>
#include <unistd.h>

namespace uroce::verbs::odp {

namespace {

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

bool available() {
  static const bool ok = [] {
    // A page of our own stack is mapped and writable; an older kernel
    // refuses the advice with EINVAL.
    volatile std::uint8_t probe = 0;
    const auto addr = reinterpret_cast<std::uintptr_t>(&probe);
    return accessible(addr, 1, true);
  }();
  return ok;
}

bool accessible(std::uintptr_t addr, std::uint64_t length, bool write) {
  if (length == 0) return true;
  const std::uintptr_t mask = page_size() - 1;
  const std::uintptr_t first = addr & ~mask;
  const std::uintptr_t end = (addr + (length - 1)) | mask;  // last byte of the last page
  if (end - first == UINTPTR_MAX) return false;  // the whole address space: never all mapped
  return madvise(reinterpret_cast<void*>(first), end - first + 1,
                 write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

}  // namespace uroce::verbs::odp
