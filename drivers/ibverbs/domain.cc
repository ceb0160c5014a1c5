/* SPDX-License-Identifier: BSD-3-Clause */
// Thread domains and parent domains (verbs/pd.h).
//
// A parent domain's allocators (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS)
// let a provider place its own queue buffers in memory of the program's
// choosing; the resource types it passes them are the provider's own
// (mlx5dv's). uroce's queues live in the engine's memory, so it accepts
// the allocators and, as the verbs allow, never calls them.

#include <cerrno>

#include "ibverbs/provider.h"

namespace uroce::ibverbs {

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (!attr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new UTd();
  t->td = verbs::Td::create(ctx_of(context));
  t->ibv.context = context;
  return &t->ibv;
}

int dealloc_td(ibv_td* td) {
  UTd* t = to_u<UTd>(td);
  if (int rc = verbs::Td::destroy(t->td); rc != 0) return rc;
  delete t;
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr std::uint32_t kKnown =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr || !attr->pd || !ours(attr->pd->context) || (attr->comp_mask & ~kKnown) ||
      (attr->td && !ours(attr->td->context)) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
       (!attr->alloc || !attr->free))) {
    errno = EINVAL;
    return nullptr;
  }
  std::unique_ptr<verbs::Pd> pd;
  if (int rc = verbs::Pd::create_parent(ctx_of(context), pd_of(attr->pd),
                                        attr->td ? to_u<UTd>(attr->td)->td.get() : nullptr, &pd);
      rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* p = new UPd();
  p->ibv.context = context;
  p->ibv.handle = attr->pd->handle;
  p->pd = std::move(pd);
  return &p->ibv;
}

}  // namespace uroce::ibverbs
