/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Classic libpcap files (LINKTYPE_ETHERNET), enough for tests to read
// captures and to hand frames to tshark.

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::test {

using Frame = std::vector<std::uint8_t>;

/// Reads every frame of a little- or big-endian, microsecond or nanosecond
/// pcap file. Throws std::runtime_error on a malformed file.
std::vector<Frame> read_pcap(const std::string& path);

/// Writes frames to a new pcap file. Throws std::runtime_error on failure.
void write_pcap(const std::string& path, const std::vector<Frame>& frames);

}  // namespace uroce::test
