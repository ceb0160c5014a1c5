/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The frame rings between the device daemon (uroced) and one program: a
// region of shared memory (a sealed memfd the daemon makes and hands the
// program over its socket) holding two single-producer single-consumer
// rings of fixed-size frame slots, one per direction. The daemon maps
// only these rings, never the program's memory.
//
// Each side trusts nothing the other writes: a cursor is kept privately
// by the side that advances it and only published to the shared header,
// so a program that scribbles over its region (or stops draining its
// ring) can lose its own frames and nothing else. A consumer reads a
// frame's length once and checks it against the slot; what it finds
// inconsistent it reports, it never reads outside the region.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "wire/bytes.h"

namespace uroce::port {

/// Bytes of one slot: a 9000-byte MTU frame with its Ethernet header and
/// a VLAN tag, rounded up.
inline constexpr std::uint32_t kShmSlotSize = 9216;
/// Slots per ring of a region the daemon makes: a power of two.
inline constexpr std::uint32_t kShmSlots = 1024;

/// Bytes a region of two rings of `slots` slots of `slot_size` bytes
/// (rounded up to a cache line, as create() does) takes, a whole number
/// of pages.
std::size_t shm_region_size(std::uint32_t slots, std::uint32_t slot_size);

/// The layout both sides agree on. Page 0 holds the header; the ring
/// kToDaemon starts at page 1, kToProgram after it (each a whole number
/// of pages). All words are little-endian, as both sides are one host.
namespace shm_layout {
inline constexpr std::uint32_t kMagic = 0x524f5255;  ///< "UROR" in memory
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kPage = 4096;
inline constexpr std::size_t kCacheLine = 64;
/// The header's fields (offsets in page 0).
inline constexpr std::size_t kMagicAt = 0;        ///< u32
inline constexpr std::size_t kVersionAt = 4;      ///< u32
inline constexpr std::size_t kSlotsAt = 8;        ///< u32
inline constexpr std::size_t kSlotSizeAt = 12;    ///< u32
inline constexpr std::size_t kRingOffsetAt = 16;  ///< u64[2], by Ring
inline constexpr std::size_t kRingSizeAt = 32;    ///< u64
/// In one ring: each cursor on a cache line of its own, so that the two
/// sides do not share a line they write.
inline constexpr std::size_t kHeadAt = 0;                  ///< u32, the producer's
inline constexpr std::size_t kTailAt = kCacheLine;         ///< u32, the consumer's
inline constexpr std::size_t kLengthsAt = 2 * kCacheLine;  ///< u32[slots]
/// Where slot data starts: [slots][slot_size] bytes.
constexpr std::size_t data_at(std::uint32_t slots) {
  return kLengthsAt + (std::size_t{4} * slots + kCacheLine - 1) / kCacheLine * kCacheLine;
}
}  // namespace shm_layout

/// The producer end of one ring: copies frames into slots and publishes
/// them. One thread at a time.
class RingProducer {
 public:
  RingProducer() = default;
  /// `shared` is the ring inside a formatted region (ShmRegion::ring). Its
  /// geometry is what that ShmRegion checked, never re-read from the
  /// shared header (the other side may rewrite it); a pointer no live
  /// region returned gives a ring of no slots, which refuses every frame.
  explicit RingProducer(void* shared);
  /// Copies `frame` into the next slot and publishes it. False (nothing
  /// written) when the ring is full, the frame is empty or longer than a
  /// slot, or
  /// the consumer's published tail is impossible (ahead of what was
  /// produced, or more than a ring behind): the consumer lost its frames.
  bool push(wire::ConstBytes frame);
  /// Free slots, 0 when the consumer's tail is impossible.
  std::uint32_t room() const;
  std::uint32_t slots() const { return slots_; }

 private:
  std::uint8_t* ring_ = nullptr;
  std::uint32_t slots_ = 0;
  std::uint32_t slot_size_ = 0;
  std::uint32_t head_ = 0;  ///< private: what the shared header says is published
};

/// The consumer end of one ring: reads published frames in place and
/// gives their slots back. One thread at a time.
class RingConsumer {
 public:
  RingConsumer() = default;
  /// As RingProducer's: the geometry is the region's; an unknown pointer
  /// gives a ring that never has a frame.
  explicit RingConsumer(void* shared);
  /// Frames published and not yet popped. A producer's head more than a
  /// ring ahead (or behind) is garbage: then 0, corrupt() counts it and
  /// the ring is resynchronised to the head (the frames in it are lost).
  std::uint32_t available();
  /// The i-th waiting frame (i < available()), in place in the slot: the
  /// bytes may still change under a hostile producer, so copy before
  /// checking them. An empty span when the slot's length is 0 or longer
  /// than the slot (count it as malformed and pop it like any other).
  wire::ConstBytes peek(std::uint32_t i) const;
  /// Gives the first `n` waiting slots back to the producer.
  void pop(std::uint32_t n);
  /// The counter of the first waiting frame (the private tail): peek(i)
  /// is frame position() + i.
  std::uint32_t position() const { return tail_; }
  /// Times available() found the producer's head impossible.
  std::uint64_t corrupt() const { return corrupt_; }
  std::uint32_t slots() const { return slots_; }

 private:
  std::uint8_t* ring_ = nullptr;
  std::uint32_t slots_ = 0;
  std::uint32_t slot_size_ = 0;
  std::uint32_t tail_ = 0;  ///< private: what the shared header says is consumed
  std::uint64_t corrupt_ = 0;
};

/// One mapped region: its two rings. The daemon creates it, the program
/// maps the file descriptor it was handed.
class ShmRegion {
 public:
  enum class Ring : std::uint8_t { kToDaemon = 0, kToProgram = 1 };

  /// A new sealed memfd (it can neither shrink nor grow, so no side can
  /// pull the pages from under the other), sized and formatted: both
  /// rings empty. Null with *error on failure.
  static std::unique_ptr<ShmRegion> create(std::uint32_t slots, std::uint32_t slot_size,
                                           std::string* error);
  /// Maps a region made by create() from its descriptor (which it takes
  /// over): checks the header (magic, version, a power-of-two slot count,
  /// sizes that fit the file). Null with *error on failure.
  static std::unique_ptr<ShmRegion> map(int fd, std::string* error);
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  /// The memfd, to hand to the other side (SCM_RIGHTS); the region keeps it.
  int fd() const { return fd_; }
  std::uint32_t slots() const { return slots_; }
  std::uint32_t slot_size() const { return slot_size_; }
  /// The shared memory of one ring, for a RingProducer or RingConsumer.
  void* ring(Ring r) const;

 private:
  ShmRegion() = default;
  /// Records both rings' geometry for the ring ends made from ring().
  void enroll();
  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t slots_ = 0;
  std::uint32_t slot_size_ = 0;
};

}  // namespace uroce::port
