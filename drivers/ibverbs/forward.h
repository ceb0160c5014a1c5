/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Calls on objects that are not uroce's go to the real libibverbs: the
// next definition of the same versioned symbol after this library.

#include <dlfcn.h>

namespace uroce::ibverbs {

/// The real libibverbs function `name`@`version`, or null when no library
/// after this one defines it (a program linked to uroce alone).
template <typename Fn>
Fn real_fn(const char* name, const char* version) {
  return reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, name, version));
}

}  // namespace uroce::ibverbs

/// Forwards the current call to the real `fn`@`ver` with the given
/// arguments, or fails with ENOSYS as `fail` when there is none.
#define UROCE_FORWARD(fn, ver, fail, ...)                                        \
  do {                                                                           \
    static const auto real = ::uroce::ibverbs::real_fn<decltype(&fn)>(#fn, ver); \
    if (real == nullptr) {                                                       \
      errno = ENOSYS;                                                            \
      return fail;                                                               \
    }                                                                            \
    return real(__VA_ARGS__);                                                    \
  } while (0)
