/* SPDX-License-Identifier: BSD-3-Clause */
#include "stats/pcapng.h"

#include <cerrno>
#include <cstring>

namespace uroce::stats {

namespace {

// Block types and option codes of the pcapng draft, section 4.
constexpr std::uint32_t kSectionHeader = 0x0A0D0D0A;
constexpr std::uint32_t kInterfaceDescription = 1;
constexpr std::uint32_t kEnhancedPacket = 6;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEnd = 0;
constexpr std::uint16_t kOptComment = 1;
constexpr std::uint16_t kShbUserAppl = 4;
constexpr std::uint16_t kIfName = 2;
constexpr std::uint16_t kIfTsresol = 9;
constexpr std::uint16_t kEpbFlags = 2;
constexpr std::uint16_t kLinktypeEthernet = 1;
constexpr std::uint8_t kNanoseconds = 9;  // if_tsresol: 10^-9 s

constexpr std::size_t pad4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }
// An option's size on file: code, length, value padded to 32 bits.
constexpr std::size_t option_size(std::size_t length) { return 4 + pad4(length); }

constexpr char kApplication[] = "uroce-stat capture";

}  // namespace

PcapngWriter::~PcapngWriter() { close(); }

bool PcapngWriter::open(const std::string& path, std::string* error) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  const std::uint16_t appl_len = sizeof(kApplication) - 1;
  const auto len = static_cast<std::uint32_t>(28 + option_size(appl_len) + option_size(0));
  put32(kSectionHeader);
  put32(len);
  put32(kByteOrderMagic);
  const std::uint16_t version[2] = {1, 0};
  put(version, sizeof(version));
  const std::int64_t section_length = -1;  // unknown: written as it goes
  put(&section_length, sizeof(section_length));
  option(kShbUserAppl, kApplication, appl_len);
  option(kOptEnd, nullptr, 0);
  put32(len);
  if (failed_) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

std::uint32_t PcapngWriter::add_interface(std::string_view name, std::uint32_t snaplen) {
  const auto name_len = static_cast<std::uint16_t>(name.size());
  const auto len =
      static_cast<std::uint32_t>(20 + option_size(name_len) + option_size(1) + option_size(0));
  put32(kInterfaceDescription);
  put32(len);
  const std::uint16_t link[2] = {kLinktypeEthernet, 0};
  put(link, sizeof(link));
  put32(snaplen);
  option(kIfName, name.data(), name_len);
  option(kIfTsresol, &kNanoseconds, 1);
  option(kOptEnd, nullptr, 0);
  put32(len);
  return interfaces_++;
}

void PcapngWriter::write(std::uint32_t interface, std::uint64_t time_ns, const std::uint8_t* data,
                         std::uint32_t captured, std::uint32_t length, Direction d,
                         std::string_view comment) {
  const auto comment_len = static_cast<std::uint16_t>(comment.size());
  std::size_t options = 0;
  if (d != Direction::kUnknown) options += option_size(4);
  if (!comment.empty()) options += option_size(comment_len);
  if (options != 0) options += option_size(0);
  const auto len = static_cast<std::uint32_t>(32 + pad4(captured) + options);
  put32(kEnhancedPacket);
  put32(len);
  put32(interface);
  put32(static_cast<std::uint32_t>(time_ns >> 32));
  put32(static_cast<std::uint32_t>(time_ns));
  put32(captured);
  put32(length);
  put(data, captured);
  static constexpr std::uint8_t kZeros[3] = {};
  put(kZeros, pad4(captured) - captured);
  if (d != Direction::kUnknown) {
    const std::uint32_t flags = static_cast<std::uint32_t>(d);
    option(kEpbFlags, &flags, 4);
  }
  if (!comment.empty()) option(kOptComment, comment.data(), comment_len);
  if (options != 0) option(kOptEnd, nullptr, 0);
  put32(len);
  ++frames_;
}

bool PcapngWriter::close() {
  if (!f_) return !failed_;
  if (std::fclose(f_) != 0) failed_ = true;
  f_ = nullptr;
  return !failed_;
}

void PcapngWriter::put(const void* p, std::size_t n) {
  if (n == 0 || !f_) return;
  if (std::fwrite(p, 1, n, f_) != n) failed_ = true;
}

void PcapngWriter::option(std::uint16_t code, const void* value, std::uint16_t length) {
  const std::uint16_t head[2] = {code, length};
  put(head, sizeof(head));
  put(value, length);
  static constexpr std::uint8_t kZeros[3] = {};
  put(kZeros, pad4(length) - length);
}

}  // namespace uroce::stats
