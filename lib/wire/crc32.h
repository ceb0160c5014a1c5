/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// CRC-32 as IEEE 802.3 and zlib define it (polynomial 0x04C11DB7 reflected,
// initial value and final XOR 0xFFFFFFFF): the CRC of the RoCEv2 ICRC.
// Not CRC-32C, which DPDK's rte_hash_crc computes.

#include <cstdint>

#include "wire/bytes.h"

namespace uroce::wire {

/// Continues a CRC-32 over `data`. Start with crc = 0; feeding a buffer in
/// pieces gives the same result as feeding it whole (zlib's crc32()
/// convention). Backed by ISA-L's crc32_gzip_refl, which folds with
/// PCLMULQDQ where the CPU has it (see bench/wire_bench for the choice).
std::uint32_t crc32(std::uint32_t crc, ConstBytes data);

}  // namespace uroce::wire
