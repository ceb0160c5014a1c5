/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Byte spans and big-endian (network order) field access. Every header
// codec in lib/wire reads and writes through these, so no codec depends on
// the alignment of the buffer it is given.

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace uroce::wire {

using Bytes = std::span<std::uint8_t>;
using ConstBytes = std::span<const std::uint8_t>;

/// A piece of payload to gather into a frame: a ConstBytes's pointer and
/// length in a trivially default-constructible type. A packet fills a
/// few of an array of them and leaves the rest unwritten, where an array
/// of spans is zeroed whole each time it is made (a span's constructor
/// writes both fields): 89 instructions a packet for a TxPacket's 33.
class GatherSeg {
 public:
  GatherSeg() = default;
  constexpr GatherSeg(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  constexpr const std::uint8_t* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};

static_assert(std::is_trivially_default_constructible_v<GatherSeg>);

constexpr std::uint16_t load_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
constexpr std::uint32_t load_be24(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 16 | std::uint32_t{p[1]} << 8 | p[2];
}
constexpr std::uint32_t load_be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
constexpr std::uint64_t load_be64(const std::uint8_t* p) {
  return std::uint64_t{load_be32(p)} << 32 | load_be32(p + 4);
}

constexpr void store_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
constexpr void store_be24(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 16);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v);
}
constexpr void store_be32(std::uint8_t* p, std::uint32_t v) {
  store_be16(p, static_cast<std::uint16_t>(v >> 16));
  store_be16(p + 2, static_cast<std::uint16_t>(v));
}
constexpr void store_be64(std::uint8_t* p, std::uint64_t v) {
  store_be32(p, static_cast<std::uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<std::uint32_t>(v));
}

}  // namespace uroce::wire
