/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// UROCE_DEBUG_ASSERT(cond): a rule of the engine checked at run time in
// Debug builds and in the sanitizer builds (which are RelWithDebInfo, so
// CMake defines UROCE_DEBUG_ASSERTS for them), compiled out otherwise:
// rules cheap enough to check on the datapath while testing, such as which
// thread may call what (eRPC's assert(in_dispatch())).

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) || defined(UROCE_DEBUG_ASSERTS)
#define UROCE_DEBUG_ASSERTS_ON 1
#define UROCE_DEBUG_ASSERT(cond)                                                                   \
  (static_cast<bool>(cond) ? void(0)                                                               \
                           : (std::fprintf(stderr, "%s:%d: %s: assertion '%s' failed\n", __FILE__, \
                                           __LINE__, __func__, #cond),                             \
                              std::abort()))
#else
#define UROCE_DEBUG_ASSERTS_ON 0
#define UROCE_DEBUG_ASSERT(cond) static_cast<void>(0)
#endif
