/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/pd.h"

#include <cerrno>

#include "verbs/device.h"

namespace uroce::verbs {

std::unique_ptr<Td> Td::create(Context& ctx) {
  ctx.objects().acquire();
  return std::unique_ptr<Td>(new Td(ctx));
}

int Td::destroy(std::unique_ptr<Td>& td) {
  if (td->users_.busy()) return EBUSY;
  td.reset();
  return 0;
}

Td::~Td() { ctx_.objects().release(); }

std::unique_ptr<Pd> Pd::create(Context& ctx) {
  auto pd = std::unique_ptr<Pd>(new Pd(ctx, ctx.device().alloc_pd_id()));
  ctx.objects().acquire();
  ctx.device().remember(*pd);
  return pd;
}

int Pd::create_parent(Context& ctx, Pd& pd, Td* td, std::unique_ptr<Pd>* out) {
  // A parent domain's PD is a protection domain of the same context.
  if (&pd.ctx_ != &ctx || pd.is_parent_domain() || (td && &td->context() != &ctx)) return EINVAL;
  auto p = std::unique_ptr<Pd>(new Pd(ctx, pd.id_));
  p->parent_ = &pd;
  pd.users_.acquire();
  if (td) {
    p->td_ = td;
    td->users().acquire();
  }
  ctx.objects().acquire();
  *out = std::move(p);
  return 0;
}

int Pd::import(Context& ctx, Pd& orig, std::unique_ptr<Pd>* out) {
  if (&orig.device() != &ctx.device() || orig.is_parent_domain()) return EINVAL;
  auto p = std::unique_ptr<Pd>(new Pd(ctx, orig.id_));
  p->original_ = &orig;
  orig.users_.acquire();  // the original stays while it is imported
  ctx.objects().acquire();
  *out = std::move(p);
  return 0;
}

int Pd::destroy(std::unique_ptr<Pd>& pd) {
  if (pd->parent_ || pd->original_) {
    if (pd->users_.busy()) return EBUSY;
  } else if (int rc = pd->device().retire(*pd); rc != 0) {
    return rc;  // in use; an import cannot take it meanwhile
  }
  pd.reset();
  return 0;
}

void Pd::unimport(std::unique_ptr<Pd>& pd) {
  Pd* p = pd.release();
  if (!p->users_.abandon([p] { delete p; })) delete p;
}

Pd::~Pd() {
  if (parent_) parent_->users_.release();
  if (td_) td_->users().release();
  if (original_) original_->users_.release();
  if (!parent_ && !original_) device().forget(*this);  // unless destroy() retired it
  ctx_.objects().release();
}

}  // namespace uroce::verbs
