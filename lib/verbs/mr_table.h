/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Memory regions: the only way the transport reaches memory. A key is an
// index into the table (upper 24 bits) and 8 random bits, so keys are not
// guessable and a stale key rarely matches a reused slot. The engine looks
// keys up without locks; registration publishes an entry with release
// ordering, and deregistration returns only once the engine can no longer
// be using the region, so the program may free it at once.
//
// Memory windows (IBA 10.6.7) share the table, and so the key space: an
// MR key and an MW key never collide. A window is a slot of its own that,
// once bound, names a range of a region (its "parent") with access of its
// own; a type 2 window is then usable by one QP only. Binds and
// invalidations run on the engine thread, from the send queue, so the
// engine's lock-free lookups never race with them; allocation, freeing
// and deregistration run on program threads under the mutex and quiesce
// as deregistration does. A region with bound windows is not
// deregistered or changed (EBUSY, as the kernel answers).
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
#include "verbs/limits.h"

namespace uroce::verbs {

/// Protection domain identifier.
using PdId = std::uint32_t;

struct MrInfo {
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

class MrTable {
 public:
  static constexpr std::uint32_t kSlots = kMaxMrSlots;  ///< slot 0 is never handed out
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
  /// Deregisters; EINVAL for an unknown key, EBUSY while windows are
  /// bound to the region.
  int dereg(std::uint32_t lkey);

  /// A memory window as ibv_alloc_mw makes it.
  struct MwInfo {
    std::uint32_t rkey = 0;   ///< its key before any bind
    std::uint32_t index = 0;  ///< its slot (rkey >> 8, the part a bind keeps)
    std::uint32_t id = 0;     ///< tells this window from a later one in the slot
  };
  /// Allocates an unbound window of type 1 or 2 (IBV_MW_TYPE_*) in `pd`;
  /// EINVAL for another type, ENOMEM when the table is full.
  int alloc_mw(PdId pd, int type, MwInfo* out);
  /// Frees a window, bound or not; EINVAL if it is not live.
  int dealloc_mw(std::uint32_t index, std::uint32_t id);
  /// Binds (or, type 1 with length 0, unbinds) a window for `qpn` of `pd`
  /// on the engine thread; false if a rule of IBA 10.6.7 is broken.
  bool bind_mw(PdId pd, std::uint32_t qpn, const transport::MwBind& bind);
  /// Invalidates the type 2 window behind `rkey` (LOCAL_INV, or with
  /// `remote` a SEND_WITH_INV, which only the window's QP may send to);
  /// engine thread.
  bool invalidate(PdId pd, std::uint32_t qpn, std::uint32_t rkey, bool remote);
  /// Frees the type 2 windows bound to a QP being destroyed, so that none
  /// outlives it or serves a later QP with its number; returns once the
  /// engine can no longer reach memory through them.
  void release_qp(PdId pd, std::uint32_t qpn);

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
  /// access flags (and, for an ODP region, the process's mappings). A
  /// local key is a region's; a remote one may also be a bound window's,
  /// used by `qpn`.
  transport::MemRef lookup(PdId pd, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                           unsigned access) const;
  transport::MemRef lookup_remote(PdId pd, std::uint32_t qpn, std::uint32_t key, std::uint64_t addr,
                                  std::uint64_t length, unsigned access) const;

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
    std::uint32_t windows = 0;  ///< a region's bound windows (under mu_)
    // A window's; host, iova, length and access are its range once bound.
    std::uint8_t mw_type = 0;  ///< 0: a region; 1 or 2: a window
    /// Atomic: a QP's destruction frees its windows from a program thread
    /// while the engine may be looking them up.
    std::atomic<bool> bound{false};
    std::uint32_t mw_id = 0;
    std::uint32_t qpn = 0;     ///< a bound type 2 window's QP
    std::uint32_t parent = 0;  ///< a bound window's region's slot
  };
  /// A free slot, cleared and given to `pd` (under mu_); null when the
  /// table is full.
  Entry* take_slot(PdId pd, std::uint32_t* index);
  /// Gives the slot its new key, making it visible to lookups.
  static std::uint32_t publish(Entry& e, std::uint32_t index);
  /// The live entry behind `key` in `pd`, or null.
  const Entry* find(PdId pd, std::uint32_t key) const;
  transport::MemRef check(const Entry& e, std::uint64_t addr, std::uint64_t length,
                          unsigned access) const;
  /// Takes a bound window off its region (under mu_).
  void unbind(Entry& mw);
  std::uint32_t next_mw_id_ = 1;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_;
  std::mutex mu_;  ///< registration and deregistration only
  std::function<void()> quiesce_;
};

/// What one QP may reach: its PD's regions.
class PdMemory : public transport::MemoryAccess {
 public:
  PdMemory(MrTable& table, PdId pd) : table_(table), pd_(pd) {}
  /// The QP this is the memory of, for the windows bound to it.
  void set_qpn(std::uint32_t qpn) { qpn_ = qpn; }
  /// The QP goes: so do the windows bound to it.
  void release() { table_.release_qp(pd_, qpn_); }
  transport::MemRef local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                          unsigned access) override {
    return table_.lookup(pd_, lkey, addr, length, access);
  }
  transport::MemRef remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t length,
                           unsigned access) override {
    return table_.lookup_remote(pd_, qpn_, rkey, va, length, access);
  }
  bool invalidate(std::uint32_t rkey, bool remote) override {
    return table_.invalidate(pd_, qpn_, rkey, remote);
  }
  bool bind_mw(const transport::MwBind& bind) override { return table_.bind_mw(pd_, qpn_, bind); }

 private:
  MrTable& table_;
  PdId pd_;
  std::uint32_t qpn_ = 0;
};

}  // namespace uroce::verbs
