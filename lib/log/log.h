/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// uroce's log: one spdlog logger, "uroce", on stderr. The level comes from
// the configuration (log.level, or UROCE_LOG). Nothing logs per packet
// except at trace level.

#include <spdlog/spdlog.h>

#include <string_view>

namespace uroce::log {

/// The logger; created on first use at level warn.
spdlog::logger& get();

/// Sets the level by name (trace, debug, info, warn, error, off); false if
/// the name is none of these.
bool set_level(std::string_view level);

}  // namespace uroce::log
