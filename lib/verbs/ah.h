/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Address handles (IBA 10.2.2.1): where a UD datagram goes. On RoCE the
// address is a GID, an IP address; the handle keeps the route (Ethernet,
// IP and UDP template) with the peer's MAC resolved once.

#include <memory>

#include "verbs/address_vector.h"
#include "verbs/pd.h"
#include "wire/roce_frame.h"

namespace uroce::verbs {

class Ah {
 public:
  /// EINVAL for an address vector the device cannot use (no GRH, another
  /// port, a bad GID index or families that differ), EHOSTUNREACH when
  /// the peer does not answer.
  static int create(Pd& pd, const AddressVector& av, std::unique_ptr<Ah>* out);
  static void destroy(std::unique_ptr<Ah>& ah) { ah.reset(); }
  ~Ah();

  Pd& pd() const { return pd_; }
  const wire::RoceRoute& route() const { return route_; }
  /// The route's headers, as UD WRs carry them (roce_frame.h).
  const wire::RouteTemplate& route_template() const { return template_; }

 private:
  explicit Ah(Pd& pd);
  Pd& pd_;
  wire::RoceRoute route_;
  wire::RouteTemplate template_;
};

}  // namespace uroce::verbs
