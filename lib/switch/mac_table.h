/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The learning table of a bridge (802.1Q 8.8): which port a MAC address
// was last seen on, per VLAN, forgotten after the aging time.

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "switch/frame.h"
#include "wire/ethernet.h"

namespace uroce::sw {

class MacTable {
 public:
  explicit MacTable(Nanos aging_ns) : aging_ns_(aging_ns) {}

  void learn(std::uint16_t vid, const wire::MacAddr& mac, std::uint16_t port, Nanos now);
  /// The port `mac` lives on, if known and not aged out.
  std::optional<std::uint16_t> lookup(std::uint16_t vid, const wire::MacAddr& mac, Nanos now) const;
  /// Drops entries older than the aging time.
  void age(Nanos now);
  /// Forgets everything learned on `port` (its link went down).
  void flush_port(std::uint16_t port);
  std::size_t size() const { return entries_.size(); }

 private:
  static std::uint64_t key(std::uint16_t vid, const wire::MacAddr& mac);
  struct Entry {
    std::uint16_t port;
    Nanos seen;
  };
  const Nanos aging_ns_;
  std::unordered_map<std::uint64_t, Entry> entries_;
};

}  // namespace uroce::sw
