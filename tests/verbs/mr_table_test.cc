/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/mr_table.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <vector>

#include "transport/types.h"
#include "verbs/odp.h"

namespace uroce::verbs {
namespace {

namespace acc = transport::access;
using transport::MemError;

TEST(MrTable, KeysAreUnpredictableAndDistinct) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(64);
  std::set<std::uint32_t> keys;
  std::set<std::uint32_t> low_bytes;
  for (int i = 0; i < 200; ++i) {
    MrInfo mr;
    ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x1000, acc::kLocalWrite, &mr), 0);
    EXPECT_NE(mr.lkey, 0u);
    keys.insert(mr.lkey);
    low_bytes.insert(mr.lkey & 0xFF);
  }
  EXPECT_EQ(keys.size(), 200u);
  EXPECT_GT(low_bytes.size(), 100u) << "the key byte must vary";
}

TEST(MrTable, ReregChangesPdTranslationAndAccessButNotTheKeys) {
  int quiesced = 0;
  MrTable t([&] { ++quiesced; });
  std::vector<std::uint8_t> a(4096), b(8192);
  MrInfo mr;
  ASSERT_EQ(t.reg(7, a.data(), a.size(), 0x1000, acc::kLocalWrite | acc::kRemoteWrite, &mr), 0);
  MrTable::Change pd;
  pd.pd = true;
  pd.new_pd = 8;
  ASSERT_EQ(t.rereg(mr.lkey, pd), 0);
  EXPECT_EQ(quiesced, 1) << "the engine no longer holds the old view";
  EXPECT_EQ(t.lookup(7, mr.rkey, 0x1000, 8, acc::kRemoteWrite).error, MemError::kBadKey);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x1000, 8, acc::kRemoteWrite).ptr, a.data());
  MrTable::Change move;
  move.translation = true;
  move.addr = b.data();
  move.length = b.size();
  move.iova = 0x9000;
  ASSERT_EQ(t.rereg(mr.lkey, move), 0);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x1000, 8, acc::kRemoteWrite).error, MemError::kBounds);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x9000 + 8000, 8, acc::kRemoteWrite).ptr, b.data() + 8000);
  MrTable::Change ro;
  ro.access = true;
  ro.flags = acc::kRemoteRead;
  ASSERT_EQ(t.rereg(mr.lkey, ro), 0);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x9000, 8, acc::kRemoteWrite).error, MemError::kAccess);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x9000, 8, acc::kRemoteRead).ptr, b.data());
  // Remote write without local write, or an unknown key: EINVAL, nothing changes.
  ro.flags = acc::kRemoteWrite;
  EXPECT_EQ(t.rereg(mr.lkey, ro), EINVAL);
  EXPECT_EQ(t.rereg(mr.lkey ^ 0x100, pd), EINVAL);
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x9000, 8, acc::kRemoteRead).ptr, b.data());
}

TEST(MrTable, LookupChecksPdBoundsAndAccess) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(4096);
  MrInfo mr;
  ASSERT_EQ(t.reg(7, buf.data(), buf.size(), 0x10000, acc::kLocalWrite | acc::kRemoteRead, &mr), 0);
  // The IOVA space maps onto the buffer.
  auto ok = t.lookup(7, mr.rkey, 0x10000 + 100, 50, acc::kRemoteRead);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.ptr, buf.data() + 100);
  EXPECT_TRUE(t.lookup(7, mr.rkey, 0x10000, 4096, 0));
  EXPECT_EQ(t.lookup(8, mr.rkey, 0x10000, 8, 0).error, MemError::kBadKey) << "other PD";
  EXPECT_EQ(t.lookup(7, mr.rkey ^ 1, 0x10000, 8, 0).error, MemError::kBadKey) << "wrong key byte";
  EXPECT_EQ(t.lookup(7, mr.rkey, 0x10000 + 4090, 8, 0).error, MemError::kBounds);
  EXPECT_EQ(t.lookup(7, mr.rkey, 0xFFFF, 8, 0).error, MemError::kBounds);
  EXPECT_EQ(t.lookup(7, mr.rkey, 0x10000 + 4096, 0xFFFFFFFFFFFFF000ull, 0).error, MemError::kBounds)
      << "no wrap-around";
  EXPECT_EQ(t.lookup(7, mr.rkey, 0x10000, 8, acc::kRemoteWrite).error, MemError::kAccess);
  EXPECT_EQ(t.lookup(7, 0, 0, 0, 0).error, MemError::kBadKey);
}

