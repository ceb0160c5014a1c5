/* SPDX-License-Identifier: BSD-3-Clause */
// Protection domains and memory regions. A region is the program's own
// memory, or device memory (ibv_reg_dm_mr); the engine copies to and from
// it under the region's keys. An
// on-demand paging region (IBV_ACCESS_ON_DEMAND) is checked against the
// process's mappings at every access instead (verbs/odp.h); an implicit
// one (null address, SIZE_MAX length) spans the whole address space.

#include <cerrno>
#include <cstdint>
#include <limits>

#include "drivers/ibverbs/forward.h"
#include "drivers/ibverbs/provider.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace uroce::ibverbs;

namespace {

// Access bits the transport enforces; the rest are hints uroce may ignore
// (IBA 10.6.3.1 and verbs.h: optional bits never fail a registration).
constexpr int kEnforced = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
// What the MR table keeps: the enforced bits, and whether windows may be
// bound to the region (IBA C10-73).
constexpr int kTableFlags = kEnforced | IBV_ACCESS_MW_BIND;
constexpr int kIgnored =
    IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

// Access bits a region on device memory may ask for (those of mlx5's
// MEMIC). It is always zero-based: the memory has no address the program
// knows, so offset 0 of the region is address 0 (libibverbs' cmd_dm.c).
constexpr unsigned kDmAllowed = kEnforced | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE;

UMr* new_mr(ibv_pd* pd, void* addr, size_t length, const uroce::verbs::MrInfo& info) {
  auto* m = new UMr();
  m->pd = to_u<UPd>(pd);
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = addr;
  m->ibv.length = length;
  m->ibv.handle = info.lkey;
  m->ibv.lkey = info.lkey;
  m->ibv.rkey = info.rkey;
  m->pd->users.fetch_add(1);
  remember(ours(pd->context)->udev, m);
  return m;
}

ibv_mr* reg(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  UPd* p = to_u<UPd>(pd);
  UContext* c = ours(pd->context);
  const bool on_demand = (access & IBV_ACCESS_ON_DEMAND) != 0;
  const bool implicit =
      on_demand && addr == nullptr && length == std::numeric_limits<size_t>::max() && iova == 0;
  if ((access & ~static_cast<unsigned>(kEnforced | kIgnored | IBV_ACCESS_ON_DEMAND)) != 0 ||
      length == 0 || (addr == nullptr && !implicit)) {
    errno = EINVAL;
    return nullptr;
  }
  uroce::verbs::MrInfo info;
  if (int rc = c->dev->mrs().reg(p->id, addr, length, iova, access & kTableFlags, &info, on_demand);
      rc != 0) {
    errno = rc;
    return nullptr;
  }
  return &new_mr(pd, addr, length, info)->ibv;
}

}  // namespace

