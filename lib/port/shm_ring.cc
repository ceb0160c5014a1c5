/* SPDX-License-Identifier: BSD-3-Clause */
#include "port/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace uroce::port {

namespace L = shm_layout;

namespace {

// Large enough for any frame and any ring a daemon wants, small enough
// that no size computed from them overflows.
constexpr std::uint32_t kMaxSlots = 1u << 20;
constexpr std::uint32_t kMaxSlotSize = 1u << 20;

constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

constexpr bool power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// 64-bit arithmetic: map() computes it from a header the other side wrote.
constexpr std::uint64_t ring_size(std::uint64_t slots, std::uint64_t slot_size) {
  return round_up(L::data_at(0) + round_up(4 * slots, L::kCacheLine) + slots * slot_size, L::kPage);
}

constexpr std::uint64_t ring_offset(std::uint64_t slots, std::uint64_t slot_size, int ring) {
  return L::kPage + static_cast<std::uint64_t>(ring) * ring_size(slots, slot_size);
}

static_assert(L::data_at(0) == 2 * L::kCacheLine);
static_assert(L::data_at(1) == 3 * L::kCacheLine);
static_assert(L::kRingSizeAt + 8 <= L::kPage);

std::atomic_ref<std::uint32_t> word(std::uint8_t* base, std::size_t at) {
  return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(base + at));
}
std::atomic_ref<std::uint64_t> word64(std::uint8_t* base, std::size_t at) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + at));
}

// The geometry of every ring a live ShmRegion mapped, so that a ring end
// made from a bare pointer takes its sizes from what the region checked
// and not from memory the other side can rewrite. Touched at setup only.
struct Geometry {
  const void* ring;
  std::uint32_t slots;
  std::uint32_t slot_size;
};
std::mutex registry_mutex;
std::vector<Geometry>& registry() {
  static std::vector<Geometry> r;
  return r;
}

Geometry lookup(const void* ring) {
  const std::lock_guard lock(registry_mutex);
  for (const Geometry& g : registry()) {
    if (g.ring == ring) return g;
  }
  return {nullptr, 0, 0};
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

std::size_t shm_region_size(std::uint32_t slots, std::uint32_t slot_size) {
  const std::uint64_t s = round_up(slot_size, L::kCacheLine);
  return static_cast<std::size_t>(ring_offset(slots, s, 2));
}

// --- RingProducer

RingProducer::RingProducer(void* shared) {
  const Geometry g = lookup(shared);
  if (g.ring == nullptr) return;
  ring_ = static_cast<std::uint8_t*>(shared);
  slots_ = g.slots;
  slot_size_ = g.slot_size;
}

std::uint32_t RingProducer::room() const {
  if (slots_ == 0) return 0;
  const std::uint32_t used = head_ - word(ring_, L::kTailAt).load(std::memory_order_acquire);
  return used > slots_ ? 0 : slots_ - used;
}

bool RingProducer::push(wire::ConstBytes frame) {
  if (frame.empty() || frame.size() > slot_size_ || room() == 0) return false;
  const std::uint32_t idx = head_ & (slots_ - 1);
  std::memcpy(ring_ + L::data_at(slots_) + std::size_t{idx} * slot_size_, frame.data(),
              frame.size());
  word(ring_, L::kLengthsAt + 4 * std::size_t{idx})
      .store(static_cast<std::uint32_t>(frame.size()), std::memory_order_relaxed);
  ++head_;
  word(ring_, L::kHeadAt).store(head_, std::memory_order_release);
  return true;
}

// --- RingConsumer

RingConsumer::RingConsumer(void* shared) {
  const Geometry g = lookup(shared);
  if (g.ring == nullptr) return;
  ring_ = static_cast<std::uint8_t*>(shared);
  slots_ = g.slots;
  slot_size_ = g.slot_size;
}

std::uint32_t RingConsumer::available() {
  if (slots_ == 0) return 0;
  const std::uint32_t head = word(ring_, L::kHeadAt).load(std::memory_order_acquire);
  const std::uint32_t avail = head - tail_;
  if (avail > slots_) {
    ++corrupt_;
    tail_ = head;
    word(ring_, L::kTailAt).store(tail_, std::memory_order_release);
    return 0;
  }
  return avail;
}

wire::ConstBytes RingConsumer::peek(std::uint32_t i) const {
  if (i >= slots_) return {};
  const std::uint32_t idx = (tail_ + i) & (slots_ - 1);
  // Read once: the producer may change it again after it is checked.
  const std::uint32_t len =
      word(ring_, L::kLengthsAt + 4 * std::size_t{idx}).load(std::memory_order_relaxed);
  if (len == 0 || len > slot_size_) return {};
  return {ring_ + L::data_at(slots_) + std::size_t{idx} * slot_size_, len};
}

void RingConsumer::pop(std::uint32_t n) {
  if (slots_ == 0 || n == 0) return;
  tail_ += n;
  word(ring_, L::kTailAt).store(tail_, std::memory_order_release);
}

// --- ShmRegion

std::unique_ptr<ShmRegion> ShmRegion::create(std::uint32_t slots, std::uint32_t slot_size,
                                             std::string* error) {
  if (!power_of_two(slots) || slots < 2 || slots > kMaxSlots) {
    *error = "shm ring: " + std::to_string(slots) + " slots: not a power of two in [2, " +
             std::to_string(kMaxSlots) + "]";
    return nullptr;
  }
  if (slot_size == 0 || slot_size > kMaxSlotSize) {
    *error = "shm ring: slot size " + std::to_string(slot_size) + " not in [1, " +
             std::to_string(kMaxSlotSize) + "]";
    return nullptr;
  }
  slot_size = static_cast<std::uint32_t>(round_up(slot_size, L::kCacheLine));
  const std::size_t size = shm_region_size(slots, slot_size);

  const int fd = memfd_create("uroce-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    *error = errno_text("shm ring: memfd_create");
    return nullptr;
  }
  std::unique_ptr<ShmRegion> r(new ShmRegion);
  r->fd_ = fd;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *error = errno_text("shm ring: ftruncate");
    return nullptr;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = errno_text("shm ring: sealing");
    return nullptr;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    *error = errno_text("shm ring: mmap");
    return nullptr;
  }
  r->base_ = base;
  r->size_ = size;
  r->slots_ = slots;
  r->slot_size_ = slot_size;

  // A new memfd reads as zeros: both rings are empty already.
  auto* p = static_cast<std::uint8_t*>(base);
  word(p, L::kVersionAt).store(L::kVersion, std::memory_order_relaxed);
  word(p, L::kSlotsAt).store(slots, std::memory_order_relaxed);
  word(p, L::kSlotSizeAt).store(slot_size, std::memory_order_relaxed);
  for (int ring = 0; ring < 2; ++ring) {
    word64(p, L::kRingOffsetAt + 8 * ring)
        .store(ring_offset(slots, slot_size, ring), std::memory_order_relaxed);
  }
  word64(p, L::kRingSizeAt).store(ring_size(slots, slot_size), std::memory_order_relaxed);
  // Magic last: a header that has it is whole.
  word(p, L::kMagicAt).store(L::kMagic, std::memory_order_release);
  r->enroll();
  return r;
}

