/* SPDX-License-Identifier: BSD-3-Clause */
// The shared-memory frame rings: frames intact and in order through many
// wrap-arounds, a full ring's backpressure, two mappings (and two
// processes) of one region, and a hostile other side that rewrites the
// shared words: counted and survived, never a read outside the region.

#include "port/shm_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace uroce::port {
namespace {

namespace L = shm_layout;
using Ring = ShmRegion::Ring;

std::unique_ptr<ShmRegion> make_region(std::uint32_t slots, std::uint32_t slot_size) {
  std::string error;
  auto r = ShmRegion::create(slots, slot_size, &error);
  EXPECT_NE(r, nullptr) << error;
  return r;
}

// A frame of `len` bytes carrying `seq` in every byte's pattern.
std::vector<std::uint8_t> frame(std::uint32_t seq, std::size_t len) {
  std::vector<std::uint8_t> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::uint8_t>(seq * 31 + i);
  if (len >= 4) wire::store_be32(f.data(), seq);
  return f;
}

bool same(wire::ConstBytes a, const std::vector<std::uint8_t>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size()) == 0;
}

// The shared words of one ring, as a hostile other side sees them.
struct SharedRing {
  std::uint8_t* base;
  std::uint32_t slots;
  std::uint32_t slot_size;

  SharedRing(const ShmRegion& r, Ring which)
      : base(static_cast<std::uint8_t*>(r.ring(which))),
        slots(r.slots()),
        slot_size(r.slot_size()) {}
  std::uint32_t& head() const { return *reinterpret_cast<std::uint32_t*>(base + L::kHeadAt); }
  std::uint32_t& tail() const { return *reinterpret_cast<std::uint32_t*>(base + L::kTailAt); }
  std::uint32_t& length(std::uint32_t counter) const {
    return reinterpret_cast<std::uint32_t*>(base + L::kLengthsAt)[counter & (slots - 1)];
  }
  std::uint8_t* slot(std::uint32_t counter) const {
    return base + L::data_at(slots) + std::size_t{counter & (slots - 1)} * slot_size;
  }
};

TEST(ShmRing, FramesComeOutIntactAndInOrderAcrossManyWrapArounds) {
  auto region = make_region(8, 256);
  RingProducer p(region->ring(Ring::kToDaemon));
  RingConsumer c(region->ring(Ring::kToDaemon));
  std::uint32_t sent = 0, received = 0;
  // Bursts of uneven sizes, so that the cursors cross the wrap at every
  // offset; 100 turns of the ring.
  while (received < 800) {
    const std::uint32_t burst = 1 + sent % 5;
    for (std::uint32_t i = 0; i < burst && p.push(frame(sent, 1 + sent % 256)); ++i) ++sent;
    const std::uint32_t n = c.available();
    for (std::uint32_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same(c.peek(i), frame(received + i, 1 + (received + i) % 256)))
          << "frame " << received + i;
    }
    c.pop(n);
    received += n;
  }
  EXPECT_EQ(c.corrupt(), 0u);
  EXPECT_EQ(p.room(), 8u);
}

TEST(ShmRing, AFullRingRefusesAndRoomCountsDown) {
  auto region = make_region(4, 64);
  RingProducer p(region->ring(Ring::kToProgram));
  RingConsumer c(region->ring(Ring::kToProgram));
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p.room(), 4 - i);
    EXPECT_TRUE(p.push(frame(i, 60)));
  }
  EXPECT_EQ(p.room(), 0u);
  EXPECT_FALSE(p.push(frame(4, 60)));
  ASSERT_EQ(c.available(), 4u);
  c.pop(1);
  EXPECT_EQ(p.room(), 1u);
  EXPECT_TRUE(p.push(frame(4, 60)));
  ASSERT_EQ(c.available(), 4u);
  EXPECT_TRUE(same(c.peek(3), frame(4, 60)));
}

TEST(ShmRing, AFrameLongerThanASlotOrEmptyIsRefused) {
  auto region = make_region(4, 100);  // rounded up to 128
  EXPECT_EQ(region->slot_size(), 128u);
  RingProducer p(region->ring(Ring::kToDaemon));
  RingConsumer c(region->ring(Ring::kToDaemon));
  EXPECT_FALSE(p.push(frame(0, 129)));
  EXPECT_FALSE(p.push({}));
  EXPECT_EQ(c.available(), 0u);
  EXPECT_TRUE(p.push(frame(1, 128)));
  ASSERT_EQ(c.available(), 1u);
  EXPECT_TRUE(same(c.peek(0), frame(1, 128)));
}

