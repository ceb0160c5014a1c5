/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/mr_table.h"

#include <cerrno>

#include "transport/random.h"
#include "transport/types.h"

namespace uroce::verbs {

using transport::MemError;
using transport::MemRef;

MrTable::MrTable(std::function<void()> quiesce) : entries_(kMaxMr), quiesce_(std::move(quiesce)) {
  free_.reserve(kMaxMr);
  // Slot 0 is never used, so no key is 0; slots are handed out lowest
  // first.
  for (std::uint32_t i = kMaxMr - 1; i >= 1; --i) free_.push_back(i);
}

int MrTable::reg(PdId pd, void* addr, std::uint64_t length, std::uint64_t iova, unsigned flags,
                 MrInfo* out) {
  namespace acc = transport::access;
  // IBA 10.6.3.1: remote write or atomic access needs local write too.
  if ((flags & (acc::kRemoteWrite | acc::kRemoteAtomic)) && !(flags & acc::kLocalWrite))
    return EINVAL;
  if (addr == nullptr && length != 0) return EINVAL;
  std::lock_guard lock(mu_);
  if (free_.empty()) return ENOMEM;
  const std::uint32_t index = free_.back();
  free_.pop_back();
  Entry& e = entries_[index];
  e.pd = pd;
  e.host = static_cast<std::uint8_t*>(addr);
  e.iova = iova;
  e.length = length;
  e.access = flags;
  const std::uint32_t key = index << 8 | (transport::secure_random_u32() & 0xFF);
  // Release: a lookup that sees the key sees the fields.
  e.key.store(key, std::memory_order_release);
  *out = {key, key};
  return 0;
}

int MrTable::dereg(std::uint32_t lkey) {
  const std::uint32_t index = lkey >> 8;
  {
    std::lock_guard lock(mu_);
    if (index == 0 || index >= kMaxMr || entries_[index].key.load() != lkey) return EINVAL;
    entries_[index].key.store(0, std::memory_order_release);
  }
  // Wait out any engine iteration that may have looked the key up before
  // it went: after this, nothing touches the region.
  if (quiesce_) quiesce_();
  std::lock_guard lock(mu_);
  free_.push_back(index);
  return 0;
}

int MrTable::rereg(std::uint32_t lkey, const Change& c) {
  namespace acc = transport::access;
  const std::uint32_t index = lkey >> 8;
  if (index == 0 || index >= kMaxMr) return EINVAL;
  Entry& e = entries_[index];
  {
    std::lock_guard lock(mu_);
    if (e.key.load() != lkey) return EINVAL;
    const unsigned flags = c.access ? c.flags : e.access;
    if ((flags & (acc::kRemoteWrite | acc::kRemoteAtomic)) && !(flags & acc::kLocalWrite))
      return EINVAL;  // IBA 10.6.3.1, as for a registration
    if (c.translation && (c.addr == nullptr || c.length == 0)) return EINVAL;
    e.key.store(0, std::memory_order_release);
  }
  // As for deregistration: no engine iteration still holds the old view.
  if (quiesce_) quiesce_();
  std::lock_guard lock(mu_);
  if (c.pd) e.pd = c.new_pd;
  if (c.translation) {
    e.host = static_cast<std::uint8_t*>(c.addr);
    e.length = c.length;
    e.iova = c.iova;
  }
  if (c.access) e.access = c.flags;
  e.key.store(lkey, std::memory_order_release);
  return 0;
}

MemRef MrTable::lookup(PdId pd, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                       unsigned access) const {
  const std::uint32_t index = key >> 8;
  if (index == 0 || index >= kMaxMr) return {nullptr, MemError::kBadKey};
  const Entry& e = entries_[index];
  if (e.key.load(std::memory_order_acquire) != key || e.pd != pd) {
    return {nullptr, MemError::kBadKey};
  }
  if (addr < e.iova || length > e.length || addr - e.iova > e.length - length) {
    return {nullptr, MemError::kBounds};
  }
  if ((e.access & access) != access) return {nullptr, MemError::kAccess};
  return {e.host + (addr - e.iova), MemError::kNone};
}

}  // namespace uroce::verbs
