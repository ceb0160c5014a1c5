/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Memory regions: the only way the transport reaches memory. A key is an
// index into the table (upper 24 bits) and 8 random bits, so keys are not
// guessable and a stale key rarely matches a reused slot. The engine looks
// keys up without locks; registration publishes an entry with release
// ordering, and deregistration returns only once the engine can no longer
// be using the region, so the program may free it at once.
//
// An on-demand paging (ODP) region is not promised to be mapped: each
// lookup asks the kernel (verbs/odp.h) and fails with kNotMapped rather
// than let the transport fault. An implicit ODP region covers the whole
// address space (IOVA = virtual address).

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "transport/memory.h"

namespace uroce::verbs {

/// Protection domain identifier.
using PdId = std::uint32_t;

struct MrInfo {
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

class MrTable {
 public:
  static constexpr std::uint32_t kMaxMr = 1u << 14;
  /// The length of an implicit ODP region (with a null address), as
  /// libibverbs spells it: SIZE_MAX.
  static constexpr std::uint64_t kImplicitLength = UINT64_MAX;

  /// `quiesce` runs once no engine iteration is in progress (it takes the
  /// engine lock); deregistration waits on it.
  explicit MrTable(std::function<void()> quiesce);

  /// Registers [addr, addr + length), seen by remote peers at `iova`, with
  /// the access flags (transport::access). Returns the keys, or errno:
  /// EINVAL for bad flags (remote write or atomic without local write, as
  /// IBA 10.6.3.1 requires), ENOMEM when the table is full. `on_demand`
  /// registers an ODP region; a null `addr` with kImplicitLength and IOVA
  /// 0 an implicit one.
  int reg(PdId pd, void* addr, std::uint64_t length, std::uint64_t iova, unsigned flags,
          MrInfo* out, bool on_demand = false);
  /// Deregisters; EINVAL for an unknown key.
  int dereg(std::uint32_t lkey);

  /// What ibv_rereg_mr changes of a region; the rest stays.
  struct Change {
    bool pd = false;
    PdId new_pd = 0;
    bool translation = false;
    void* addr = nullptr;
    std::uint64_t length = 0;
    std::uint64_t iova = 0;
    bool access = false;
    unsigned flags = 0;
  };
  /// Changes a region in place, keeping its keys. The region is out of
  /// the engine's reach while it changes (lookups miss, as for a bad key),
  /// so the program is not to use it meanwhile. EINVAL for an unknown key
  /// or bad flags.
  int rereg(std::uint32_t lkey, const Change& c);

  /// Lookups for the transport, checked against the PD, the bounds and the
  /// access flags (and, for an ODP region, the process's mappings).
  transport::MemRef lookup(PdId pd, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                           unsigned access) const;

  /// ibv_advise_mr on one SGE: pages [addr, addr + length) of the ODP
  /// region behind `lkey` in, for writing with `write`, unless `fault` is
  /// false. Returns 0 or errno as ibv_advise_mr(3) documents: EFAULT for an
  /// unknown key or a range outside the region (or, with `fault`, not
  /// mapped), ENOENT for a region that is not ODP, EPERM for `write` on a
  /// region without local write access.
  int advise(PdId pd, std::uint32_t lkey, std::uint64_t addr, std::uint64_t length, bool write,
             bool fault) const;

 private:
  struct Entry {
    std::atomic<std::uint32_t> key{0};  ///< 0: free
    PdId pd = 0;
    std::uintptr_t host = 0;  ///< an address, not a pointer: 0 for an implicit region
    std::uint64_t iova = 0;
    std::uint64_t length = 0;
    unsigned access = 0;
    bool on_demand = false;
  };
  /// The live entry behind `key` in `pd`, or null.
  const Entry* find(PdId pd, std::uint32_t key) const;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_;
  std::mutex mu_;  ///< registration and deregistration only
  std::function<void()> quiesce_;
};

/// What one QP may reach: its PD's regions.
class PdMemory : public transport::MemoryAccess {
 public:
  PdMemory(MrTable& table, PdId pd) : table_(table), pd_(pd) {}
  transport::MemRef local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                          unsigned access) override {
    return table_.lookup(pd_, lkey, addr, length, access);
  }
  transport::MemRef remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t length,
                           unsigned access) override {
    return table_.lookup(pd_, rkey, va, length, access);
  }
  bool invalidate(std::uint32_t) override {
    return false;  // memory windows and invalidation are not offered yet
  }

 private:
  MrTable& table_;
  PdId pd_;
};

}  // namespace uroce::verbs
