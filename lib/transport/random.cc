/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

#include "wire/psn.h"

namespace uroce::transport {

std::uint32_t secure_random_u32() {
  std::uint32_t v;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof(v), 0);
    if (n == static_cast<ssize_t>(sizeof(v))) return v;
    // EINTR only: getrandom without GRND_NONBLOCK blocks until the pool is
    // ready and otherwise always fills 4 bytes.
    if (n < 0 && errno != EINTR) std::abort();
  }
}

std::uint32_t secure_random_qpn() {
  for (;;) {
    const std::uint32_t q = secure_random_u32() & wire::kPsnMask;
    if (q > 1 && q != wire::kPsnMask) return q;  // not SMI, GSI or multicast
  }
}

std::uint32_t secure_random_psn() { return secure_random_u32() & wire::kPsnMask; }

}  // namespace uroce::transport
