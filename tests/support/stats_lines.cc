/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/stats_lines.h"

#include <sstream>

namespace uroce::test {

CounterMap stats_lines(const std::string& text, const std::string& who) {
  CounterMap m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string dev, scope, name;
    unsigned long long v;
    if (w >> dev >> scope >> name >> v && dev == who) m[scope + "." + name] += v;
  }
  return m;
}

unsigned long long sum_matching(const CounterMap& m, const std::string& part) {
  unsigned long long n = 0;
  for (const auto& [k, v] : m)
    if (k.find(part) != std::string::npos) n += v;
  return n;
}

}  // namespace uroce::test
