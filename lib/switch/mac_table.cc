/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/mac_table.h"

namespace uroce::sw {

std::uint64_t MacTable::key(std::uint16_t vid, const wire::MacAddr& mac) {
  std::uint64_t k = vid;
  for (std::uint8_t b : mac.bytes) k = k << 8 | b;
  return k;
}

void MacTable::learn(std::uint16_t vid, const wire::MacAddr& mac, std::uint16_t port, Nanos now) {
  if (mac.is_multicast()) return;  // a source address is never a group
  entries_[key(vid, mac)] = {port, now};
}

std::optional<std::uint16_t> MacTable::lookup(std::uint16_t vid, const wire::MacAddr& mac,
                                              Nanos now) const {
  const auto it = entries_.find(key(vid, mac));
  if (it == entries_.end() || now - it->second.seen > aging_ns_) return std::nullopt;
  return it->second.port;
}

void MacTable::age(Nanos now) {
  std::erase_if(entries_, [&](const auto& kv) { return now - kv.second.seen > aging_ns_; });
}

void MacTable::flush_port(std::uint16_t port) {
  std::erase_if(entries_, [&](const auto& kv) { return kv.second.port == port; });
}

}  // namespace uroce::sw