namespace uroce::ibverbs {

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) {
  if (!pd || !ours(pd->context)) return EINVAL;
  bool write = false;
  bool fault = true;
  switch (advice) {
    case IBV_ADVISE_MR_ADVICE_PREFETCH:
      break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
      write = true;
      break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
      fault = false;
      break;
    default:
      return ENOTSUP;
  }
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) return EINVAL;
  if (num_sge == 0 || sg_list == nullptr) return EINVAL;
  // Every SGE is checked before any is acted on, so a bad list does
  // nothing. The prefetch itself runs here, synchronously, with or without
  // IBV_ADVISE_MR_FLAG_FLUSH: it is cheap, and finishing early is allowed.
  // Only a flushed prefetch reports pages it could not fault in, as an
  // asynchronous one could not.
  const auto& mrs = ours(pd->context)->dev->mrs();
  const verbs::PdId id = to_u<UPd>(pd)->id;
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    if (int rc = mrs.advise(id, s.lkey, s.addr, s.length, write, false); rc != 0) return rc;
  }
  if (!fault) return 0;  // the device sees the CPU's page tables: nothing to present
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    const int rc = mrs.advise(id, s.lkey, s.addr, s.length, write, true);
    if (rc != 0 && (flags & IBV_ADVISE_MR_FLAG_FLUSH)) return rc;
  }
  return 0;
}

ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access) {
  UContext* c = pd ? ours(pd->context) : nullptr;
  // The memory and the PD must be of one context, as the kernel requires.
  // An empty region is allowed, as the kernel allows it on device memory.
  if (c == nullptr || dm == nullptr || dm->context != pd->context ||
      !(access & IBV_ACCESS_ZERO_BASED) || (access & ~kDmAllowed) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  UDm* d = to_u<UDm>(dm);
  if (!d->mem->contains(dm_offset, length)) {
    errno = EINVAL;
    return nullptr;
  }
  // The responder checks that an atomic's address is 8-byte aligned; with
  // the region starting at 0, the memory behind it must start on 8 bytes
  // too (allocations start on a cache line).
  if ((access & IBV_ACCESS_REMOTE_ATOMIC) && dm_offset % 8 != 0) {
    errno = EINVAL;
    return nullptr;
  }
  uroce::verbs::MrInfo info;
  if (int rc = c->dev->mrs().reg(to_u<UPd>(pd)->id, d->mem->data() + dm_offset, length, 0,
                                 access & kEnforced, &info);
      rc != 0) {
    errno = rc;
    return nullptr;
  }
  UMr* m = new_mr(pd, nullptr, length, info);  // no address: libibverbs reports NULL
  m->dm = d;
  d->users.fetch_add(1);
  return &m->ibv;
}

}  // namespace uroce::ibverbs

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_alloc_pd, "IBVERBS_1.1", nullptr, context);
  auto* p = new UPd();
  p->ibv.context = context;
  p->id = c->udev->next_pd.fetch_add(1);
  c->objects.fetch_add(1);
  p->ibv.handle = p->id;
  remember(c->udev, p);
  return &p->ibv;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) UROCE_FORWARD(ibv_dealloc_pd, "IBVERBS_1.1", ENOSYS, pd);
  UPd* p = to_u<UPd>(pd);
  if (p->users.load() != 0) return EBUSY;
  ours(pd->context)->objects.fetch_sub(1);
  if (p->parent) p->parent->users.fetch_sub(1);
  if (p->td) p->td->users.fetch_sub(1);
  if (!p->parent) forget(ours(pd->context)->udev, p);
  delete p;
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_reg_mr, "IBVERBS_1.1", nullptr, pd, addr, length, access);
  return reg(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_reg_mr_iova, "IBVERBS_1.7", nullptr, pd, addr, length, iova, access);
  return reg(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  if (!pd || !ours(pd->context))
    UROCE_FORWARD(ibv_reg_mr_iova2, "IBVERBS_1.8", nullptr, pd, addr, length, iova, access);
  return reg(pd, addr, length, iova, access);
}

// Returns 0 or one of enum ibv_rereg_mr_err_code with errno set, as
// libibverbs does.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (!mr || !ours(mr->context))
    UROCE_FORWARD(ibv_rereg_mr, "IBVERBS_1.1", ENOSYS, mr, flags, pd, addr, length, access);
  constexpr int kSupported =
      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  const auto uaccess = static_cast<unsigned>(access);
  if ((flags & ~kSupported) != 0 ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr == nullptr || length == 0)) ||
      (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
      ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != mr->context)) ||
      ((flags & IBV_REREG_MR_CHANGE_ACCESS) &&
       (uaccess & ~static_cast<unsigned>(kEnforced | kIgnored)) != 0)) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  UMr* m = to_u<UMr>(mr);
  // A region on device memory stays on it, as the kernel keeps it
  // (ib_uverbs_rereg_mr refuses DM regions).
  if (m->dm) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  uroce::verbs::MrTable::Change c;
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    c.pd = true;
    c.new_pd = to_u<UPd>(pd)->id;
  }
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    c.translation = true;
    c.addr = addr;
    c.length = length;
    c.iova = reinterpret_cast<uintptr_t>(addr);
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    c.access = true;
    c.flags = uaccess & kTableFlags;
  }
  if (int rc = ours(mr->context)->dev->mrs().rereg(mr->lkey, c); rc != 0) {
    errno = rc;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (c.pd) {
    UPd* np = to_u<UPd>(pd);
    np->users.fetch_add(1);
    m->pd->users.fetch_sub(1);
    m->pd = np;
    mr->pd = pd;
  }
  if (c.translation) {
    mr->addr = addr;
    mr->length = length;
  }
  return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (!mr || !ours(mr->context)) UROCE_FORWARD(ibv_dereg_mr, "IBVERBS_1.1", ENOSYS, mr);
  UMr* m = to_u<UMr>(mr);
  // Returns once the engine can no longer touch the region.
  if (int rc = ours(mr->context)->dev->mrs().dereg(mr->lkey); rc != 0) return rc;
  m->pd->users.fetch_sub(1);
  if (m->dm) m->dm->users.fetch_sub(1);
  forget(ours(mr->context)->udev, m);
  delete m;
  return 0;
}

}  // extern "C"