TEST(MrTable, RemoteWriteWithoutLocalWriteIsRefused) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(64);
  MrInfo mr;
  EXPECT_EQ(t.reg(1, buf.data(), 64, 0, acc::kRemoteWrite, &mr), EINVAL);
  EXPECT_EQ(t.reg(1, buf.data(), 64, 0, acc::kRemoteAtomic, &mr), EINVAL);
  EXPECT_EQ(t.reg(1, nullptr, 64, 0, acc::kLocalWrite, &mr), EINVAL);
}

TEST(MrTable, DeregistrationWaitsForTheEngineAndKillsTheKey) {
  int quiesced = 0;
  MrTable t([&] { ++quiesced; });
  std::vector<std::uint8_t> buf(64);
  MrInfo mr;
  ASSERT_EQ(t.reg(1, buf.data(), 64, 0, acc::kLocalWrite, &mr), 0);
  ASSERT_EQ(t.dereg(mr.lkey), 0);
  EXPECT_EQ(quiesced, 1);
  EXPECT_EQ(t.lookup(1, mr.lkey, 0, 8, 0).error, MemError::kBadKey);
  EXPECT_EQ(t.dereg(mr.lkey), EINVAL) << "twice";
  // The slot is reused under another key; the old one stays dead (unless
  // its random byte repeats, 1 in 256).
  MrInfo again;
  ASSERT_EQ(t.reg(1, buf.data(), 64, 0, acc::kLocalWrite, &again), 0);
  EXPECT_EQ(again.lkey >> 8, mr.lkey >> 8);
  if ((again.lkey & 0xFF) != (mr.lkey & 0xFF)) {
    EXPECT_FALSE(t.lookup(1, mr.lkey, 0, 8, 0));
  }
}

TEST(MrTable, AFullTableSaysEnomem) {
  MrTable t(nullptr);
  std::uint8_t b;
  MrInfo mr;
  for (std::uint32_t i = 1; i < MrTable::kMaxMr; ++i) ASSERT_EQ(t.reg(1, &b, 1, 0, 0, &mr), 0);
  EXPECT_EQ(t.reg(1, &b, 1, 0, 0, &mr), ENOMEM);
}

// Three pages: read-write, read-only, then one unmapped. Unmapped at the
// end of the test.
struct ThreePages {
  ThreePages() {
    page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = static_cast<std::uint8_t*>(p);
    mprotect(base + page, page, PROT_READ);
    munmap(base + 2 * page, page);
  }
  ~ThreePages() { munmap(base, 2 * page); }
  std::uint64_t at(std::size_t offset) const {
    return reinterpret_cast<std::uint64_t>(base) + offset;
  }
  std::size_t page = 0;
  std::uint8_t* base = nullptr;
};

TEST(MrTable, OnDemandLookupsFailWhereTheProcessHasNoMapping) {
  if (!odp::available()) GTEST_SKIP() << "no MADV_POPULATE_* in this kernel";
  MrTable t(nullptr);
  ThreePages m;
  const unsigned all = acc::kLocalWrite | acc::kRemoteWrite | acc::kRemoteRead;
  MrInfo mr;
  ASSERT_EQ(t.reg(1, m.base, 3 * m.page, m.at(0), all, &mr, true), 0);
  EXPECT_TRUE(t.lookup(1, mr.rkey, m.at(0), m.page, acc::kRemoteWrite));
  EXPECT_TRUE(t.lookup(1, mr.rkey, m.at(m.page), m.page, acc::kRemoteRead));
  EXPECT_EQ(t.lookup(1, mr.rkey, m.at(m.page - 4), 8, acc::kRemoteWrite).error,
            MemError::kNotMapped)
      << "half of it read-only";
  EXPECT_EQ(t.lookup(1, mr.rkey, m.at(2 * m.page), 1, acc::kRemoteRead).error,
            MemError::kNotMapped);
  EXPECT_EQ(t.lookup(1, mr.rkey, m.at(0), 3 * m.page, 0).error, MemError::kNotMapped);
}

