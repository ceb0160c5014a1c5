/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/mr.h"

#include <cerrno>

#include "transport/random.h"
#include "verbs/access.h"
#include "verbs/device.h"

namespace uroce::verbs {

Mr::Mr(Pd& pd, const MrInfo& keys, void* addr, std::uint64_t length, Dm* dm, bool imported)
    : pd_(&pd), keys_(keys), addr_(addr), length_(length), dm_(dm), imported_(imported) {
  pd.users().acquire();
  if (dm_) dm_->users().acquire();
  if (!imported_) pd.device().remember(*this);
}

Mr::~Mr() {
  if (!imported_) pd_->device().forget(*this);
  if (dm_) dm_->users().release();
  pd_->users().release();
}

int Mr::reg(Pd& pd, void* addr, std::uint64_t length, std::uint64_t iova, unsigned acc,
            std::unique_ptr<Mr>* out) {
  const bool on_demand = (acc & access::kOnDemand) != 0;
  const bool implicit =
      on_demand && addr == nullptr && length == MrTable::kImplicitLength && iova == 0;
  if ((acc & ~access::kRegion) != 0 || length == 0 || (addr == nullptr && !implicit))
    return EINVAL;
  MrInfo keys;
  if (int rc = pd.device().mrs().reg(pd.id(), addr, length, iova, acc & access::kTableFlags, &keys,
                                     on_demand);
      rc != 0)
    return rc;
  out->reset(new Mr(pd, keys, addr, length, nullptr, false));
  return 0;
}

int Mr::reg_dm(Pd& pd, Dm& dm, std::uint64_t offset, std::uint64_t length, unsigned acc,
               std::unique_ptr<Mr>* out) {
  // The memory and the PD must be of one context, as the kernel requires.
  if (&dm.context() != &pd.context() || !(acc & access::kZeroBased) ||
      (acc & ~access::kDmRegion) != 0 || !dm.memory().contains(offset, length))
    return EINVAL;
  // Allocations start on a cache line: an aligned offset is aligned memory.
  if ((acc & access::kRemoteAtomic) && offset % 8 != 0) return EINVAL;
  MrInfo keys;
  if (int rc = pd.device().mrs().reg(pd.id(), dm.memory().data() + offset, length, 0,
                                     acc & access::kEnforced, &keys);
      rc != 0)
    return rc;
  out->reset(new Mr(pd, keys, nullptr, length, &dm, false));
  return 0;
}

int Mr::import(Pd& pd, Mr& orig, std::unique_ptr<Mr>* out) {
  if (&orig.pd().device() != &pd.device() || orig.pd().id() != pd.id()) return EINVAL;
  out->reset(new Mr(pd, orig.keys_, orig.addr_, orig.length_, nullptr, true));
  return 0;
}

int Mr::destroy(std::unique_ptr<Mr>& mr) {
  // Returns once the engine can no longer touch the region; an import
  // looking the region up waits, and then finds none.
  Device& dev = mr->pd_->device();
  const std::uint32_t lkey = mr->keys_.lkey;
  if (int rc = dev.retire(*mr, [&] { return dev.mrs().dereg(lkey); }); rc != 0) return rc;
  mr.reset();
  return 0;
}

int Mr::check_rereg(int flags, const Pd* pd, const void* addr, std::uint64_t length,
                    unsigned acc) const {
  constexpr int kKnown = rereg::kChangeTranslation | rereg::kChangePd | rereg::kChangeAccess;
  if ((flags & ~kKnown) != 0) return EINVAL;
  if ((flags & rereg::kChangeTranslation) && (addr == nullptr || length == 0)) return EINVAL;
  if (acc != 0 && !(flags & rereg::kChangeAccess)) return EINVAL;
  if ((flags & rereg::kChangePd) && (pd == nullptr || &pd->context() != &pd_->context()))
    return EINVAL;
  if ((flags & rereg::kChangeAccess) &&
      (acc & ~static_cast<unsigned>(access::kEnforced | access::kIgnored)) != 0)
    return EINVAL;
  // A region on device memory stays on it (ib_uverbs_rereg_mr refuses
  // DM regions).
  if (dm_) return EINVAL;
  return 0;
}

int Mr::rereg(int flags, Pd* pd, void* addr, std::uint64_t length, unsigned acc) {
  MrTable::Change c;
  if (flags & rereg::kChangePd) {
    c.pd = true;
    c.new_pd = pd->id();
  }
  if (flags & rereg::kChangeTranslation) {
    c.translation = true;
    c.addr = addr;
    c.length = length;
    c.iova = reinterpret_cast<std::uintptr_t>(addr);
  }
  if (flags & rereg::kChangeAccess) {
    c.access = true;
    c.flags = acc & access::kTableFlags;
  }
  if (int rc = pd_->device().mrs().rereg(keys_.lkey, c); rc != 0) return rc;
  if (c.pd) {
    pd->users().acquire();
    pd_->users().release();
    pd_ = pd;
  }
  if (c.translation) {
    addr_ = addr;
    length_ = length;
  }
  return 0;
}

int Mw::alloc(Pd& pd, int type, std::unique_ptr<Mw>* out) {
  MrTable::MwInfo info;
  if (int rc = pd.device().mrs().alloc_mw(pd.id(), type, &info); rc != 0) return rc;
  out->reset(new Mw(pd, type, info));
  pd.users().acquire();
  return 0;
}

int Mw::destroy(std::unique_ptr<Mw>& mw) {
  // Returns once the engine can no longer reach memory through it.
  if (int rc = mw->pd_.device().mrs().dealloc_mw(mw->index_, mw->id_); rc != 0) return rc;
  mw.reset();
  return 0;
}

Mw::~Mw() { pd_.users().release(); }

int Mw::bind_request(const Context& ctx, std::uint32_t rkey, const Mr* mr, std::uint64_t addr,
                     std::uint64_t length, unsigned acc, transport::MwBind* out) const {
  if (&pd_.context() != &ctx) return EINVAL;
  if ((acc & ~access::kWindow) != 0) return EINVAL;
  if (length != 0 && (mr == nullptr || &mr->pd().context() != &ctx || &mr->pd() != &pd_))
    return EINVAL;
  out->mw_index = index_;
  out->mw_id = id_;
  out->new_rkey = rkey;
  out->mr_lkey = length != 0 ? mr->lkey() : 0;
  out->addr = addr;
  out->length = length;
  out->access = acc;
  return 0;
}

std::uint32_t Mw::next_type1_key() const {
  std::uint32_t low = rkey_ & 0xFF;
  while (low == (rkey_ & 0xFF)) low = transport::secure_random_u32() & 0xFF;
  return (rkey_ & ~0xFFu) | low;
}

}  // namespace uroce::verbs
