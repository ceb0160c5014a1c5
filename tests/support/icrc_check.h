/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The ICRC of captured frames, checked by tests/support/icrc_check.py:
// Python's zlib CRC-32 and a header walk of its own, written apart from
// lib/wire, so that a bug shared by uroce's builder and parser (which
// the C++ tests otherwise check against each other) cannot pass both.

#include <cstddef>
#include <string>

namespace uroce::test {

struct IcrcCheck {
  int status = -1;        ///< the script's exit status: 0 all good, 1 some bad, 2 unreadable
  std::size_t roce = 0;   ///< RoCEv2 frames in the file
  std::size_t bad = 0;    ///< of those, with a wrong ICRC (or truncated)
  std::size_t other = 0;  ///< frames that are not RoCEv2
  std::string output;     ///< what the script printed, the bad frames listed
};

/// Runs the independent ICRC check over the Ethernet pcap at `path`.
IcrcCheck independent_icrc_check(const std::string& path);

}  // namespace uroce::test
