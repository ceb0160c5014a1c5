/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A pcapng writer (draft-ietf-opsawg-pcapng): one Section Header Block,
// an Interface Description Block per device (LINKTYPE_ETHERNET, its name
// and nanosecond timestamps, if_tsresol 9), then an Enhanced Packet Block
// per frame with its direction (epb_flags) where it is known. Wireshark
// and tshark read it; uroce-stat capture writes it. Blocks are written in
// the host's byte order, which the section's byte-order magic declares.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace uroce::stats {

class PcapngWriter {
 public:
  /// How a frame went, as epb_flags bits 0-1 say it.
  enum class Direction : std::uint8_t { kUnknown = 0, kInbound = 1, kOutbound = 2 };

  PcapngWriter() = default;
  ~PcapngWriter();
  PcapngWriter(const PcapngWriter&) = delete;
  PcapngWriter& operator=(const PcapngWriter&) = delete;

  /// Creates `path` and writes the section header; false with *error.
  bool open(const std::string& path, std::string* error);
  /// Describes an Ethernet interface; returns its id for write().
  std::uint32_t add_interface(std::string_view name, std::uint32_t snaplen = 65535);
  /// One frame seen on `interface` at `time_ns` (ns since the epoch):
  /// `captured` bytes of a frame `length` long. `comment`, when not
  /// empty, is shown with the frame (opt_comment).
  void write(std::uint32_t interface, std::uint64_t time_ns, const std::uint8_t* data,
             std::uint32_t captured, std::uint32_t length, Direction d,
             std::string_view comment = {});
  /// Flushes and closes; false when a write failed.
  bool close();
  std::uint64_t frames() const { return frames_; }

 private:
  void put(const void* p, std::size_t n);
  void put32(std::uint32_t v) { put(&v, sizeof(v)); }
  void option(std::uint16_t code, const void* value, std::uint16_t length);

  std::FILE* f_ = nullptr;
  std::uint32_t interfaces_ = 0;
  std::uint64_t frames_ = 0;
  bool failed_ = false;
};

}  // namespace uroce::stats
