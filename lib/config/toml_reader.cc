/* SPDX-License-Identifier: BSD-3-Clause */
#include "config/toml_reader.h"

#include <cmath>
#include <sstream>

namespace uroce::config {

void fail(std::string_view where, std::string_view why) {
  std::string message(where);
  message += ": ";
  message += why;
  throw Error(message);
}

std::optional<toml::table> parse_toml(const std::string& text, const std::string& origin,
                                      std::string* error) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
       << e.description();
    *error = os.str();
    return std::nullopt;
  }
}

TomlReader::TomlReader(const toml::table& root, const KeySource& source)
    : TomlReader(root, "", source) {}

TomlReader::TomlReader(const toml::table& table, std::string path, const KeySource& source)
    : table_(&table), path_(std::move(path)), source_(&source) {}

std::string TomlReader::where(std::string_view key) const {
  const std::string full = path_ + std::string(key);
  const auto it = source_->env.find(full);
  return it != source_->env.end() ? it->second + " (" + full + ")" : source_->file + ": " + full;
}

void TomlReader::fail(std::string_view key, std::string_view why) const {
  config::fail(where(key), why);
}

const toml::node* TomlReader::get(std::string_view key) const { return table_->get(key); }

void TomlReader::only(std::initializer_list<std::string_view> known) const {
  for (const auto& [k, v] : *table_) {
    bool ok = false;
    for (std::string_view name : known) ok = ok || k.str() == name;
    if (!ok) fail(k.str(), "unknown key");
  }
}

std::optional<TomlReader> TomlReader::table(std::string_view key) const {
  const toml::node* n = get(key);
  if (!n) return std::nullopt;
  const toml::table* t = n->as_table();
  if (!t) fail(key, "must be a table");
  return TomlReader(*t, path_ + std::string(key) + ".", *source_);
}

std::vector<TomlReader> TomlReader::tables(std::string_view key) const {
  std::vector<TomlReader> out;
  const toml::node* n = get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "must be an array of tables ([[" + std::string(key) + "]])");
  for (std::size_t i = 0; i < a->size(); ++i) {
    const std::string item = std::string(key) + "[" + std::to_string(i) + "]";
    const toml::table* t = a->get(i)->as_table();
    if (!t) fail(item, "must be a table");
    out.push_back(TomlReader(*t, path_ + item + ".", *source_));
  }
  return out;
}

std::optional<double> TomlReader::number(std::string_view key) const {
  const toml::node* n = get(key);
  if (!n) return std::nullopt;
  if (auto i = n->value_exact<std::int64_t>()) return static_cast<double>(*i);
  if (auto d = n->value_exact<double>(); d && std::isfinite(*d)) return *d;
  fail(key, "expected a number");
}

std::optional<std::uint64_t> TomlReader::whole(std::string_view key) const {
  const toml::node* n = get(key);
  if (!n) return std::nullopt;
  const auto i = n->value_exact<std::int64_t>();
  if (!i || *i < 0) fail(key, "expected a whole number, 0 or more");
  return static_cast<std::uint64_t>(*i);
}

bool TomlReader::boolean(std::string_view key, bool dflt) const {
  return boolean(key).value_or(dflt);
}

std::optional<bool> TomlReader::boolean(std::string_view key) const {
  const toml::node* n = get(key);
  if (!n) return std::nullopt;
  if (auto b = n->value_exact<bool>()) return *b;
  fail(key, "expected true or false");
}

std::optional<std::string> TomlReader::string(std::string_view key) const {
  const toml::node* n = get(key);
  if (!n) return std::nullopt;
  if (auto s = n->value_exact<std::string>()) return *s;
  fail(key, "expected a string");
}

std::vector<std::string> TomlReader::strings(std::string_view key) const {
  std::vector<std::string> out;
  const toml::node* n = get(key);
  if (!n) return out;
  if (auto s = n->value_exact<std::string>()) return {*s};
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected a string or an array of strings");
  for (const auto& e : *a) {
    auto s = e.value_exact<std::string>();
    if (!s) fail(key, "expected an array of strings");
    out.push_back(*s);
  }
  return out;
}

std::uint8_t TomlReader::priorities(std::string_view key, std::uint8_t dflt,
                                    EmptyList empty) const {
  const toml::node* n = get(key);
  if (!n) return dflt;
  const toml::array* a = n->as_array();
  if (!a || (a->empty() && empty == EmptyList::kRefused))
    fail(key, "expected a list of priorities, like [3]");
  std::uint8_t mask = 0;
  for (const auto& e : *a) {
    const auto v = e.value_exact<std::int64_t>();
    if (!v || *v < 0 || *v > 7) fail(key, "priorities are 0 to 7");
    mask |= static_cast<std::uint8_t>(1u << *v);
  }
  return mask;
}

std::string TomlReader::bound(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace uroce::config
