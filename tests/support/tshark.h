/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Runs tshark over a pcap file and returns the fields it decoded, one map
// per frame: Wireshark is the independent judge of what uroce puts on the
// wire.

#include <map>
#include <string>
#include <vector>

namespace uroce::test {

using DecodedFrame = std::map<std::string, std::string>;

/// Decodes `pcap` with tshark (`-T fields`, first occurrence of each field)
/// and returns, per frame, field name -> displayed value ("" when absent).
/// The heuristic dissectors of InfiniBand payloads (RPC-over-RDMA, EoIB,
/// SDP, iSER, NVMe-oF, SMB Direct, ...) are disabled: they claim
/// arbitrary SEND payloads and report a wrong guess as malformed
/// (Wireshark 4.0). Throws std::runtime_error when tshark
/// cannot be run or fails.
/// `prefs` are extra `-o name:value` preferences.
std::vector<DecodedFrame> tshark_decode(const std::string& pcap,
                                        const std::vector<std::string>& fields,
                                        const std::vector<std::string>& prefs = {});

/// Parses a tshark number: decimal, or hex with 0x, or "True"/"False".
unsigned long long tshark_number(const std::string& value);

/// A fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace uroce::test
