/* SPDX-License-Identifier: BSD-3-Clause */
// Thread domains and parent domains. A thread domain is the program's
// promise that one thread uses the objects tied to it; uroce takes the
// promise and needs nothing from it (its queues are single-producer rings
// already). A parent domain is a PD the program allocates on top of
// another: objects created with it are protected as the other's.
//
// A parent domain's allocators (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS)
// let a provider place its own queue buffers in memory of the program's
// choosing; the resource types it passes them are the provider's own
// (mlx5dv's). uroce's queues live in the engine's memory, so it accepts
// the allocators and, as the verbs allow, never calls them.

#include <cerrno>

#include "drivers/ibverbs/provider.h"

namespace uroce::ibverbs {

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (!attr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new UTd();
  t->ibv.context = context;
  ours(context)->objects.fetch_add(1);
  return &t->ibv;
}

int dealloc_td(ibv_td* td) {
  UTd* t = to_u<UTd>(td);
  if (t->users.load() != 0) return EBUSY;
  ours(td->context)->objects.fetch_sub(1);
  delete t;
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr std::uint32_t kKnown =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr || !attr->pd || attr->pd->context != context || (attr->comp_mask & ~kKnown) ||
      (attr->td && attr->td->context != context) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
       (!attr->alloc || !attr->free))) {
    errno = EINVAL;
    return nullptr;
  }
  UPd* pd = to_u<UPd>(attr->pd);
  if (pd->parent) {
    errno = EINVAL;  // a parent domain's PD is a protection domain
    return nullptr;
  }
  auto* p = new UPd();
  p->ibv.context = context;
  p->ibv.handle = pd->ibv.handle;
  p->id = pd->id;
  p->parent = pd;
  pd->users.fetch_add(1);
  if (attr->td) {
    p->td = to_u<UTd>(attr->td);
    p->td->users.fetch_add(1);
  }
  ours(context)->objects.fetch_add(1);
  return &p->ibv;
}

}  // namespace uroce::ibverbs
