/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

/// @file
/// Typed reading of a TOML document, for uroce's configuration and
/// uroce-switch's file alike: unknown keys, wrong types and values out of
/// range are refused with an error that names the key as the user wrote
/// it, "file: key", or the environment variable that set it.

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace uroce::config {

/// A refused value; what() is "<key or option>: <why>".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws Error("<where>: <why>").
[[noreturn]] void fail(std::string_view where, std::string_view why);

/// Parses TOML text. On a syntax error returns nullopt and sets `*error`
/// to "origin:line:column: what is wrong".
std::optional<toml::table> parse_toml(const std::string& text, const std::string& origin,
                                      std::string* error);

/// Where a document's keys came from: the file, unless the environment
/// set them. Errors name a key as the user wrote it.
struct KeySource {
  std::string file;  ///< names the document: a path, or what stands for none
  /// Keys set from the environment ("device[0].dscp") and the variable
  /// that set each ("UROCE_DEVICE0_DSCP").
  std::map<std::string, std::string> env;
};

/// Whether a list of priorities may be empty.
enum class EmptyList : std::uint8_t { kRefused, kAllowed };

/// Reads one table of a TOML document. Every getter takes a key of this
/// table; those with a default return it for a missing key, those without
/// return nullopt. A present value of the wrong type or out of range
/// throws Error.
class TomlReader {
 public:
  /// The document's root table. `source` must outlive the reader and every
  /// reader it hands out.
  TomlReader(const toml::table& root, const KeySource& source);

  /// The key as the user wrote it: "UROCE_PFC_XOFF_KB (pfc.xoff_kb)" when
  /// the environment set it, else "file: pfc.xoff_kb".
  std::string where(std::string_view key) const;
  /// Throws Error naming `key` of this table.
  [[noreturn]] void fail(std::string_view key, std::string_view why) const;

  /// Refuses any key of this table that is not in `known`.
  void only(std::initializer_list<std::string_view> known) const;

  /// The table under `key` ([key]); nullopt when there is none.
  std::optional<TomlReader> table(std::string_view key) const;
  /// The tables of an array of tables ([[key]]), in order; empty when
  /// there is none.
  std::vector<TomlReader> tables(std::string_view key) const;

  /// An integer, or for a floating-point T any finite number, from lo to hi.
  template <typename T>
  T number(std::string_view key, T dflt, std::type_identity_t<T> lo,
           std::type_identity_t<T> hi) const;
  /// Any finite number, integer or not.
  std::optional<double> number(std::string_view key) const;
  /// A whole number, 0 or more.
  std::optional<std::uint64_t> whole(std::string_view key) const;

  bool boolean(std::string_view key, bool dflt) const;
  std::optional<bool> boolean(std::string_view key) const;

  std::optional<std::string> string(std::string_view key) const;
  /// A string or an array of strings; empty when missing.
  std::vector<std::string> strings(std::string_view key) const;

  /// A list of priorities, [3, 4], as a mask: bit n is priority n.
  std::uint8_t priorities(std::string_view key, std::uint8_t dflt,
                          EmptyList empty = EmptyList::kRefused) const;

  /// The table itself, for shapes the getters do not cover.
  const toml::table& raw() const { return *table_; }

 private:
  TomlReader(const toml::table& table, std::string path, const KeySource& source);

  const toml::node* get(std::string_view key) const;
  static std::string bound(double v);

  const toml::table* table_;
  std::string path_;
  const KeySource* source_;
};

template <typename T>
T TomlReader::number(std::string_view key, T dflt, std::type_identity_t<T> lo,
                     std::type_identity_t<T> hi) const {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  const toml::node* n = get(key);
  if (!n) return dflt;
  if constexpr (std::is_integral_v<T>) {
    // Compared as integers: a double would round a 64-bit seed.
    const auto i = n->value_exact<std::int64_t>();
    if (!i) fail(key, "expected an integer");
    if (!std::in_range<T>(*i) || static_cast<T>(*i) < lo || static_cast<T>(*i) > hi)
      fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return static_cast<T>(*i);
  } else {
    const auto v = number(key);
    if (*v < lo || *v > hi) fail(key, "must be between " + bound(lo) + " and " + bound(hi));
    return static_cast<T>(*v);
  }
}

}  // namespace uroce::config
