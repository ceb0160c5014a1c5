/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Tells when the kernel adds or removes an address of an interface, as the
// kernel's GID cache hears of it (inetaddr and inet6addr notifiers): an
// rtnetlink socket subscribed to the IPv4 and IPv6 address groups. A netdev
// device keeps its GID table in step through it.

#include <memory>
#include <string>

namespace uroce::config {

class AddressWatch {
 public:
  /// Watches `iface` in this network namespace; null with *error when the
  /// interface does not exist or no rtnetlink socket can be had.
  static std::unique_ptr<AddressWatch> open(const std::string& iface, std::string* error);
  ~AddressWatch();
  AddressWatch(const AddressWatch&) = delete;
  AddressWatch& operator=(const AddressWatch&) = delete;

  /// Whether an address of the interface came or went since the last call
  /// (or the kernel dropped notifications, when nobody can tell); true at
  /// the first call, since the addresses were read before the watch began.
  /// Reads what rtnetlink sent; never blocks.
  bool changed();

 private:
  AddressWatch(int fd, unsigned ifindex) : fd_(fd), ifindex_(ifindex) {}
  int fd_;
  unsigned ifindex_;
  bool first_ = true;
};

}  // namespace uroce::config
