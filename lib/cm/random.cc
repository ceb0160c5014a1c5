/* SPDX-License-Identifier: BSD-3-Clause */
#include "cm/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

namespace uroce::cm {

std::uint32_t SystemRandom::u32() {
  std::uint32_t v;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof(v), 0);
    if (n == static_cast<ssize_t>(sizeof(v))) return v;
    // EINTR only: without GRND_NONBLOCK getrandom waits for the pool and
    // then always fills 4 bytes.
    if (n < 0 && errno != EINTR) std::abort();
  }
}

}  // namespace uroce::cm
