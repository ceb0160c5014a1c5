/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/gid_table.h"

#include <algorithm>

namespace uroce::verbs {

namespace {

bool contains(const std::vector<wire::IpAddr>& v, const wire::IpAddr& a) {
  return std::find(v.begin(), v.end(), a) != v.end();
}

}  // namespace

GidTable::GidTable(const wire::IpAddr& link_local, const std::vector<wire::IpAddr>& addresses,
                   std::size_t min_capacity)
    : entries_{link_local}, capacity_(std::max(min_capacity, addresses.size() + 1)) {
  entries_.insert(entries_.end(), addresses.begin(), addresses.end());
}

bool GidTable::update(const std::vector<wire::IpAddr>& addresses) {
  const wire::IpAddr empty{};
  bool changed = false;
  for (std::size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i] != empty && !contains(addresses, entries_[i])) {
      entries_[i] = empty;
      changed = true;
    }
  }
  left_out_ = 0;
  for (const wire::IpAddr& a : addresses) {
    if (a == empty || contains(entries_, a)) continue;
    const auto hole = std::find(entries_.begin() + 1, entries_.end(), empty);
    if (hole != entries_.end()) {
      *hole = a;
    } else if (entries_.size() < capacity_) {
      entries_.push_back(a);
    } else {
      ++left_out_;
      continue;
    }
    changed = true;
  }
  while (entries_.size() > 1 && entries_.back() == empty) entries_.pop_back();
  return changed;
}

std::vector<wire::IpAddr> GidTable::addresses() const {
  std::vector<wire::IpAddr> out;
  for (std::size_t i = 1; i < entries_.size(); ++i)
    if (entries_[i] != wire::IpAddr{}) out.push_back(entries_[i]);
  out.push_back(entries_.front());
  return out;
}

}  // namespace uroce::verbs
