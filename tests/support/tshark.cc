/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/tshark.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace uroce::test {

std::vector<DecodedFrame> tshark_decode(const std::string& pcap,
                                        const std::vector<std::string>& fields,
                                        const std::vector<std::string>& prefs) {
  // Payloads are the programs' bytes. Wireshark's heuristics for what
  // rides in an InfiniBand payload guess at them, and a guess that fails
  // is reported as a malformed packet of the guessed protocol: a UD SEND
  // whose first payload byte happens to look like an EoIB header reads as
  // "Malformed Packet: Ethernet". The protocols uroce does not carry are
  // kept out.
  std::string cmd = "tshark -n -r '" + pcap + "'";
  for (const char* guess : {"rpcordma", "infiniband.eoib", "fcoib", "infiniband_sdp", "iser",
                            "lnet", "nvme-rdma", "smb_direct", "smc"})
    cmd += std::string(" --disable-protocol ") + guess;
  cmd += " -T fields -E separator=/t -E occurrence=f";
  for (const std::string& p : prefs) cmd += " -o '" + p + "'";
  for (const std::string& f : fields) cmd += " -e " + f;
  cmd += " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run tshark");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("tshark failed (is it installed? scripts/setup.sh installs it): " +
                             cmd);

  std::vector<DecodedFrame> frames;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    DecodedFrame frame;
    std::size_t start = 0;
    for (const std::string& f : fields) {
      const std::size_t tab = line.find('\t', start);
      frame[f] = line.substr(start, tab == std::string::npos ? std::string::npos : tab - start);
      start = tab == std::string::npos ? line.size() : tab + 1;
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

unsigned long long tshark_number(const std::string& value) {
  if (value == "True") return 1;
  if (value == "False") return 0;
  if (value.empty()) throw std::invalid_argument("tshark_number: empty field");
  return std::stoull(value, nullptr, 0);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/uroce-test-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace uroce::test