TEST(ShmRing, ARingEndOverMemoryNoRegionMappedHasNoSlots) {
  std::vector<std::uint8_t> fake(1 << 16, 0xFF);
  RingProducer p(fake.data());
  RingConsumer c(fake.data());
  EXPECT_EQ(p.room(), 0u);
  EXPECT_FALSE(p.push(frame(0, 64)));
  EXPECT_EQ(c.available(), 0u);
  EXPECT_TRUE(c.peek(0).empty());
}

TEST(ShmRing, TwoMappingsOfOneRegionCarryFramesBothWays) {
  auto daemon = make_region(16, 2048);
  std::string error;
  auto program = ShmRegion::map(dup(daemon->fd()), &error);
  ASSERT_NE(program, nullptr) << error;
  EXPECT_EQ(program->slots(), 16u);
  EXPECT_EQ(program->slot_size(), 2048u);
  ASSERT_NE(program->ring(Ring::kToDaemon), daemon->ring(Ring::kToDaemon));

  RingProducer down(daemon->ring(Ring::kToProgram));
  RingConsumer up(daemon->ring(Ring::kToDaemon));
  RingConsumer in(program->ring(Ring::kToProgram));
  RingProducer out(program->ring(Ring::kToDaemon));
  ASSERT_TRUE(down.push(frame(7, 1500)));
  ASSERT_TRUE(out.push(frame(9, 2048)));
  ASSERT_EQ(in.available(), 1u);
  EXPECT_TRUE(same(in.peek(0), frame(7, 1500)));
  ASSERT_EQ(up.available(), 1u);
  EXPECT_TRUE(same(up.peek(0), frame(9, 2048)));
}

// The child maps the descriptor anew and echoes every frame back; it
// reports by its exit status (no gtest in a forked child).
TEST(ShmRing, AForkedChildMappingTheRegionEchoesFramesBack) {
  auto region = make_region(8, 1024);
  constexpr std::uint32_t kFrames = 1000;
  using Clock = std::chrono::steady_clock;
  const int child_fd = dup(region->fd());
  ASSERT_GE(child_fd, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string error;
    auto mine = ShmRegion::map(child_fd, &error);
    if (mine == nullptr) _exit(2);
    RingConsumer in(mine->ring(Ring::kToProgram));
    RingProducer out(mine->ring(Ring::kToDaemon));
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    std::uint32_t echoed = 0;
    while (echoed < kFrames) {
      if (Clock::now() > deadline) _exit(3);
      const std::uint32_t n = std::min(in.available(), out.room());
      for (std::uint32_t i = 0; i < n; ++i) {
        if (!out.push(in.peek(i))) _exit(4);
      }
      in.pop(n);
      echoed += n;
      if (n == 0) sched_yield();
    }
    _exit(in.corrupt() == 0 ? 0 : 5);
  }
  close(child_fd);

  RingProducer out(region->ring(Ring::kToProgram));
  RingConsumer in(region->ring(Ring::kToDaemon));
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::uint32_t sent = 0, back = 0;
  bool intact = true;
  while (back < kFrames && Clock::now() < deadline) {
    while (sent < kFrames && out.push(frame(sent, 64 + sent % 960))) ++sent;
    const std::uint32_t n = in.available();
    for (std::uint32_t i = 0; i < n; ++i) {
      intact = intact && same(in.peek(i), frame(back + i, 64 + (back + i) % 960));
    }
    in.pop(n);
    back += n;
    if (n == 0) std::this_thread::yield();
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(back, kFrames);
  EXPECT_TRUE(intact);
}

TEST(ShmRing, AProducerHeadFarAheadIsCountedAndTheRingResynchronised) {
  auto region = make_region(8, 128);
  RingProducer p(region->ring(Ring::kToProgram));
  RingConsumer c(region->ring(Ring::kToProgram));
  SharedRing shared(*region, Ring::kToProgram);
  ASSERT_TRUE(p.push(frame(0, 100)));
  ASSERT_TRUE(p.push(frame(1, 100)));

  shared.head() = 2 + 1000000;
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.corrupt(), 1u);
  EXPECT_EQ(shared.tail(), 1000002u) << "the consumer resynchronised to the head";
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.corrupt(), 1u);

  // A head behind the tail is as impossible.
  shared.head() = 1000002u - 3;
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.corrupt(), 2u);

  // The producer comes back to its senses at the new position.
  const std::uint32_t at = shared.tail();
  const auto f = frame(42, 77);
  std::memcpy(shared.slot(at), f.data(), f.size());
  shared.length(at) = 77;
  shared.head() = at + 1;
  ASSERT_EQ(c.available(), 1u);
  EXPECT_TRUE(same(c.peek(0), f));
  c.pop(1);
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.corrupt(), 2u);
}

