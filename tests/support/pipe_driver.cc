/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/pipe_driver.h"

#include <map>
#include <mutex>
#include <string>

#include "support/pipe_port.h"
#include "verbs/port_driver.h"

namespace uroce::test {

namespace {

constexpr std::string_view kPrefix = "pipe:";

bool claims(const DeviceConfig& dc) { return dc.port.rfind(kPrefix, 0) == 0; }

std::unique_ptr<port::Port> open(const DeviceConfig& dc, const Config&, std::string*) {
  static std::mutex mu;
  static std::map<std::string, PipePort*> waiting;  // the first end of each pipe
  static std::uint8_t next_mac = 1;
  std::lock_guard lock(mu);
  auto port = std::make_unique<PipePort>(wire::MacAddr{{0x02, 0x70, 0x69, 0x70, 0x65, next_mac++}},
                                         10000, dc.lcores);
  if (auto it = waiting.find(dc.port); it != waiting.end()) {
    PipePort::join(*it->second, *port);
    waiting.erase(it);
  } else {
    waiting[dc.port] = port.get();
  }
  return port;
}

}  // namespace

void register_pipe_driver() {
  static std::once_flag once;
  std::call_once(once, [] { verbs::register_port_driver({"pipe", claims, open, nullptr}); });
}

}  // namespace uroce::test
