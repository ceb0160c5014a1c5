/* SPDX-License-Identifier: BSD-3-Clause */
#include "switch/units.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "config/toml_reader.h"

namespace uroce::sw {
namespace {

struct Unit {
  std::string_view name;
  double scale;
};

// "123.5unit" scaled by its unit, which must be one of `units`.
std::optional<double> scaled(const std::string& text, std::initializer_list<Unit> units) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const auto v = parse_number(text.substr(0, i));
  if (!v || *v < 0) return std::nullopt;
  for (const Unit& u : units) {
    if (text.compare(i, std::string::npos, u.name) == 0) return *v * u.scale;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_rate(const std::string& text) {
  const auto r = scaled(text, {{"", 1}, {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}});
  if (!r || *r < 1000 || *r > 1e12) return std::nullopt;  // 1 kbit/s to 1 Tbit/s
  return static_cast<std::uint64_t>(*r);
}

std::optional<std::uint64_t> parse_time_ns(const std::string& text) {
  const auto t = scaled(text, {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}});
  if (!t || *t > 60e9) return std::nullopt;  // a minute is plenty
  return static_cast<std::uint64_t>(*t);
}

std::optional<double> parse_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::uint64_t rate_bps(const std::string& what, const std::string& text) {
  const auto r = parse_rate(text);
  if (!r) config::fail(what, "'" + text + "' is not a rate like 300mbit or 10gbit");
  return *r;
}

std::uint64_t time_ns(const std::string& what, const std::string& text) {
  const auto t = parse_time_ns(text);
  if (!t) config::fail(what, "'" + text + "' is not a time like 100us or 2ms");
  return *t;
}

double probability(const std::string& what, const std::string& text) {
  const auto v = parse_number(text);
  if (!v || *v < 0 || *v > 1)
    config::fail(what, "'" + text + "' is not a probability between 0 and 1");
  return *v;
}

std::uint64_t whole_number(const std::string& what, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' ||
      errno == ERANGE)
    config::fail(what, "'" + text + "' is not a number");
  return v;
}

std::uint64_t kib_bytes(const std::string& what, double kib) {
  if (!(kib >= 0) || kib > static_cast<double>(std::uint64_t{1} << 30))
    config::fail(what, "must be between 0 and 1073741824 KiB");
  return static_cast<std::uint64_t>(kib * 1024);
}

}  // namespace uroce::sw
