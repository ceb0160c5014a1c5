/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Memory regions (IBA 10.6): the program's memory, or device memory,
// registered in a PD under a pair of keys the engine copies through
// (mr_table.h). An on-demand paging region (access::kOnDemand) is checked
// against the process's mappings at every access instead of being pinned
// (verbs/odp.h); an implicit one (null address, kImplicitLength) spans the
// whole address space. An imported region (ibv_import_mr) stands for a
// region of another context's PD of the same protection.

#include <cstdint>
#include <memory>

#include "verbs/dm.h"
#include "verbs/mr_table.h"
#include "verbs/pd.h"

namespace uroce::verbs {

/// What ibv_rereg_mr changes (IBV_REREG_MR_CHANGE_*).
namespace rereg {
inline constexpr int kChangeTranslation = 1;
inline constexpr int kChangePd = 2;
inline constexpr int kChangeAccess = 4;
}  // namespace rereg

class Mr {
 public:
  /// Registers [addr, addr + length), seen by peers at `iova`. EINVAL for
  /// access bits a region cannot have (access::kRegion), a length of 0, a
  /// null address that is not an implicit ODP region, or what the table
  /// refuses (remote write or atomic without local write, IBA 10.6.3.1);
  /// ENOMEM when the table is full.
  static int reg(Pd& pd, void* addr, std::uint64_t length, std::uint64_t iova, unsigned access,
                 std::unique_ptr<Mr>* out);
  /// Registers [offset, offset + length) of device memory, zero-based.
  /// EINVAL for memory of another context, access without kZeroBased or
  /// beyond access::kDmRegion, a range outside the allocation, or remote
  /// atomics at an offset that is not 8-byte aligned (the responder
  /// checks an atomic's alignment in the region's zero-based space, so the
  /// memory behind it must align too). An empty region is allowed, as the
  /// kernel allows it on device memory.
  static int reg_dm(Pd& pd, Dm& dm, std::uint64_t offset, std::uint64_t length, unsigned access,
                    std::unique_ptr<Mr>* out);
  /// A region of `pd` standing for `orig`, which must be of the same
  /// protection (EINVAL otherwise).
  static int import(Pd& pd, Mr& orig, std::unique_ptr<Mr>* out);
  /// Deregisters, once the engine can no longer touch the region: EBUSY
  /// while windows are bound to it. An import shares the registration
  /// with its original, as the kernel's does: deregistering either ends it.
  static int destroy(std::unique_ptr<Mr>& mr);
  /// Drops an import, leaving the registration to its original.
  static void unimport(std::unique_ptr<Mr>& mr) { mr.reset(); }
  ~Mr();
  Mr(const Mr&) = delete;
  Mr& operator=(const Mr&) = delete;

  /// ibv_rereg_mr's argument checks: EINVAL for unknown change flags, a
  /// new translation without memory, access without kChangeAccess or
  /// beyond a region's, a new PD of another context, or a region on device
  /// memory (which the kernel keeps where it is).
  int check_rereg(int flags, const Pd* pd, const void* addr, std::uint64_t length,
                  unsigned access) const;
  /// Applies a checked change, keeping the keys; the table's errno.
  int rereg(int flags, Pd* pd, void* addr, std::uint64_t length, unsigned access);

  Pd& pd() const { return *pd_; }
  std::uint32_t lkey() const { return keys_.lkey; }
  std::uint32_t rkey() const { return keys_.rkey; }
  /// The address and length the program registered (null for device
  /// memory, which has no address the program knows).
  void* addr() const { return addr_; }
  std::uint64_t length() const { return length_; }
  bool imported() const { return imported_; }

 private:
  Mr(Pd& pd, const MrInfo& keys, void* addr, std::uint64_t length, Dm* dm, bool imported);
  Pd* pd_;
  MrInfo keys_;
  void* addr_;
  std::uint64_t length_;
  Dm* dm_;
  const bool imported_;
};

/// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)): a slot of
/// the device's MR table which, once bound, names a range of a region
/// with access of its own. Binding one is a send-queue WR the engine runs
/// in order with the QP's other WRs, so the rules of a bind are checked
/// there, and a broken one completes with IBV_WC_MW_BIND_ERR.
class Mw {
 public:
  /// A window of type 1 or 2; EINVAL for another type, ENOMEM when the
  /// table is full.
  static int alloc(Pd& pd, int type, std::unique_ptr<Mw>* out);
  /// Frees it, bound or not, once the engine can no longer reach memory
  /// through it.
  static int destroy(std::unique_ptr<Mw>& mw);
  ~Mw();
  Mw(const Mw&) = delete;
  Mw& operator=(const Mw&) = delete;

  /// The bind of this window for a WR of a QP of `ctx`: to have key `rkey`
  /// and cover [addr, addr + length) of `mr` with `access`; length 0
  /// unbinds. EINVAL for a window of another context, access beyond
  /// access::kWindow, or a region of another context or PD.
  int bind_request(const Context& ctx, std::uint32_t rkey, const Mr* mr, std::uint64_t addr,
                   std::uint64_t length, unsigned access, transport::MwBind* out) const;
  /// A type 1 window's next key, the device's to choose (IBA 10.6.7.2.1):
  /// its slot, and 8 random bits that differ from the current ones, so the
  /// old key stops working and the new one is not guessable.
  std::uint32_t next_type1_key() const;
  /// The key a posted bind gave it (ibv_bind_mw(3): at once).
  void set_rkey(std::uint32_t rkey) { rkey_ = rkey; }

  Pd& pd() const { return pd_; }
  int type() const { return type_; }
  std::uint32_t rkey() const { return rkey_; }

 private:
  Mw(Pd& pd, int type, const MrTable::MwInfo& info)
      : pd_(pd), type_(type), rkey_(info.rkey), index_(info.index), id_(info.id) {}
  Pd& pd_;
  const int type_;
  std::uint32_t rkey_;
  const std::uint32_t index_;  ///< its slot
  const std::uint32_t id_;     ///< tells it from a later window in the slot
};

}  // namespace uroce::verbs
