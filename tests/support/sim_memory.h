/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A memory region table for tests: registered ranges of this process's
// memory, looked up by key with bounds and access checks, as the verbs
// layer's MR table does for the transport.

#include <cstdint>
#include <map>

#include "transport/memory.h"

namespace uroce::test {

class SimMemory : public transport::MemoryAccess {
 public:
  /// Registers [addr, addr + length) with `access` flags; returns its key
  /// (used as both lkey and rkey). Keys are not sequential.
  std::uint32_t reg(const void* addr, std::uint64_t length, unsigned access);
  void dereg(std::uint32_t key) { mrs_.erase(key); }

  transport::MemRef local(std::uint32_t lkey, std::uint64_t addr, std::uint64_t length,
                          unsigned access) override;
  transport::MemRef remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t length,
                           unsigned access) override;
  /// Drops the key, whatever it is (the rules are the MR table's).
  bool invalidate(std::uint32_t rkey, bool remote) override;
  /// Makes `new_rkey` a key to the part of the region behind `mr_lkey`
  /// the bind names, with its access; false if the region lacks
  /// access::kMwBind or the range leaves it.
  bool bind_mw(const transport::MwBind& bind) override;

 private:
  struct Mr {
    std::uint64_t addr;
    std::uint64_t length;
    unsigned access;
  };
  transport::MemRef lookup(std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                           unsigned access);

  std::map<std::uint32_t, Mr> mrs_;
  std::uint32_t next_ = 0x1234;
};

}  // namespace uroce::test
