/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Values as uroce-switch's command line and file spell them: rates
// ("300mbit"), times ("100us"), sizes in KiB, probabilities and counts.

#include <cstdint>
#include <optional>
#include <string>

namespace uroce::sw {

/// Parses a rate: "300mbit", "10gbit", "1.5gbit", "64kbit" or bits per
/// second; nullopt when it is not one.
std::optional<std::uint64_t> parse_rate(const std::string& text);
/// Parses a time: "100us", "2ms", "1s", "500ns"; nullopt when not one.
std::optional<std::uint64_t> parse_time_ns(const std::string& text);
/// Parses a finite number, all of `text` ("0.5", "1e3"); nullopt when not one.
std::optional<double> parse_number(const std::string& text);

// The same for a value given under `what` (an option, or a key as
// TomlReader::where names it): they throw config::Error naming it.

std::uint64_t rate_bps(const std::string& what, const std::string& text);
std::uint64_t time_ns(const std::string& what, const std::string& text);
double probability(const std::string& what, const std::string& text);
/// A decimal whole number, digits only.
std::uint64_t whole_number(const std::string& what, const std::string& text);
/// `kib` KiB in bytes, refusing what would not fit (or make sense): up to 1 TiB.
std::uint64_t kib_bytes(const std::string& what, double kib);

}  // namespace uroce::sw
