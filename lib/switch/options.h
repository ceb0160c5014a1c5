/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// uroce-switch's command line and TOML file. The command line covers the
// common cases; the file the rest (per-port impairments, per-queue
// limits and weights, the priority map). Options given on the command
// line win over the file. Errors name the option or key.

#include <cstdint>
#include <string>
#include <vector>

#include "switch/switch.h"
#include "switch/units.h"

namespace uroce::sw {

struct SwitchOptions {
  std::vector<std::string> ports;  ///< DPDK device of each port, in order
  SwitchConfig cfg;
  std::string stats_file;            ///< time series, written while running
  std::string stats_format = "csv";  ///< csv or json (JSON lines)
  std::uint32_t stats_interval_ms = 100;
  std::string control;  ///< Unix socket for "port N down|up"
  bool hugepages = false;
  unsigned eal_memory_mb = 512;
  double duration_s = 0;  ///< 0: until SIGINT or SIGTERM
  std::string log_level = "warn";
};

/// Parses the command line (argv[0] skipped) and the file it names with
/// --config. Returns an empty string, or what is wrong; "help" for -h.
std::string parse_switch_options(int argc, const char* const* argv, SwitchOptions* out);

/// Applies a TOML document to `out` (what --config does).
std::string apply_switch_toml(const std::string& text, const std::string& origin,
                              SwitchOptions* out);

extern const char* const kSwitchUsage;

}  // namespace uroce::sw