std::unique_ptr<ShmRegion> ShmRegion::map(int fd, std::string* error) {
  std::unique_ptr<ShmRegion> r(new ShmRegion);
  r->fd_ = fd;  // closed by the destructor, on failure too

  // Without these seals the other side could shrink the file and turn a
  // read of the rings into SIGBUS.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    *error = errno_text("shm ring: F_GET_SEALS");
    return nullptr;
  }
  if ((seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL)) {
    *error = "shm ring: the region's file is not sealed against shrinking";
    return nullptr;
  }
  struct stat st = {};
  if (fstat(fd, &st) != 0) {
    *error = errno_text("shm ring: fstat");
    return nullptr;
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < L::kPage) {
    *error = "shm ring: region of " + std::to_string(file_size) + " bytes: too small for a header";
    return nullptr;
  }
  void* base = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    *error = errno_text("shm ring: mmap");
    return nullptr;
  }
  r->base_ = base;
  r->size_ = file_size;

  // Each field read once; from here on only the private copies count.
  auto* p = static_cast<std::uint8_t*>(base);
  const std::uint32_t magic = word(p, L::kMagicAt).load(std::memory_order_acquire);
  const std::uint32_t version = word(p, L::kVersionAt).load(std::memory_order_relaxed);
  const std::uint32_t slots = word(p, L::kSlotsAt).load(std::memory_order_relaxed);
  const std::uint32_t slot_size = word(p, L::kSlotSizeAt).load(std::memory_order_relaxed);
  std::uint64_t offsets[2];
  for (int ring = 0; ring < 2; ++ring) {
    offsets[ring] = word64(p, L::kRingOffsetAt + 8 * ring).load(std::memory_order_relaxed);
  }
  const std::uint64_t rsize = word64(p, L::kRingSizeAt).load(std::memory_order_relaxed);

  if (magic != L::kMagic) {
    *error = "shm ring: bad magic in the region's header";
    return nullptr;
  }
  if (version != L::kVersion) {
    *error = "shm ring: region version " + std::to_string(version) + ", expected " +
             std::to_string(L::kVersion);
    return nullptr;
  }
  if (!power_of_two(slots) || slots < 2) {
    *error = "shm ring: " + std::to_string(slots) + " slots: not a power of two of at least 2";
    return nullptr;
  }
  if (slot_size == 0 || slot_size % L::kCacheLine != 0) {
    *error = "shm ring: slot size " + std::to_string(slot_size) + ": not a multiple of " +
             std::to_string(L::kCacheLine);
    return nullptr;
  }
  const std::uint64_t need = ring_offset(slots, slot_size, 2);
  if (need > file_size) {
    *error = "shm ring: " + std::to_string(slots) + " slots of " + std::to_string(slot_size) +
             " bytes need " + std::to_string(need) + " bytes, the region has " +
             std::to_string(file_size);
    return nullptr;
  }
  if (offsets[0] != ring_offset(slots, slot_size, 0) ||
      offsets[1] != ring_offset(slots, slot_size, 1) || rsize != ring_size(slots, slot_size)) {
    *error = "shm ring: ring offsets in the header do not match its geometry";
    return nullptr;
  }
  r->slots_ = slots;
  r->slot_size_ = slot_size;
  r->enroll();
  return r;
}

ShmRegion::~ShmRegion() {
  if (slots_ != 0) {
    const std::lock_guard lock(registry_mutex);
    auto& reg = registry();
    std::erase_if(reg, [this](const Geometry& g) {
      return g.ring == ring(Ring::kToDaemon) || g.ring == ring(Ring::kToProgram);
    });
  }
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

void* ShmRegion::ring(Ring r) const {
  if (base_ == nullptr || slots_ == 0) return nullptr;
  return static_cast<std::uint8_t*>(base_) + ring_offset(slots_, slot_size_, static_cast<int>(r));
}

void ShmRegion::enroll() {
  const std::lock_guard lock(registry_mutex);
  for (Ring r : {Ring::kToDaemon, Ring::kToProgram}) {
    registry().push_back({ring(r), slots_, slot_size_});
  }
}

}  // namespace uroce::port
