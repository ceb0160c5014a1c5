/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The port's GID table as the kernel's GID cache keeps it for a RoCE port
// (drivers/infiniband/core/cache.c): entry 0 is the link-local GID made
// from the MAC, then one RoCE v2 GID per address of the device. QPs and
// address handles name a GID by its index, so an address keeps its entry
// for as long as it is there: a removed address leaves its entry empty
// (the zero GID), and a new one takes the lowest empty entry. Unlike the
// kernel, which keeps an entry that QPs still hold until they let go, a
// new address may take it at once: a QP or AH resolves its source address
// when it is made or modified, so those that named the old one keep it.

#include <cstddef>
#include <vector>

#include "wire/ip.h"

namespace uroce::verbs {

class GidTable {
 public:
  /// Entry 0 `link_local`, then `addresses` in order; room for at least
  /// `min_capacity` entries, and for every one of `addresses`.
  GidTable(const wire::IpAddr& link_local, const std::vector<wire::IpAddr>& addresses,
           std::size_t min_capacity);

  /// Makes the table hold exactly `addresses` beside entry 0; true when an
  /// entry changed. What does not fit in the table is left out.
  bool update(const std::vector<wire::IpAddr>& addresses);

  /// The entries up to the last one in use, empty ones zero.
  const std::vector<wire::IpAddr>& entries() const { return entries_; }
  /// The entries in use as the engine takes its addresses: the device's
  /// own addresses in index order (the first of a family sources ARP and
  /// neighbour solicitations), the link-local one last.
  std::vector<wire::IpAddr> addresses() const;
  std::size_t capacity() const { return capacity_; }
  /// How many addresses update() could not fit, the last time.
  std::size_t left_out() const { return left_out_; }

 private:
  std::vector<wire::IpAddr> entries_;
  std::size_t capacity_;
  std::size_t left_out_ = 0;
};

}  // namespace uroce::verbs
