/* SPDX-License-Identifier: BSD-3-Clause */
// The typed TOML reader both uroce's configuration and uroce-switch's file
// use: what each getter accepts, and errors that name the key as the user
// wrote it.

#include "config/toml_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace uroce::config {
namespace {

toml::table parse(const std::string& text) {
  std::string error;
  auto t = parse_toml(text, "t.toml", &error);
  EXPECT_TRUE(t) << error;
  return t ? *t : toml::table{};
}

// What `read` throws, or "" when it does not.
template <typename F>
std::string error_of(F read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TomlReader, RefusesUnknownKeysNamingFileAndKey) {
  const toml::table root = parse("[pfc]\nenabled = true\nenable = true\n");
  const KeySource source{"t.toml", {}};
  const TomlReader r(root, source);
  EXPECT_EQ(error_of([&] { r.only({"dcqcn"}); }), "t.toml: pfc: unknown key");
  const auto pfc = r.table("pfc");
  ASSERT_TRUE(pfc);
  EXPECT_EQ(error_of([&] { pfc->only({"enabled"}); }), "t.toml: pfc.enable: unknown key");
  EXPECT_EQ(error_of([&] { pfc->only({"enabled", "enable"}); }), "");
}

TEST(TomlReader, KeysFromTheEnvironmentNameTheVariable) {
  const toml::table root = parse("[pfc]\nxoff_kb = 0\nquanta = 0\n");
  const KeySource source{"t.toml", {{"pfc.xoff_kb", "UROCE_PFC_XOFF_KB"}}};
  const auto pfc = TomlReader(root, source).table("pfc");
  ASSERT_TRUE(pfc);
  EXPECT_EQ(error_of([&] { pfc->number<std::uint32_t>("xoff_kb", 512, 1, 1024); }),
            "UROCE_PFC_XOFF_KB (pfc.xoff_kb): must be between 1 and 1024");
  EXPECT_EQ(error_of([&] { pfc->number<std::uint16_t>("quanta", 1, 1, 0xFFFF); }),
            "t.toml: pfc.quanta: must be between 1 and 65535");
}

TEST(TomlReader, NumbersTakeTheirDefaultAndKeepToTheirRange) {
  const toml::table root = parse(
      "i = 7\nf = 0.25\nbig = 9007199254740993\nneg = -1\nhalf = 0.5\nnan = nan\ninf = inf\n"
      "s = \"7\"\n");
  const KeySource source{"t.toml", {}};
  const TomlReader r(root, source);
  EXPECT_EQ(r.number<std::uint8_t>("i", 3, 0, 7), 7);
  EXPECT_EQ(r.number<std::uint8_t>("missing", 3, 0, 7), 3);
  EXPECT_DOUBLE_EQ(r.number<double>("f", 0, 0, 1), 0.25);
  EXPECT_DOUBLE_EQ(r.number<double>("i", 0, 0, 10), 7.0) << "an integer is a number";
  EXPECT_EQ(r.number<std::uint64_t>("big", 1, 0, UINT64_MAX), 9007199254740993u)
      << "exact past 2^53";
  EXPECT_EQ(error_of([&] { r.number<std::uint8_t>("i", 0, 0, 6); }),
            "t.toml: i: must be between 0 and 6");
  EXPECT_EQ(error_of([&] { r.number<std::uint64_t>("neg", 0, 0, UINT64_MAX); }),
            "t.toml: neg: must be between 0 and 18446744073709551615");
  EXPECT_EQ(error_of([&] { r.number<unsigned>("half", 0, 0, 1); }),
            "t.toml: half: expected an integer");
  EXPECT_EQ(error_of([&] { r.number<unsigned>("s", 0, 0, 10); }), "t.toml: s: expected an integer");
  EXPECT_EQ(error_of([&] { r.number<double>("s", 0, 0, 1); }), "t.toml: s: expected a number");
  EXPECT_EQ(error_of([&] { r.number<double>("i", 0, 0, 1); }),
            "t.toml: i: must be between 0 and 1");
  EXPECT_EQ(error_of([&] { r.number<double>("nan", 0, 0, 1); }), "t.toml: nan: expected a number");
  EXPECT_EQ(error_of([&] { r.number("inf"); }), "t.toml: inf: expected a number");
  EXPECT_EQ(r.number("half"), 0.5);
  EXPECT_EQ(r.number("missing"), std::nullopt);
}

TEST(TomlReader, WholeNumbersAreZeroOrMore) {
  const toml::table root = parse("a = 0\nb = -1\nc = 1.0\n");
  const KeySource source{"t.toml", {}};
  const TomlReader r(root, source);
  EXPECT_EQ(r.whole("a"), 0u);
  EXPECT_EQ(r.whole("missing"), std::nullopt);
  EXPECT_EQ(error_of([&] { r.whole("b"); }), "t.toml: b: expected a whole number, 0 or more");
  EXPECT_EQ(error_of([&] { r.whole("c"); }), "t.toml: c: expected a whole number, 0 or more");
}

TEST(TomlReader, BooleansAndStrings) {
  const toml::table root =
      parse("yes = true\nname = \"x\"\none = \"a\"\nmany = [\"a\", \"b\"]\nmixed = [\"a\", 1]\n");
  const KeySource source{"t.toml", {}};
  const TomlReader r(root, source);
  EXPECT_TRUE(r.boolean("yes", false));
  EXPECT_TRUE(r.boolean("missing", true));
  EXPECT_EQ(r.boolean("missing"), std::nullopt);
  EXPECT_EQ(error_of([&] { r.boolean("name"); }), "t.toml: name: expected true or false");
  EXPECT_EQ(r.string("name"), "x");
  EXPECT_EQ(error_of([&] { r.string("yes"); }), "t.toml: yes: expected a string");
  EXPECT_EQ(r.strings("one"), std::vector<std::string>{"a"});
  EXPECT_EQ(r.strings("many"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.strings("missing").empty());
  EXPECT_EQ(error_of([&] { r.strings("yes"); }),
            "t.toml: yes: expected a string or an array of strings");
  EXPECT_EQ(error_of([&] { r.strings("mixed"); }), "t.toml: mixed: expected an array of strings");
}

TEST(TomlReader, PrioritiesBecomeAMask) {
  const toml::table root = parse("two = [3, 5]\nnone = []\nbad = [8]\nnot = 3\n");
  const KeySource source{"t.toml", {}};
  const TomlReader r(root, source);
  EXPECT_EQ(r.priorities("two", 0), 0x28);
  EXPECT_EQ(r.priorities("missing", 0x08), 0x08);
  EXPECT_EQ(error_of([&] { r.priorities("none", 0); }),
            "t.toml: none: expected a list of priorities, like [3]");
  EXPECT_EQ(r.priorities("none", 0xFF, EmptyList::kAllowed), 0);
  EXPECT_EQ(error_of([&] { r.priorities("bad", 0); }), "t.toml: bad: priorities are 0 to 7");
  EXPECT_EQ(error_of([&] { r.priorities("not", 0, EmptyList::kAllowed); }),
            "t.toml: not: expected a list of priorities, like [3]");
}

TEST(TomlReader, NestedTablesNameTheirPath) {
  const toml::table root = parse(
      "[[port]]\ndevice = \"a\"\n[[port]]\ndevice = \"b\"\ntx = { loss = 2 }\n"
      "[switch]\nseed = 1\n");
  const KeySource source{"sw.toml", {}};
  const TomlReader r(root, source);
  const auto ports = r.tables("port");
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[1].string("device"), "b");
  const auto tx = ports[1].table("tx");
  ASSERT_TRUE(tx);
  EXPECT_EQ(error_of([&] { tx->number<double>("loss", 0, 0, 1); }),
            "sw.toml: port[1].tx.loss: must be between 0 and 1");
  EXPECT_FALSE(ports[0].table("tx"));
  EXPECT_TRUE(r.tables("queue").empty());
  EXPECT_EQ(error_of([&] { r.tables("switch"); }),
            "sw.toml: switch: must be an array of tables ([[switch]])");
  EXPECT_EQ(error_of([&] { ports[0].table("device"); }),
            "sw.toml: port[0].device: must be a table");
  const toml::table mixed = parse("queue = [{ priority = 1 }, 2]\n");
  EXPECT_EQ(error_of([&] { TomlReader(mixed, source).tables("queue"); }),
            "sw.toml: queue[1]: must be a table");
}

TEST(TomlReader, SyntaxErrorsGiveLineAndColumn) {
  std::string error;
  EXPECT_FALSE(parse_toml("a = 1\nb = \"open\n", "t.toml", &error));
  EXPECT_EQ(error.rfind("t.toml:2:", 0), 0u) << error;
}

}  // namespace
}  // namespace uroce::config
