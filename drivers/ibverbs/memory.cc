/* SPDX-License-Identifier: BSD-3-Clause */
// Protection domains and memory regions (verbs/pd.h, verbs/mr.h): the
// program's own memory, or device memory (ibv_reg_dm_mr), which the
// engine copies to and from under the region's keys.

#include <cerrno>
#include <cstdint>
#include <limits>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"
#include "verbs/access.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace uroce::ibverbs;
namespace verbs = uroce::verbs;

namespace {

namespace access = uroce::verbs::access;
static_assert(access::kLocalWrite == IBV_ACCESS_LOCAL_WRITE);
static_assert(access::kRemoteWrite == IBV_ACCESS_REMOTE_WRITE);
static_assert(access::kRemoteRead == IBV_ACCESS_REMOTE_READ);
static_assert(access::kRemoteAtomic == IBV_ACCESS_REMOTE_ATOMIC);
static_assert(access::kMwBind == IBV_ACCESS_MW_BIND);
static_assert(access::kZeroBased == IBV_ACCESS_ZERO_BASED);
static_assert(access::kOnDemand == IBV_ACCESS_ON_DEMAND);
static_assert(access::kHugetlb == IBV_ACCESS_HUGETLB);
static_assert(access::kRelaxedOrdering == IBV_ACCESS_RELAXED_ORDERING);
static_assert(access::kOptionalRange == IBV_ACCESS_OPTIONAL_RANGE);
static_assert(verbs::rereg::kChangeTranslation == IBV_REREG_MR_CHANGE_TRANSLATION);
static_assert(verbs::rereg::kChangePd == IBV_REREG_MR_CHANGE_PD);
static_assert(verbs::rereg::kChangeAccess == IBV_REREG_MR_CHANGE_ACCESS);
static_assert(verbs::MrTable::kImplicitLength == std::numeric_limits<size_t>::max());

// The ibv_mr of a region; `addr` as the program gave it (null for device
// memory, as libibverbs reports).
ibv_mr* publish(ibv_pd* pd, std::unique_ptr<verbs::Mr> mr) {
  auto* m = new UMr();
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = mr->addr();
  m->ibv.length = mr->length();
  m->ibv.handle = mr->lkey();
  m->ibv.lkey = mr->lkey();
  m->ibv.rkey = mr->rkey();
  m->mr = std::move(mr);
  return &m->ibv;
}

ibv_mr* reg(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  std::unique_ptr<verbs::Mr> mr;
  if (int rc = verbs::Mr::reg(pd_of(pd), addr, length, iova, access, &mr); rc != 0) {
    errno = rc;
    return nullptr;
  }
  return publish(pd, std::move(mr));
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
  const verbs::Pd& p = pd_of(pd);
  const auto& mrs = p.device().mrs();
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    if (int rc = mrs.advise(p.id(), s.lkey, s.addr, s.length, write, false); rc != 0) return rc;
  }
  if (!fault) return 0;  // the device sees the CPU's page tables: nothing to present
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    const int rc = mrs.advise(p.id(), s.lkey, s.addr, s.length, write, true);
    if (rc != 0 && (flags & IBV_ADVISE_MR_FLAG_FLUSH)) return rc;
  }
  return 0;
}

ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access) {
  if (pd == nullptr || !ours(pd->context) || dm == nullptr || !ours(dm->context)) {
    errno = EINVAL;
    return nullptr;
  }
  std::unique_ptr<verbs::Mr> mr;
  if (int rc = verbs::Mr::reg_dm(pd_of(pd), *to_u<UDm>(dm)->dm, dm_offset, length, access, &mr);
      rc != 0) {
    errno = rc;
    return nullptr;
  }
  return publish(pd, std::move(mr));
}

ibv_mr* import_mr(ibv_pd* pd, verbs::Mr& orig) {
  std::unique_ptr<verbs::Mr> mr;
  if (int rc = verbs::Mr::import(pd_of(pd), orig, &mr); rc != 0) {
    errno = rc;
    return nullptr;
  }
  return publish(pd, std::move(mr));
}

}  // namespace uroce::ibverbs

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (!ours(context)) UROCE_FORWARD(ibv_alloc_pd, "IBVERBS_1.1", nullptr, context);
  auto* p = new UPd();
  p->pd = verbs::Pd::create(ctx_of(context));
  p->ibv.context = context;
  p->ibv.handle = p->pd->id();
  return &p->ibv;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) UROCE_FORWARD(ibv_dealloc_pd, "IBVERBS_1.1", ENOSYS, pd);
  UPd* p = to_u<UPd>(pd);
  if (int rc = verbs::Pd::destroy(p->pd); rc != 0) return rc;
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
  verbs::Mr& m = *to_u<UMr>(mr)->mr;
  verbs::Pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) && pd && ours(pd->context) ? &pd_of(pd)
                                                                                    : nullptr;
  const auto uaccess = static_cast<unsigned>(access);
  if (int rc = m.check_rereg(flags, new_pd, addr, length, uaccess); rc != 0) {
    errno = rc;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (int rc = m.rereg(flags, new_pd, addr, length, uaccess); rc != 0) {
    errno = rc;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = addr;
    mr->length = length;
  }
  return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (!mr || !ours(mr->context)) UROCE_FORWARD(ibv_dereg_mr, "IBVERBS_1.1", ENOSYS, mr);
  UMr* m = to_u<UMr>(mr);
  // Returns once the engine can no longer touch the region.
  if (int rc = verbs::Mr::destroy(m->mr); rc != 0) return rc;
  delete m;
  return 0;
}

}  // extern "C"
