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
  for (std::uint32_t i = 1; i < MrTable::kSlots; ++i) ASSERT_EQ(t.reg(1, &b, 1, 0, 0, &mr), 0);
  EXPECT_EQ(t.reg(1, &b, 1, 0, 0, &mr), ENOMEM);
}

// Three pages: read-write, read-only, then one no access reaches
// (PROT_NONE: an unmapped hole could be mapped again by another thread
// before the lookup). Unmapped at the end of the test.
struct ThreePages {
  ThreePages() {
    page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = static_cast<std::uint8_t*>(p);
    mprotect(base + page, page, PROT_READ);
    mprotect(base + 2 * page, page, PROT_NONE);
  }
  ~ThreePages() { munmap(base, 3 * page); }
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

// Memory windows (IBA 10.6.7). QP 0x11 binds in PD 1 unless said.
constexpr std::uint32_t kQpn = 0x11;
constexpr unsigned kBindable = acc::kLocalWrite | acc::kMwBind;

transport::MwBind bind_of(const MrTable::MwInfo& mw, std::uint32_t low, const MrInfo& mr,
                          std::uint64_t addr, std::uint64_t length, unsigned access) {
  return {mw.index, mw.id, mw.index << 8 | low, mr.lkey, addr, length, access};
}

TEST(MrTable, WindowKeysShareTheRegionsKeySpace) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(64);
  std::set<std::uint32_t> slots;
  for (int i = 0; i < 50; ++i) {
    MrInfo mr;
    MrTable::MwInfo mw;
    ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x1000, kBindable, &mr), 0);
    ASSERT_EQ(t.alloc_mw(1, 1 + i % 2, &mw), 0);
    EXPECT_EQ(mw.rkey >> 8, mw.index);
    EXPECT_TRUE(slots.insert(mr.lkey >> 8).second);
    EXPECT_TRUE(slots.insert(mw.rkey >> 8).second) << "an MW key never names a region";
  }
  MrTable::MwInfo mw;
  EXPECT_EQ(t.alloc_mw(1, 3, &mw), EINVAL);
  EXPECT_EQ(t.alloc_mw(1, 0, &mw), EINVAL);
}

TEST(MrTable, ABoundWindowReachesOnlyItsRangeWithItsAccess) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(4096);
  MrInfo mr;
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x10000,
                  kBindable | acc::kRemoteWrite | acc::kRemoteRead, &mr),
            0);
  MrTable::MwInfo mw;
  ASSERT_EQ(t.alloc_mw(1, 1, &mw), 0);
  // Unbound: the key reaches nothing.
  EXPECT_EQ(t.lookup_remote(1, kQpn, mw.rkey, 0x10000, 8, acc::kRemoteRead).error,
            MemError::kBadKey);
  const auto b = bind_of(mw, 0x42, mr, 0x10100, 256, acc::kRemoteRead);
  ASSERT_TRUE(t.bind_mw(1, kQpn, b));
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x10100, 256, acc::kRemoteRead).ptr,
            buf.data() + 0x100);
  // Any QP of the PD may use a type 1 window; another PD may not.
  EXPECT_TRUE(t.lookup_remote(1, kQpn + 1, b.new_rkey, 0x10100, 8, acc::kRemoteRead));
  EXPECT_EQ(t.lookup_remote(2, kQpn, b.new_rkey, 0x10100, 8, acc::kRemoteRead).error,
            MemError::kBadKey);
  EXPECT_EQ(t.lookup_remote(1, kQpn, mw.rkey, 0x10100, 8, acc::kRemoteRead).error,
            MemError::kBadKey)
      << "the old key died with the bind";
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x100FF, 8, acc::kRemoteRead).error,
            MemError::kBounds);
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x10100, 257, acc::kRemoteRead).error,
            MemError::kBounds);
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x10100, 8, acc::kRemoteWrite).error,
            MemError::kAccess)
      << "the region's remote write is not the window's";
  EXPECT_EQ(t.lookup(1, b.new_rkey, 0x10100, 8, 0).error, MemError::kBadKey)
      << "a window has no local key";
  // The region is held while the window is bound.
  EXPECT_EQ(t.dereg(mr.lkey), EBUSY);
  EXPECT_EQ(t.rereg(mr.lkey, MrTable::Change{}), EBUSY);
  // Type 1: a bind of length 0 unbinds, and a type 1 window is never
  // invalidated (o10-37.2.26).
  EXPECT_FALSE(t.invalidate(1, kQpn, b.new_rkey, false));
  const auto unbind = bind_of(mw, 0x43, mr, 0, 0, 0);
  ASSERT_TRUE(t.bind_mw(1, kQpn, unbind));
  EXPECT_EQ(t.lookup_remote(1, kQpn, unbind.new_rkey, 0x10100, 8, acc::kRemoteRead).error,
            MemError::kBadKey);
  EXPECT_EQ(t.dereg(mr.lkey), 0);
  EXPECT_EQ(t.dealloc_mw(mw.index, mw.id), 0);
  EXPECT_EQ(t.dealloc_mw(mw.index, mw.id), EINVAL);
}

