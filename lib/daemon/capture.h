/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The captures of one device (uroce-stat capture): the clients whose
// connections asked for one, and the tap that sends each of them every
// frame the device's port sees and every frame the device loops back to
// itself. Several clients may capture at once; each gets every frame.
// Frames go out without waiting: a client that reads too slowly loses
// frames (counted, and told in the next frame it gets), never the device
// its time. With no client the port's tap is unset and costs one branch
// per burst.
//
// The daemon's loop thread only (the port's and the engine's thread, and
// the control socket's), except for_each_counter.

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "port/capture_port.h"
#include "wire/bytes.h"

namespace uroce::daemon {

class Capture {
 public:
  explicit Capture(port::CapturePort& port) : port_(port) {}
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  /// Sends the device's frames to `sock` (which stays the caller's) from
  /// now on.
  void add(int sock);
  /// Stops sending to `sock`; nothing when it was not capturing.
  void remove(int sock);
  std::size_t clients() const { return clients_.size(); }

  /// A frame the device looped back to itself (EngineConfig::loopback_tap).
  void loopback(wire::ConstBytes frame) { port_.show(port::Direction::kLoopback, frame); }

  /// capture_frames (sent to clients) and capture_dropped (a client's
  /// socket was full), over every client. Any thread.
  template <typename F>
  void for_each_counter(F&& fn) const {
    fn(std::string_view("capture_frames"), sent_.load(std::memory_order_relaxed));
    fn(std::string_view("capture_dropped"), dropped_.load(std::memory_order_relaxed));
  }

 private:
  struct Client {
    int sock;
    std::uint32_t dropped;  ///< since it started
  };
  void send(port::Direction d, wire::ConstBytes frame);

  port::CapturePort& port_;
  std::vector<Client> clients_;
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace uroce::daemon
