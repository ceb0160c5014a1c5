/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/capture.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "daemon/protocol.h"

namespace uroce::daemon {

namespace {

// Room for bursts in the client's socket: frames queue there while the
// client writes its file.
constexpr int kClientBuffer = 8 << 20;

std::uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

Capture::~Capture() {
  if (!clients_.empty()) port_.set_tap({});
}

void Capture::add(int sock) {
  // Best effort: the kernel caps it at net.core.wmem_max.
  setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &kClientBuffer, sizeof(kClientBuffer));
  clients_.push_back({sock, 0});
  if (clients_.size() == 1)
    port_.set_tap([this](port::Direction d, wire::ConstBytes f) { send(d, f); });
}

void Capture::remove(int sock) {
  std::erase_if(clients_, [sock](const Client& c) { return c.sock == sock; });
  if (clients_.empty() && port_.capturing()) port_.set_tap({});
}

void Capture::send(port::Direction d, wire::ConstBytes frame) {
  FrameHeader h{realtime_ns(), 0, static_cast<std::uint32_t>(frame.size())};
  for (Client& c : clients_) {
    h.dropped = c.dropped;
    if (send_frame(c.sock, static_cast<std::uint32_t>(d), h, frame.data())) {
      sent_.fetch_add(1, std::memory_order_relaxed);
    } else {
      // Full (EAGAIN), or the client is gone and the control loop will
      // see it hang up.
      ++c.dropped;
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace uroce::daemon