TEST(MrTable, BindsBreakingIbaRulesAreRefused) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(4096);
  MrInfo plain, bindable, read_only;
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x10000, acc::kLocalWrite, &plain), 0);
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x10000, kBindable, &bindable), 0);
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x10000, acc::kMwBind, &read_only), 0);
  MrTable::MwInfo mw, other_pd;
  ASSERT_EQ(t.alloc_mw(1, 2, &mw), 0);
  ASSERT_EQ(t.alloc_mw(2, 2, &other_pd), 0);
  // C10-73: the region must allow binds.
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 1, plain, 0x10000, 64, acc::kRemoteRead)));
  // C10-74: remote write needs the region's local write.
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 1, read_only, 0x10000, 64, acc::kRemoteWrite)));
  // C10-75: inside the region.
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 1, bindable, 0xFFF0, 64, acc::kRemoteRead)));
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 1, bindable, 0x10FC0, 65, acc::kRemoteRead)));
  // C10-72: one PD.
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(other_pd, 1, bindable, 0x10000, 64, acc::kRemoteRead)));
  // o10-37.2.40: a type 2 window is not bound to nothing.
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 1, bindable, 0x10000, 0, 0)));
  // The key's slot is not the program's to choose.
  auto moved = bind_of(mw, 1, bindable, 0x10000, 64, acc::kRemoteRead);
  moved.new_rkey ^= 1u << 8;
  EXPECT_FALSE(t.bind_mw(1, kQpn, moved));
  // A freed window's slot is not reached by its old binds.
  auto stale = bind_of(mw, 1, bindable, 0x10000, 64, acc::kRemoteRead);
  stale.mw_id ^= 1;
  EXPECT_FALSE(t.bind_mw(1, kQpn, stale));
  // All good, once; o10-37.2.30: not again while bound.
  ASSERT_TRUE(t.bind_mw(1, kQpn, bind_of(mw, 1, bindable, 0x10000, 64, acc::kRemoteWrite)));
  EXPECT_FALSE(t.bind_mw(1, kQpn, bind_of(mw, 2, bindable, 0x10000, 64, acc::kRemoteWrite)));
}

