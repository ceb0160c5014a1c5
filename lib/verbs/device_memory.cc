/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/device_memory.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "transport/limits.h"

namespace uroce::verbs {

namespace {

constexpr std::uint64_t kMinAlign = 64;  // a cache line: memory regions on it see no false sharing

}  // namespace

std::unique_ptr<DeviceMemory> DmPool::alloc(std::uint64_t length, std::uint32_t log_align,
                                            int* err) {
  // A length the pool could never hold is a bad argument; one that does
  // not fit now is the pool running out.
  if (length == 0 || length > capacity_ || log_align > transport::kMaxDmLogAlign) {
    *err = EINVAL;
    return nullptr;
  }
  std::uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (length > capacity_ - used) {
      *err = ENOMEM;
      return nullptr;
    }
  } while (!used_.compare_exchange_weak(used, used + length, std::memory_order_relaxed));
  const std::uint64_t align = std::max(kMinAlign, std::uint64_t{1} << log_align);
  // aligned_alloc wants a multiple of the alignment.
  const std::uint64_t size = (length + align - 1) / align * align;
  auto* data = static_cast<std::uint8_t*>(std::aligned_alloc(align, size));
  if (data == nullptr) {
    release(length);
    *err = ENOMEM;
    return nullptr;
  }
  std::memset(data, 0, size);  // a program never sees another's leftovers
  return std::unique_ptr<DeviceMemory>(new DeviceMemory(*this, data, length));
}

DeviceMemory::~DeviceMemory() {
  std::free(data_);
  pool_.release(length_);
}

int DeviceMemory::check(std::uint64_t offset, std::size_t length) const {
  if (offset % kCopyUnit != 0 || length % kCopyUnit != 0) return EINVAL;
  if (!contains(offset, length)) return EFAULT;
  return 0;
}

// Word by word, each word one atomic access: a copy racing with the
// transport writing the same words through a memory region sees each word
// either before or after, never torn, as with a NIC's memory.
int DeviceMemory::copy_to(std::uint64_t offset, const void* host, std::size_t length) {
  if (int rc = check(offset, length); rc != 0) return rc;
  const auto* src = static_cast<const std::uint8_t*>(host);
  auto* dst = reinterpret_cast<std::uint32_t*>(data_ + offset);
  for (std::size_t i = 0; i < length / kCopyUnit; ++i) {
    std::uint32_t word;
    std::memcpy(&word, src + i * kCopyUnit, sizeof(word));  // the host side may be unaligned
    std::atomic_ref<std::uint32_t>(dst[i]).store(word, std::memory_order_relaxed);
  }
  return 0;
}

int DeviceMemory::copy_from(void* host, std::uint64_t offset, std::size_t length) const {
  if (int rc = check(offset, length); rc != 0) return rc;
  auto* dst = static_cast<std::uint8_t*>(host);
  auto* src = reinterpret_cast<std::uint32_t*>(data_ + offset);
  for (std::size_t i = 0; i < length / kCopyUnit; ++i) {
    const std::uint32_t word =
        std::atomic_ref<std::uint32_t>(src[i]).load(std::memory_order_relaxed);
    std::memcpy(dst + i * kCopyUnit, &word, sizeof(word));
  }
  return 0;
}

}  // namespace uroce::verbs
