/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Device memory (ibv_alloc_dm): memory "on the NIC" that programs reach
// only through copies (ibv_memcpy_to_dm / ibv_memcpy_from_dm) and through
// memory regions registered on it (ibv_reg_dm_mr). A software device has no
// memory of its own, so each allocation is host memory; the pool only
// bounds how much of it a device hands out, as a NIC's on-chip memory is
// bounded.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace uroce::verbs {

class DmPool;

/// One allocation of device memory. Copies follow the hardware's rules
/// that programs are written to (rdma-core's mlx5 MEMIC): offset and length
/// in whole 4-byte words, each word copied as one unit.
class DeviceMemory {
 public:
  static constexpr std::uint64_t kCopyUnit = 4;

  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::uint64_t length() const { return length_; }
  /// The host memory behind it, for memory regions registered on it.
  std::uint8_t* data() { return data_; }

  /// Copies `length` bytes from `host` to [offset, offset + length).
  /// EINVAL when offset or length is not a multiple of 4, EFAULT when the
  /// range leaves the allocation; nothing is copied then.
  int copy_to(std::uint64_t offset, const void* host, std::size_t length);
  /// Copies [offset, offset + length) to `host`; errors as copy_to.
  int copy_from(void* host, std::uint64_t offset, std::size_t length) const;

  /// Whether [offset, offset + length) lies inside the allocation.
  bool contains(std::uint64_t offset, std::uint64_t length) const {
    return offset <= length_ && length <= length_ - offset;
  }

 private:
  friend class DmPool;
  DeviceMemory(DmPool& pool, std::uint8_t* data, std::uint64_t length)
      : pool_(pool), data_(data), length_(length) {}
  int check(std::uint64_t offset, std::size_t length) const;

  DmPool& pool_;
  std::uint8_t* data_;
  std::uint64_t length_;
};

/// The device memory of one device: `capacity` bytes in all.
class DmPool {
 public:
  explicit DmPool(std::uint64_t capacity) : capacity_(capacity) {}

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t in_use() const { return used_.load(std::memory_order_relaxed); }

  /// A zeroed allocation of `length` bytes aligned to 2^log_align (at least
  /// a cache line). Null with *err: EINVAL for a length of 0 or beyond the
  /// capacity, or an alignment beyond transport::kMaxDmLogAlign; ENOMEM
  /// when what is left of the pool is too small.
  std::unique_ptr<DeviceMemory> alloc(std::uint64_t length, std::uint32_t log_align, int* err);

 private:
  friend class DeviceMemory;
  void release(std::uint64_t length) { used_.fetch_sub(length, std::memory_order_relaxed); }

  const std::uint64_t capacity_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace uroce::verbs