TEST(MrTable, AType2WindowBelongsToItsQpUntilInvalidated) {
  MrTable t(nullptr);
  std::vector<std::uint8_t> buf(4096);
  MrInfo mr;
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x10000, kBindable, &mr), 0);
  MrTable::MwInfo mw;
  ASSERT_EQ(t.alloc_mw(1, 2, &mw), 0);
  const auto b = bind_of(mw, 7, mr, 0x10000, 4096, acc::kRemoteWrite | acc::kRemoteAtomic);
  ASSERT_TRUE(t.bind_mw(1, kQpn, b));
  EXPECT_TRUE(t.lookup_remote(1, kQpn, b.new_rkey, 0x10008, 8, acc::kRemoteAtomic));
  EXPECT_EQ(t.lookup_remote(1, kQpn + 1, b.new_rkey, 0x10008, 8, acc::kRemoteAtomic).error,
            MemError::kBadKey);
  // Remote invalidation only through its QP; a region is never invalidated.
  EXPECT_FALSE(t.invalidate(1, kQpn + 1, b.new_rkey, true));
  EXPECT_FALSE(t.invalidate(1, kQpn, mr.rkey, true));
  EXPECT_FALSE(t.invalidate(1, kQpn, b.new_rkey ^ 1, true)) << "a stale key";
  EXPECT_TRUE(t.invalidate(1, kQpn, b.new_rkey, true));
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x10008, 8, acc::kRemoteAtomic).error,
            MemError::kBadKey);
  EXPECT_FALSE(t.invalidate(1, kQpn, b.new_rkey, false)) << "already free";
  EXPECT_EQ(t.dereg(mr.lkey), 0) << "invalidation let the region go";
}

TEST(MrTable, DestroyingAQpFreesTheType2WindowsBoundToIt) {
  int quiesced = 0;
  MrTable t([&] { ++quiesced; });
  std::vector<std::uint8_t> buf(64);
  MrInfo mr;
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x1000, kBindable, &mr), 0);
  MrTable::MwInfo mine, other;
  ASSERT_EQ(t.alloc_mw(1, 2, &mine), 0);
  ASSERT_EQ(t.alloc_mw(1, 2, &other), 0);
  const auto b1 = bind_of(mine, 1, mr, 0x1000, 64, acc::kRemoteRead);
  const auto b2 = bind_of(other, 1, mr, 0x1000, 64, acc::kRemoteRead);
  ASSERT_TRUE(t.bind_mw(1, kQpn, b1));
  ASSERT_TRUE(t.bind_mw(1, kQpn + 1, b2));
  t.release_qp(1, kQpn);
  EXPECT_EQ(quiesced, 1);
  EXPECT_EQ(t.lookup_remote(1, kQpn, b1.new_rkey, 0x1000, 8, acc::kRemoteRead).error,
            MemError::kBadKey)
      << "a later QP with the number reaches nothing";
  EXPECT_TRUE(t.lookup_remote(1, kQpn + 1, b2.new_rkey, 0x1000, 8, acc::kRemoteRead));
  EXPECT_EQ(t.dereg(mr.lkey), EBUSY) << "the other QP's window still holds the region";
  // The freed window may be bound again, and its region counted once.
  ASSERT_TRUE(t.bind_mw(1, kQpn + 1, bind_of(mine, 2, mr, 0x1000, 64, acc::kRemoteRead)));
  EXPECT_EQ(t.dealloc_mw(mine.index, mine.id), 0);
  EXPECT_TRUE(t.invalidate(1, kQpn + 1, b2.new_rkey, true));
  EXPECT_EQ(t.dereg(mr.lkey), 0);
}

TEST(MrTable, DeallocatingABoundWindowReleasesItsRegionAfterTheEngine) {
  int quiesced = 0;
  MrTable t([&] { ++quiesced; });
  std::vector<std::uint8_t> buf(64);
  MrInfo mr;
  ASSERT_EQ(t.reg(1, buf.data(), buf.size(), 0x1000, kBindable, &mr), 0);
  MrTable::MwInfo mw;
  ASSERT_EQ(t.alloc_mw(1, 2, &mw), 0);
  const auto b = bind_of(mw, 9, mr, 0x1000, 64, acc::kRemoteRead);
  ASSERT_TRUE(t.bind_mw(1, kQpn, b));
  ASSERT_EQ(t.dealloc_mw(mw.index, mw.id), 0);
  EXPECT_EQ(quiesced, 1);
  EXPECT_EQ(t.lookup_remote(1, kQpn, b.new_rkey, 0x1000, 8, acc::kRemoteRead).error,
            MemError::kBadKey);
  EXPECT_EQ(t.dereg(mr.lkey), 0);
}

}  // namespace
}  // namespace uroce::verbs
