/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/mr_table.h"

#include <cerrno>

#include "transport/random.h"
#include "transport/types.h"
#include "verbs/odp.h"

namespace uroce::verbs {

using transport::MemError;
using transport::MemRef;

MrTable::MrTable(std::function<void()> quiesce) : entries_(kSlots), quiesce_(std::move(quiesce)) {
  free_.reserve(kSlots);
  // Slot 0 is never used, so no key is 0; slots are handed out lowest
  // first.
  for (std::uint32_t i = kSlots - 1; i >= 1; --i) free_.push_back(i);
}

int MrTable::reg(PdId pd, void* addr, std::uint64_t length, std::uint64_t iova, unsigned flags,
                 MrInfo* out, bool on_demand) {
  namespace acc = transport::access;
  // IBA 10.6.3.1: remote write or atomic access needs local write too.
  if ((flags & (acc::kRemoteWrite | acc::kRemoteAtomic)) && !(flags & acc::kLocalWrite))
    return EINVAL;
  const bool implicit = on_demand && addr == nullptr && length == kImplicitLength;
  if (implicit && iova != 0) return EINVAL;
  if (addr == nullptr && length != 0 && !implicit) return EINVAL;
  if (on_demand && !odp::available()) return EOPNOTSUPP;
  std::lock_guard lock(mu_);
  std::uint32_t index;
  Entry* e = take_slot(pd, &index);
  if (!e) return ENOMEM;
  e->host = reinterpret_cast<std::uintptr_t>(addr);
  e->iova = iova;
  e->length = length;
  e->access = flags;
  e->on_demand = on_demand;
  *out = {publish(*e, index), 0};
  out->rkey = out->lkey;
  return 0;
}

MrTable::Entry* MrTable::take_slot(PdId pd, std::uint32_t* index) {
  if (free_.empty()) return nullptr;
  *index = free_.back();
  free_.pop_back();
  Entry& e = entries_[*index];
  e.pd = pd;
  e.host = 0;
  e.iova = 0;
  e.length = 0;
  e.access = 0;
  e.on_demand = false;
  e.windows = 0;
  e.mw_type = 0;
  e.bound = false;
  e.qpn = 0;
  e.parent = 0;
  return &e;
}

std::uint32_t MrTable::publish(Entry& e, std::uint32_t index) {
  const std::uint32_t key = index << 8 | (transport::secure_random_u32() & 0xFF);
  // Release: a lookup that sees the key sees the fields.
  e.key.store(key, std::memory_order_release);
  return key;
}

int MrTable::dereg(std::uint32_t lkey) {
  const std::uint32_t index = lkey >> 8;
  {
    std::lock_guard lock(mu_);
    if (index == 0 || index >= kSlots) return EINVAL;
    const Entry& e = entries_[index];
    if (e.key.load() != lkey || e.mw_type != 0) return EINVAL;
    if (e.windows != 0) return EBUSY;  // windows bound to it would outlive it
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
  if (index == 0 || index >= kSlots) return EINVAL;
  Entry& e = entries_[index];
  {
    std::lock_guard lock(mu_);
    if (e.key.load() != lkey || e.mw_type != 0) return EINVAL;
    if (e.windows != 0) return EBUSY;  // windows bound to it hold its old view
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
    e.host = reinterpret_cast<std::uintptr_t>(c.addr);
    e.length = c.length;
    e.iova = c.iova;
  }
  if (c.access) e.access = c.flags;
  e.key.store(lkey, std::memory_order_release);
  return 0;
}

const MrTable::Entry* MrTable::find(PdId pd, std::uint32_t key) const {
  const std::uint32_t index = key >> 8;
  if (index == 0 || index >= kSlots) return nullptr;
  const Entry& e = entries_[index];
  if (e.key.load(std::memory_order_acquire) != key || e.pd != pd) return nullptr;
  return &e;
}

namespace {

// Accesses that store into the region.
constexpr unsigned kWriting = transport::access::kLocalWrite | transport::access::kRemoteWrite |
                              transport::access::kRemoteAtomic;

}  // namespace

MemRef MrTable::lookup(PdId pd, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                       unsigned access) const {
  const Entry* e = find(pd, key);
  // A window has no local key (IBA 10.6.7: it is for remote access only).
  if (e == nullptr || e->mw_type != 0) return {nullptr, MemError::kBadKey};
  return check(*e, addr, length, access);
}

MemRef MrTable::lookup_remote(PdId pd, std::uint32_t qpn, std::uint32_t key, std::uint64_t addr,
                              std::uint64_t length, unsigned access) const {
  const Entry* e = find(pd, key);
  if (e == nullptr) return {nullptr, MemError::kBadKey};
  // A window reaches memory only while bound, and a type 2 window only
  // from the QP it is bound to (IBA 10.6.7.2.2).
  if (e->mw_type != 0 &&
      (!e->bound.load(std::memory_order_acquire) || (e->mw_type == 2 && e->qpn != qpn)))
    return {nullptr, MemError::kBadKey};
  return check(*e, addr, length, access);
}

MemRef MrTable::check(const Entry& entry, std::uint64_t addr, std::uint64_t length,
                      unsigned access) const {
  const Entry* e = &entry;
  // Bounds without wrap-around: an implicit region's length is 2^64 - 1,
  // so addr + length stays below 2^64 there too.
  if (addr < e->iova || length > e->length || addr - e->iova > e->length - length) {
    return {nullptr, MemError::kBounds};
  }
  if ((e->access & access) != access) return {nullptr, MemError::kAccess};
  const std::uintptr_t host = e->host + (addr - e->iova);
  // Only ODP regions pay for the kernel's word: pinned ones were mapped
  // when registered and the program promised to keep them so.
  if (e->on_demand && !odp::accessible(host, length, (access & kWriting) != 0)) {
    return {nullptr, MemError::kNotMapped};
  }
  return {reinterpret_cast<std::uint8_t*>(host), MemError::kNone};
}

int MrTable::alloc_mw(PdId pd, int type, MwInfo* out) {
  if (type != 1 && type != 2) return EINVAL;  // IBV_MW_TYPE_1, IBV_MW_TYPE_2
  std::lock_guard lock(mu_);
  std::uint32_t index;
  Entry* e = take_slot(pd, &index);
  if (!e) return ENOMEM;
  e->mw_type = static_cast<std::uint8_t>(type);
  if (next_mw_id_ == 0) ++next_mw_id_;
  e->mw_id = next_mw_id_++;
  *out = {publish(*e, index), index, e->mw_id};
  return 0;
}

void MrTable::unbind(Entry& mw) {
  --entries_[mw.parent].windows;
  mw.bound = false;
  mw.length = 0;
  mw.access = 0;
}

int MrTable::dealloc_mw(std::uint32_t index, std::uint32_t id) {
  if (index == 0 || index >= kSlots) return EINVAL;
  Entry& e = entries_[index];
  {
    std::lock_guard lock(mu_);
    if (e.key.load() == 0 || e.mw_type == 0 || e.mw_id != id) return EINVAL;
    e.key.store(0, std::memory_order_release);
  }
  // As for a region: no engine iteration still reaches memory through it.
  if (quiesce_) quiesce_();
  std::lock_guard lock(mu_);
  if (e.bound) unbind(e);
  e.mw_type = 0;
  free_.push_back(index);
  return 0;
}

bool MrTable::bind_mw(PdId pd, std::uint32_t qpn, const transport::MwBind& b) {
  namespace acc = transport::access;
  if (b.mw_index == 0 || b.mw_index >= kSlots) return false;
  std::lock_guard lock(mu_);
  Entry& w = entries_[b.mw_index];
  if (w.key.load() == 0 || w.mw_type == 0 || w.mw_id != b.mw_id) return false;
  // C10-72: the window, the QP and the region are of one protection domain.
  if (w.pd != pd) return false;
  // The program chooses only the key's low 8 bits (IBA 10.6.7.2.1).
  if (b.new_rkey >> 8 != b.mw_index) return false;
  if (w.mw_type == 2) {
    if (w.bound) return false;        // o10-37.2.30: only a free type 2 window is bound
    if (b.length == 0) return false;  // o10-37.2.40: and never to nothing
  }
  if (b.length == 0) {
    // A type 1 window bound to nothing is unbound (IBA 10.6.7.2.1).
    if (w.bound) unbind(w);
    w.key.store(b.new_rkey, std::memory_order_release);
    return true;
  }
  const Entry* mr = find(pd, b.mr_lkey);
  if (mr == nullptr || mr->mw_type != 0) return false;
  if (!(mr->access & acc::kMwBind)) return false;  // C10-73
  // C10-74: remote write or atomic through the window needs the region's
  // local write.
  if ((b.access & (acc::kRemoteWrite | acc::kRemoteAtomic)) && !(mr->access & acc::kLocalWrite))
    return false;
  // C10-75: the window lies within the region.
  if (b.addr < mr->iova || b.length > mr->length || b.addr - mr->iova > mr->length - b.length)
    return false;
  if (w.bound) unbind(w);
  w.host = mr->host + (b.addr - mr->iova);
  w.iova = b.addr;
  w.length = b.length;
  w.access = b.access & (acc::kRemoteWrite | acc::kRemoteRead | acc::kRemoteAtomic);
  w.on_demand = mr->on_demand;
  w.qpn = qpn;
  w.parent = b.mr_lkey >> 8;
  w.bound = true;
  ++entries_[w.parent].windows;
  w.key.store(b.new_rkey, std::memory_order_release);
  return true;
}

bool MrTable::invalidate(PdId pd, std::uint32_t qpn, std::uint32_t rkey, bool remote) {
  const std::uint32_t index = rkey >> 8;
  if (index == 0 || index >= kSlots) return false;
  std::lock_guard lock(mu_);
  Entry& w = entries_[index];
  if (w.key.load() != rkey || w.pd != pd) return false;
  // o10-37.2.26: only a bound type 2 window is invalidated (regions here
  // are never fast-registered, so none is).
  if (w.mw_type != 2 || !w.bound) return false;
  // A SEND_WITH_INV comes through the QP the window is bound to, or not
  // at all (IBA 10.6.7.2.2).
  if (remote && w.qpn != qpn) return false;
  unbind(w);
  return true;
}

void MrTable::release_qp(PdId pd, std::uint32_t qpn) {
  std::vector<std::uint32_t> parents;
  {
    std::lock_guard lock(mu_);
    for (Entry& w : entries_) {
      if (w.mw_type != 2 || w.pd != pd || w.qpn != qpn || !w.bound.load() || w.key.load() == 0)
        continue;
      w.bound.store(false, std::memory_order_release);
      parents.push_back(w.parent);
    }
  }
  if (parents.empty()) return;
  // The regions are let go only once no engine iteration may still be
  // using the windows.
  if (quiesce_) quiesce_();
  std::lock_guard lock(mu_);
  for (std::uint32_t p : parents) --entries_[p].windows;
}

int MrTable::advise(PdId pd, std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                    bool write, bool fault) const {
  const Entry* e = find(pd, lkey);
  if (e == nullptr || e->mw_type != 0) return EFAULT;
  if (!e->on_demand) return ENOENT;  // prefetch is for ODP regions only
  if (addr < e->iova || length > e->length || addr - e->iova > e->length - length) return EFAULT;
  if (write && !(e->access & transport::access::kLocalWrite)) return EPERM;
  // Faulting the pages in is the whole of a prefetch here: the device
  // reads the page tables the CPU uses, so there is no translation to
  // post. Without a fault there is nothing to do.
  if (fault && !odp::accessible(e->host + (addr - e->iova), length, write)) return EFAULT;
  return 0;
}

}  // namespace uroce::verbs
