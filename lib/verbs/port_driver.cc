/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/port_driver.h"

#include <deque>
#include <mutex>

namespace uroce::verbs {

namespace {

struct Registry {
  std::mutex mu;
  std::deque<PortDriver> drivers;  ///< a deque: a later registration moves no driver
};

// Drivers register from static initialisers of other libraries: the
// registry must exist before the first of them runs.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

}  // namespace

void register_port_driver(const PortDriver& driver) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.drivers.push_back(driver);
}

const PortDriver* find_port_driver(const DeviceConfig& dc) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (auto it = r.drivers.rbegin(); it != r.drivers.rend(); ++it)
    if (it->claims(dc)) return &*it;
  return nullptr;
}

}  // namespace uroce::verbs