TEST(ShmRing, GarbageLengthsGiveEmptyFramesAndNoReadOutsideTheSlot) {
  auto region = make_region(4, 64);
  RingProducer p(region->ring(Ring::kToProgram));
  RingConsumer c(region->ring(Ring::kToProgram));
  SharedRing shared(*region, Ring::kToProgram);
  for (std::uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(p.push(frame(i, 64)));
  shared.length(0) = 0;
  shared.length(1) = 65;
  shared.length(2) = 0xFFFFFFFF;
  shared.length(3) = 64;  // the last slot, the region's last bytes: still in bounds
  ASSERT_EQ(c.available(), 4u);
  EXPECT_TRUE(c.peek(0).empty());
  EXPECT_TRUE(c.peek(1).empty());
  EXPECT_TRUE(c.peek(2).empty());
  EXPECT_TRUE(same(c.peek(3), frame(3, 64)));
  EXPECT_TRUE(c.peek(4).empty()) << "past the ring";
  EXPECT_TRUE(c.peek(0xFFFFFFFF).empty());
  c.pop(4);
  EXPECT_EQ(p.room(), 4u);
}

TEST(ShmRing, AnImpossibleConsumerTailStopsTheProducerWithoutHarm) {
  auto region = make_region(8, 64);
  RingProducer p(region->ring(Ring::kToDaemon));
  SharedRing shared(*region, Ring::kToDaemon);
  ASSERT_TRUE(p.push(frame(0, 64)));
  ASSERT_TRUE(p.push(frame(1, 64)));

  shared.tail() = 3;  // ahead of what was produced
  EXPECT_EQ(p.room(), 0u);
  EXPECT_FALSE(p.push(frame(2, 64)));
  shared.tail() = 2 - 9;  // more than a ring behind
  EXPECT_EQ(p.room(), 0u);
  EXPECT_FALSE(p.push(frame(2, 64)));
  shared.tail() = 2 + 0x80000000u;
  EXPECT_EQ(p.room(), 0u);
  EXPECT_EQ(shared.head(), 2u) << "nothing was published";

  shared.tail() = 1;
  EXPECT_EQ(p.room(), 7u);
  EXPECT_TRUE(p.push(frame(2, 64)));
  EXPECT_EQ(shared.head(), 3u);
}

TEST(ShmRegion, SizeIsWholePagesAndFitsBothRings) {
  EXPECT_EQ(shm_region_size(2, 64) % L::kPage, 0u);
  EXPECT_EQ(shm_region_size(4, 100), shm_region_size(4, 128));
  EXPECT_GE(shm_region_size(kShmSlots, kShmSlotSize),
            L::kPage + 2 * (L::data_at(kShmSlots) + std::size_t{kShmSlots} * kShmSlotSize));
  auto region = make_region(kShmSlots, kShmSlotSize);
  const auto* base = static_cast<const std::uint8_t*>(region->ring(Ring::kToDaemon)) - L::kPage;
  EXPECT_EQ(static_cast<const std::uint8_t*>(region->ring(Ring::kToProgram)) - base,
            static_cast<std::ptrdiff_t>(L::kPage +
                                        (shm_region_size(kShmSlots, kShmSlotSize) - L::kPage) / 2));
  std::uint32_t magic = 0;
  std::memcpy(&magic, base + L::kMagicAt, 4);
  EXPECT_EQ(magic, L::kMagic);
}

TEST(ShmRegion, CreateRefusesASlotCountNotAPowerOfTwoAndEmptySlots) {
  std::string error;
  for (std::uint32_t slots : {0u, 1u, 3u, 1000u}) {
    error.clear();
    EXPECT_EQ(ShmRegion::create(slots, 64, &error), nullptr) << slots;
    EXPECT_NE(error.find("power of two"), std::string::npos) << error;
  }
  error.clear();
  EXPECT_EQ(ShmRegion::create(8, 0, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(ShmRegion, TheFileIsSealedAgainstResizing) {
  auto region = make_region(4, 64);
  const int seals = fcntl(region->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate(region->fd(), 4096), 0);
}

// A sealed memfd of `size` bytes holding `header` (if any) at its start.
int sealed_file(std::size_t size, const std::vector<std::uint8_t>& header = {}) {
  const int fd = memfd_create("uroce-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      (!header.empty() &&
       pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The header create() writes, read from a region's file.
std::vector<std::uint8_t> header_of(const ShmRegion& r) {
  std::vector<std::uint8_t> h(L::kPage);
  EXPECT_EQ(pread(r.fd(), h.data(), h.size(), 0), static_cast<ssize_t>(h.size()));
  return h;
}

void put32(std::vector<std::uint8_t>& h, std::size_t at, std::uint32_t v) {
  std::memcpy(h.data() + at, &v, 4);
}

// map() takes the descriptor over: refused, it is closed all the same.
std::string map_error(int fd) {
  std::string error;
  EXPECT_EQ(ShmRegion::map(fd, &error), nullptr);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the descriptor was closed";
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(ShmRegion, MapRefusesAFileTooSmallForItsHeader) {
  const int fd = sealed_file(100);
  ASSERT_GE(fd, 0);
  EXPECT_NE(map_error(fd).find("too small"), std::string::npos);
}

TEST(ShmRegion, MapRefusesAFileTooSmallForTheRingsItsHeaderClaims) {
  auto region = make_region(64, 1024);
  const int fd = sealed_file(shm_region_size(64, 1024) - L::kPage, header_of(*region));
  ASSERT_GE(fd, 0);
  EXPECT_NE(map_error(fd).find("need"), std::string::npos);

  auto h = header_of(*region);
  put32(h, L::kSlotSizeAt, 0xFFFFFFC0);  // a multiple of 64, and far too big
  const int fd2 = sealed_file(shm_region_size(64, 1024), h);
  ASSERT_GE(fd2, 0);
  EXPECT_NE(map_error(fd2).find("need"), std::string::npos);
}

TEST(ShmRegion, MapRefusesABadMagic) {
  auto region = make_region(8, 64);
  auto h = header_of(*region);
  put32(h, L::kMagicAt, 0xDEADBEEF);
  const int fd = sealed_file(shm_region_size(8, 64), h);
  ASSERT_GE(fd, 0);
  EXPECT_NE(map_error(fd).find("magic"), std::string::npos);
}

TEST(ShmRegion, MapRefusesASlotCountNotAPowerOfTwo) {
  auto region = make_region(8, 64);
  for (std::uint32_t slots : {0u, 1u, 6u, 0xFFFFFFFFu}) {
    auto h = header_of(*region);
    put32(h, L::kSlotsAt, slots);
    const int fd = sealed_file(shm_region_size(8, 64), h);
    ASSERT_GE(fd, 0);
    EXPECT_NE(map_error(fd).find("power of two"), std::string::npos) << slots;
  }
}

TEST(ShmRegion, MapRefusesBadVersionSlotSizeAndRingOffsets) {
  auto region = make_region(8, 64);
  auto h = header_of(*region);
  put32(h, L::kVersionAt, 2);
  int fd = sealed_file(shm_region_size(8, 64), h);
  EXPECT_NE(map_error(fd).find("version"), std::string::npos);

  h = header_of(*region);
  put32(h, L::kSlotSizeAt, 100);
  fd = sealed_file(shm_region_size(8, 128), h);
  EXPECT_NE(map_error(fd).find("multiple of 64"), std::string::npos);

  h = header_of(*region);
  put32(h, L::kRingOffsetAt + 8, 64);
  fd = sealed_file(shm_region_size(8, 64), h);
  EXPECT_NE(map_error(fd).find("offsets"), std::string::npos);
}

TEST(ShmRegion, MapRefusesAFileNotSealedAgainstShrinking) {
  auto region = make_region(8, 64);
  const int fd = memfd_create("uroce-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const auto h = header_of(*region);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(shm_region_size(8, 64))), 0);
  ASSERT_EQ(pwrite(fd, h.data(), h.size(), 0), static_cast<ssize_t>(h.size()));
  EXPECT_NE(map_error(fd).find("sealed"), std::string::npos);
}

// For TSan: the release and acquire on the cursors are what orders the
// slot's bytes.
TEST(ShmRing, TwoThreadsCarryEveryFrameIntactAndInOrder) {
  auto region = make_region(64, 256);
  constexpr std::uint32_t kFrames = 100000;
  std::thread producer([&] {
    RingProducer p(region->ring(Ring::kToProgram));
    std::uint8_t buf[256];
    for (std::uint32_t seq = 0; seq < kFrames;) {
      const std::size_t len = 8 + seq % 248;
      for (std::size_t i = 0; i < len; ++i) buf[i] = static_cast<std::uint8_t>(seq + i);
      wire::store_be32(buf, seq);
      if (p.push(wire::ConstBytes(buf, len))) {
        ++seq;
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::uint32_t next = 0, bad = 0;
  std::thread consumer([&] {
    RingConsumer c(region->ring(Ring::kToProgram));
    while (next < kFrames) {
      const std::uint32_t n = c.available();
      if (n == 0) {
        std::this_thread::yield();
        continue;
      }
      for (std::uint32_t i = 0; i < n; ++i, ++next) {
        const wire::ConstBytes f = c.peek(i);
        bool ok = f.size() == 8 + next % 248 && wire::load_be32(f.data()) == next;
        for (std::size_t b = 4; ok && b < f.size(); ++b) {
          ok = f[b] == static_cast<std::uint8_t>(next + b);
        }
        if (!ok) ++bad;
      }
      c.pop(n);
    }
    if (c.corrupt() != 0) ++bad;
  });
  producer.join();
  consumer.join();
  EXPECT_EQ(next, kFrames);
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace uroce::port
