/* SPDX-License-Identifier: BSD-3-Clause */
#include "log/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace uroce::log {

spdlog::logger& get() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("uroce");
    l->set_pattern("uroce[%P] %^%l%$: %v");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return *logger;
}

bool set_level(std::string_view level) {
  const auto lvl = spdlog::level::from_str(std::string(level));
  // from_str answers "off" for anything it does not know.
  if (lvl == spdlog::level::off && level != "off") return false;
  get().set_level(lvl);
  return true;
}

}  // namespace uroce::log
