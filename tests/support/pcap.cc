/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/pcap.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace uroce::test {
namespace {

constexpr std::uint32_t kMagicUsec = 0xA1B2C3D4;
constexpr std::uint32_t kMagicNsec = 0xA1B23C4D;
constexpr std::uint32_t kLinktypeEthernet = 1;

std::uint32_t load32(const std::uint8_t* p, bool swap) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return swap ? __builtin_bswap32(v) : v;
}

void put32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<char*>(&v), 4); }
void put16(std::string& out, std::uint16_t v) { out.append(reinterpret_cast<char*>(&v), 2); }

}  // namespace

std::vector<Frame> read_pcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(in)), {});
  if (data.size() < 24) throw std::runtime_error(path + ": no pcap header");
  std::uint32_t magic;
  std::memcpy(&magic, data.data(), 4);
  bool swap;
  if (magic == kMagicUsec || magic == kMagicNsec) {
    swap = false;
  } else if (__builtin_bswap32(magic) == kMagicUsec || __builtin_bswap32(magic) == kMagicNsec) {
    swap = true;
  } else {
    throw std::runtime_error(path + ": not a pcap file");
  }
  if (load32(data.data() + 20, swap) != kLinktypeEthernet)
    throw std::runtime_error(path + ": not an Ethernet capture");

  std::vector<Frame> frames;
  std::size_t off = 24;
  while (off < data.size()) {
    if (data.size() - off < 16) throw std::runtime_error(path + ": truncated record header");
    const std::uint32_t caplen = load32(data.data() + off + 8, swap);
    off += 16;
    if (data.size() - off < caplen) throw std::runtime_error(path + ": truncated record");
    frames.emplace_back(data.begin() + off, data.begin() + off + caplen);
    off += caplen;
  }
  return frames;
}

void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::string out;
  put32(out, kMagicUsec);
  put16(out, 2);
  put16(out, 4);
  put32(out, 0);      // thiszone
  put32(out, 0);      // sigfigs
  put32(out, 65535);  // snaplen
  put32(out, kLinktypeEthernet);
  std::uint32_t usec = 0;
  for (const Frame& f : frames) {
    put32(out, 0);
    put32(out, usec++);
    put32(out, static_cast<std::uint32_t>(f.size()));
    put32(out, static_cast<std::uint32_t>(f.size()));
    out.append(reinterpret_cast<const char*>(f.data()), f.size());
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file.write(out.data(), static_cast<std::streamsize>(out.size())))
    throw std::runtime_error("cannot write " + path);
}

}  // namespace uroce::test
