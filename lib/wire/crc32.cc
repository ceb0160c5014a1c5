/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/crc32.h"

#include <isa-l/crc.h>

namespace uroce::wire {

std::uint32_t crc32(std::uint32_t crc, ConstBytes data) {
  return crc32_gzip_refl(crc, data.data(), data.size());
}

}  // namespace uroce::wire
