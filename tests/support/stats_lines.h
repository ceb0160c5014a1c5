/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The counters that uroce-switch prints at exit and that UROCE_STATS_FILE
// receives at device close: "<who> <scope> <counter> <value>" lines.

#include <map>
#include <string>

namespace uroce::test {

using CounterMap = std::map<std::string, unsigned long long>;

/// The lines of `who` ("switch", "uroce0") as "scope.counter" -> value,
/// summed when several lines name the same counter.
CounterMap stats_lines(const std::string& text, const std::string& who);

/// The sum of every counter whose "scope.counter" contains `part`.
unsigned long long sum_matching(const CounterMap& m, const std::string& part);

}  // namespace uroce::test
