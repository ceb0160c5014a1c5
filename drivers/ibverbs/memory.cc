/* SPDX-License-Identifier: BSD-3-Clause */
// Protection domains and memory regions. A region is the program's own
// memory; the engine copies to and from it under the region's keys.

#include <cerrno>
#include <cstdint>

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
constexpr int kIgnored =
    IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

ibv_mr* reg(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  UPd* p = to_u<UPd>(pd);
  UContext* c = ours(pd->context);
  if (access & IBV_ACCESS_ON_DEMAND) {
    errno = EOPNOTSUPP;  // every region is pinned program memory already
    return nullptr;
  }
  if ((access & ~static_cast<unsigned>(kEnforced | kIgnored)) != 0 || length == 0 ||
      (addr == nullptr && length != 0)) {
    errno = EINVAL;
    return nullptr;
  }
  uroce::verbs::MrInfo info;
  if (int rc = c->dev->mrs().reg(p->id, addr, length, iova, access & kEnforced, &info); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* m = new UMr();
  m->pd = p;
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = addr;
  m->ibv.length = length;
  m->ibv.handle = info.lkey;
  m->ibv.lkey = info.lkey;
  m->ibv.rkey = info.rkey;
  p->users.fetch_add(1);
  return &m->ibv;
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_alloc_pd, "IBVERBS_1.1", nullptr, context);
  auto* p = new UPd();
  p->ibv.context = context;
  p->id = c->udev->next_pd.fetch_add(1);
  c->objects.fetch_add(1);
  p->ibv.handle = p->id;
  return &p->ibv;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) UROCE_FORWARD(ibv_dealloc_pd, "IBVERBS_1.1", ENOSYS, pd);
  UPd* p = to_u<UPd>(pd);
  if (p->users.load() != 0) return EBUSY;
  ours(pd->context)->objects.fetch_sub(1);
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
    c.flags = uaccess & kEnforced;
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
  delete m;
  return 0;
}

}  // extern "C"
