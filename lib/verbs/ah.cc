/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/ah.h"

#include "verbs/device.h"

namespace uroce::verbs {

// The PD's use is the object's: taken when it is made, given back when it
// goes, whatever happens in between.
Ah::Ah(Pd& pd) : pd_(pd) { pd_.users().acquire(); }

int Ah::create(Pd& pd, const AddressVector& av, std::unique_ptr<Ah>* out) {
  std::unique_ptr<Ah> ah(new Ah(pd));
  // The UDP source port of a UD flow comes from the QPNs, which an AH
  // does not know; the source QPN alone would do, but 0 keeps one flow
  // per destination as rxe does for UD.
  if (int rc = pd.device().resolve(av, 0, 0, &ah->route_); rc != 0) return rc;
  ah->template_ = wire::RouteTemplate(ah->route_);
  *out = std::move(ah);
  return 0;
}

Ah::~Ah() { pd_.users().release(); }

}  // namespace uroce::verbs
