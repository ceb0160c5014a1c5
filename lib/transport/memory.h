/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// How the transport reaches memory: only through registered regions,
// looked up by key with bounds and access checks. lib/verbs implements
// this over its MR table; the transport never dereferences an address it
// did not get from here.

#include <cstdint>

#include "transport/types.h"

namespace uroce::transport {

/// Why a memory lookup failed.
enum class MemError : std::uint8_t {
  kNone,
  kBadKey,     ///< no such key, or not in this QP's protection domain
  kBounds,     ///< the range leaves the region
  kAccess,     ///< the region does not grant the access asked for
  kNotMapped,  ///< an on-demand paging region's range is not mapped for that access
};

/// A resolved range: host memory the caller may touch for `length` bytes.
struct MemRef {
  std::uint8_t* ptr = nullptr;
  MemError error = MemError::kNone;

  explicit operator bool() const { return error == MemError::kNone; }
};

/// The memory a QP may reach: its protection domain's regions.
class MemoryAccess {
 public:
  virtual ~MemoryAccess() = default;

  /// Resolves [addr, addr + length) of the region behind a local key, for
  /// the `access` flags asked (0 for reading, access::kLocalWrite to write).
  virtual MemRef local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                       unsigned access) = 0;

  /// Resolves a remote peer's request on the region behind `rkey`;
  /// `access` holds the access::kRemote* flag the operation needs.
  virtual MemRef remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t length,
                        unsigned access) = 0;

  /// Invalidates a remote key: a SEND_WITH_INV arriving (`remote`) or a
  /// LOCAL_INV posted; false if the key may not be invalidated.
  virtual bool invalidate(std::uint32_t rkey, bool remote) = 0;

  /// Binds a memory window (IBV_WR_BIND_MW); false if the bind breaks a
  /// rule of IBA 10.6.7 (the WR then completes with IBV_WC_MW_BIND_ERR).
  virtual bool bind_mw(const MwBind& bind) = 0;
};

class Cq;
class RecvQueue;

/// An XRC SRQ as its domain's target QPs see it: where a message for it
/// lands, where it completes, and the memory of its protection domain,
/// which the target QP's RDMA and atomic requests are checked against
/// (IBA A14.3.2: the TGT QP has no PD of its own).
struct XrcSrq {
  RecvQueue* rq = nullptr;
  Cq* cq = nullptr;
  MemoryAccess* memory = nullptr;
};

/// The XRC domain a target QP belongs to: its SRQs, by number. Asked on
/// the engine thread, for every request, so an SRQ destroyed between two
/// packets is never reached.
class XrcDomain {
 public:
  enum class Lookup : std::uint8_t { kFound, kNoSuchSrq, kOtherDomain };
  virtual ~XrcDomain() = default;
  virtual Lookup find_srq(std::uint32_t srqn, XrcSrq* out) = 0;
};
}  // namespace uroce::transport
