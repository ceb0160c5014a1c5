/* SPDX-License-Identifier: BSD-3-Clause */
// The GID table keeps each address at its index while the interface's
// addresses come and go, as the kernel's GID cache does.
#include "verbs/gid_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace uroce::verbs {
namespace {

wire::IpAddr ip(const char* text) { return *wire::IpAddr::parse(text); }

const wire::IpAddr kLinkLocal = ip("fe80::1");
const wire::IpAddr kEmpty{};

TEST(GidTable, StartsWithTheLinkLocalGidAndTheAddressesInOrder) {
  const GidTable t(kLinkLocal, {ip("10.0.0.1"), ip("fd00::1")}, 16);
  EXPECT_EQ(t.entries(), (std::vector{kLinkLocal, ip("10.0.0.1"), ip("fd00::1")}));
  EXPECT_EQ(t.capacity(), 16u);
  // The engine's order: own addresses first, the link-local one last.
  EXPECT_EQ(t.addresses(), (std::vector{ip("10.0.0.1"), ip("fd00::1"), kLinkLocal}));
}

TEST(GidTable, ARemovedAddressLeavesItsEntryEmptyAndTheOthersKeepTheirIndex) {
  GidTable t(kLinkLocal, {ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")}, 16);
  EXPECT_TRUE(t.update({ip("10.0.0.1"), ip("10.0.0.3")}));
  EXPECT_EQ(t.entries(), (std::vector{kLinkLocal, ip("10.0.0.1"), kEmpty, ip("10.0.0.3")}));
  EXPECT_EQ(t.addresses(), (std::vector{ip("10.0.0.1"), ip("10.0.0.3"), kLinkLocal}));
  // The same set again changes nothing.
  EXPECT_FALSE(t.update({ip("10.0.0.3"), ip("10.0.0.1")}));
}

TEST(GidTable, ANewAddressTakesTheLowestEmptyEntry) {
  GidTable t(kLinkLocal, {ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")}, 16);
  ASSERT_TRUE(t.update({ip("10.0.0.3")}));
  EXPECT_TRUE(t.update({ip("10.0.0.3"), ip("fd00::9"), ip("10.0.0.7"), ip("10.0.0.8")}));
  EXPECT_EQ(t.entries(), (std::vector{kLinkLocal, ip("fd00::9"), ip("10.0.0.7"), ip("10.0.0.3"),
                                      ip("10.0.0.8")}));
}

TEST(GidTable, RemovingTheLastEntriesShortensTheTable) {
  GidTable t(kLinkLocal, {ip("10.0.0.1"), ip("10.0.0.2")}, 16);
  EXPECT_TRUE(t.update({}));
  EXPECT_EQ(t.entries(), (std::vector{kLinkLocal}));
  EXPECT_EQ(t.addresses(), (std::vector{kLinkLocal}));
}

TEST(GidTable, WhatDoesNotFitIsLeftOutAndCounted) {
  GidTable t(kLinkLocal, {ip("10.0.0.1")}, 3);
  EXPECT_TRUE(t.update({ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"), ip("10.0.0.4")}));
  EXPECT_EQ(t.entries(), (std::vector{kLinkLocal, ip("10.0.0.1"), ip("10.0.0.2")}));
  EXPECT_EQ(t.left_out(), 2u);
  // A table made with more addresses than the minimum holds them all.
  const GidTable big(kLinkLocal, {ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")}, 2);
  EXPECT_EQ(big.capacity(), 4u);
  EXPECT_EQ(big.entries().size(), 4u);
}

}  // namespace
}  // namespace uroce::verbs
