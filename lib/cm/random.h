/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The default source of comm IDs and PSNs: the kernel's CSPRNG. A comm ID
// an off-path sender could guess would let it reject or disconnect a
// connection with one forged REJ or DREQ; the kernel XORs its IDs with a
// random operand for the same reason (cm.c cm.random_id_operand).

#include <cstdint>

#include "cm/types.h"

namespace uroce::cm {

/// 32 bits per call from getrandom(2).
class SystemRandom : public RandomSource {
 public:
  std::uint32_t u32() override;
};

}  // namespace uroce::cm