TEST(MrTable, AnImplicitRegionSpansTheAddressSpaceAndChecksEveryAccess) {
  if (!odp::available()) GTEST_SKIP() << "no MADV_POPULATE_* in this kernel";
  MrTable t(nullptr);
  ThreePages m;
  MrInfo mr;
  EXPECT_EQ(t.reg(1, nullptr, MrTable::kImplicitLength, 0, acc::kLocalWrite, &mr), EINVAL)
      << "only on demand";
  EXPECT_EQ(t.reg(1, nullptr, MrTable::kImplicitLength, 0x1000, acc::kLocalWrite, &mr, true),
            EINVAL)
      << "the IOVA is the address";
  ASSERT_EQ(t.reg(1, nullptr, MrTable::kImplicitLength, 0,
                  acc::kLocalWrite | acc::kRemoteWrite | acc::kRemoteRead, &mr, true),
            0);
  const auto ok = t.lookup(1, mr.rkey, m.at(8), 100, acc::kRemoteWrite);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.ptr, m.base + 8);
  EXPECT_EQ(t.lookup(1, mr.rkey, m.at(2 * m.page), 8, acc::kRemoteRead).error,
            MemError::kNotMapped);
  EXPECT_EQ(t.lookup(1, mr.rkey, 0, 8, acc::kRemoteRead).error, MemError::kNotMapped) << "null";
  EXPECT_EQ(t.lookup(1, mr.rkey, 0xFFFF800000000000ull, 8, acc::kRemoteRead).error,
            MemError::kNotMapped)
      << "kernel half";
  EXPECT_EQ(t.lookup(1, mr.rkey, ~0ull - 3, 8, acc::kRemoteRead).error, MemError::kBounds)
      << "no wrap-around";
  EXPECT_EQ(t.lookup(2, mr.rkey, m.at(0), 8, 0).error, MemError::kBadKey) << "other PD";
}

TEST(MrTable, AdviceChecksKeysRangesAndAccessAsIbvAdviseMrSays) {
  if (!odp::available()) GTEST_SKIP() << "no MADV_POPULATE_* in this kernel";
  MrTable t(nullptr);
  ThreePages m;
  MrInfo odp_ro;
  MrInfo odp_rw;
  MrInfo pinned;
  ASSERT_EQ(t.reg(1, m.base, 3 * m.page, m.at(0), 0, &odp_ro, true), 0);
  ASSERT_EQ(t.reg(1, m.base, 3 * m.page, m.at(0), acc::kLocalWrite, &odp_rw, true), 0);
  ASSERT_EQ(t.reg(1, m.base, m.page, m.at(0), acc::kLocalWrite, &pinned), 0);
  EXPECT_EQ(t.advise(1, odp_rw.lkey, m.at(0), m.page, true, true), 0);
  EXPECT_EQ(t.advise(1, odp_ro.lkey, m.at(0), 2 * m.page, false, true), 0);
  EXPECT_EQ(t.advise(1, odp_ro.lkey, m.at(0), m.page, true, true), EPERM) << "not writable";
  EXPECT_EQ(t.advise(1, pinned.lkey, m.at(0), m.page, false, true), ENOENT) << "not ODP";
  EXPECT_EQ(t.advise(2, odp_rw.lkey, m.at(0), m.page, false, true), EFAULT) << "other PD";
  EXPECT_EQ(t.advise(1, odp_rw.lkey ^ 1, m.at(0), m.page, false, true), EFAULT) << "bad key";
  EXPECT_EQ(t.advise(1, odp_rw.lkey, m.at(0), 4 * m.page, false, true), EFAULT) << "bounds";
  EXPECT_EQ(t.advise(1, odp_rw.lkey, m.at(2 * m.page), 8, false, true), EFAULT) << "unmapped";
  EXPECT_EQ(t.advise(1, odp_rw.lkey, m.at(2 * m.page), 8, false, false), 0) << "no fault";
  EXPECT_EQ(t.advise(1, odp_rw.lkey, m.at(m.page), 8, true, true), EFAULT) << "read-only page";
}

}  // namespace
}  // namespace uroce::verbs
