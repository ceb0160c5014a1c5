/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/sim_memory.h"

namespace uroce::test {

using transport::MemError;
using transport::MemRef;

std::uint32_t SimMemory::reg(const void* addr, std::uint64_t length, unsigned access) {
  next_ = next_ * 2654435761u + 0x9E37;  // spread keys so stale ones rarely hit
  mrs_[next_] = {reinterpret_cast<std::uint64_t>(addr), length, access};
  return next_;
}

MemRef SimMemory::lookup(std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                         unsigned access) {
  const auto it = mrs_.find(key);
  if (it == mrs_.end()) return {nullptr, MemError::kBadKey};
  const Mr& mr = it->second;
  if (addr < mr.addr || length > mr.length || addr - mr.addr > mr.length - length)
    return {nullptr, MemError::kBounds};
  if ((mr.access & access) != access) return {nullptr, MemError::kAccess};
  return {reinterpret_cast<std::uint8_t*>(addr), MemError::kNone};
}

MemRef SimMemory::local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                        unsigned access) {
  return lookup(lkey, addr, length, access);
}

MemRef SimMemory::remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t length,
                         unsigned access) {
  return lookup(rkey, va, length, access);
}

bool SimMemory::invalidate(std::uint32_t rkey, bool) { return mrs_.erase(rkey) == 1; }

bool SimMemory::bind_mw(const transport::MwBind& b) {
  const auto it = mrs_.find(b.mr_lkey);
  if (it == mrs_.end() || !(it->second.access & transport::access::kMwBind)) return false;
  if (!lookup(b.mr_lkey, b.addr, b.length, 0)) return false;
  mrs_[b.new_rkey] = {b.addr, b.length, b.access};
  return true;
}

}  // namespace uroce::test
