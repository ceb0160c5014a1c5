/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// ICMP echo (RFC 792), so that `ping` works against a uroce address.

#include <cstdint>

#include "wire/bytes.h"

namespace uroce::wire {

/// Writes into `out` the echo reply to `request`, an IPv4 ICMP echo request
/// frame (untagged or 802.1Q-tagged). The reply swaps addresses and keeps
/// identifier, sequence and data. Returns the reply's length, or 0 when
/// `request` is not a well-formed echo request or `out` is too small.
std::size_t build_icmp_echo_reply(Bytes out, ConstBytes request);

}  // namespace uroce::wire
