/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Unpredictable numbers for what a remote attacker must not guess: QPNs,
// R_Keys and initial PSNs. With predictable ones an off-path sender that
// can reach UDP port 4791 could inject packets into a connection or into
// registered memory, since RoCEv2 has no other authentication.

#include <cstdint>

namespace uroce::transport {

/// 32 bits from the kernel's CSPRNG (getrandom(2)). Not for the datapath:
/// one system call per value.
std::uint32_t secure_random_u32();

/// A random 24-bit PSN or QPN; QPNs 0 and 1 (SMI, GSI) are never returned.
std::uint32_t secure_random_qpn();
std::uint32_t secure_random_psn();

}  // namespace uroce::transport
