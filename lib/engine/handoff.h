/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The engines of one device on several lcores (engine.md, "Several
// lcores"): each runs on a queue of the port and owns the QPs whose QPN
// falls to it, as a NIC's queues each serve their share of the flows. A
// queue receives what the NIC's RSS (or the peer, on memif) puts on it,
// which may be for another lcore's QP: such a frame is handed to the
// lcore that owns its QP, whole and unparsed, and given back to the lcore
// whose port queue it came from once it was received there (the port's
// buffers go back by the thread that took them). What is not RoCE (ARP,
// neighbour discovery, ping, PAUSE) goes to lcore 0, which runs the host
// stack. Boxes are taken under a lock once per burst, not per frame, a
// spin lock: it is held for a vector's append, and a mutex's lock and
// unlock cost more than the rest of a small burst's handing over.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "port/params.h"
#include "port/port.h"
#include "transport/spin_lock.h"
#include "wire/bytes.h"
#include "wire/classify.h"
#include "wire/ib_headers.h"

namespace uroce::engine {

/// Lcores one device may run its engine on.
inline constexpr std::uint16_t kMaxLcores = 16;

/// A frame handed from one lcore to another: plain data, copied as such
/// through the boxes.
struct HandedFrame {
  /// The port's buffer; for a copy, its bytes, and as handle the
  /// std::vector that holds them (the receiver deletes it).
  port::RxFrame frame;
  wire::FrameClass cls;    ///< its classification, done once by the lcore that received it
  std::uint16_t from = 0;  ///< the lcore whose port queue it came from
  /// Not a port's buffer (a frame the device sent itself): nothing to
  /// give back.
  bool copy = false;
};
static_assert(std::is_trivially_copyable_v<HandedFrame>);

class Handoff {
 public:
  explicit Handoff(std::uint16_t lcores);
  /// Frees the copies nobody took (the port's buffers go with the port).
  ~Handoff();
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;

  std::uint16_t lcores() const { return lcores_; }

  /// The lcore whose engine owns QP `qpn`: QPNs are spread over the
  /// lcores by their low bits' remainder (a QPN is random, so each lcore
  /// gets its share); QP 0, QP 1 and the multicast QPN are lcore 0's.
  std::uint16_t owner(std::uint32_t qpn) const {
    if (qpn <= 1 || qpn == wire::kMulticastQpn) return 0;
    return static_cast<std::uint16_t>(qpn % lcores_);
  }
  /// The lcore a received frame is for: a RoCEv2 frame's destination
  /// QP's owner, lcore 0 for anything else (the host stack's).
  std::uint16_t lcore_of(wire::ConstBytes frame, const wire::FrameClass& c) const;

  /// Hands `f`, received on lcore `from`'s port queue, to lcore `to`
  /// (staged: it leaves with flush(from)). False when `to`'s box is full
  /// (the frame is then still the caller's, to release and count).
  bool pass(std::uint16_t from, std::uint16_t to, const port::RxFrame& f,
            const wire::FrameClass& c);
  /// Hands `to` a copy of `frame` (one the device sent to itself).
  bool pass_copy(std::uint16_t from, std::uint16_t to, wire::ConstBytes frame,
                 const wire::FrameClass& c);
  /// Gives the frames lcore `lcore` received from the others back to
  /// their lcores (staged too), and clears `frames`.
  void give_back(std::uint16_t lcore, std::vector<HandedFrame>& frames);
  /// Delivers what lcore `from` staged.
  void flush(std::uint16_t from);

  /// What was handed to `lcore`, appended to `out`.
  void take(std::uint16_t lcore, std::vector<HandedFrame>& out);
  /// The frames of `lcore`'s port queue the others are done with,
  /// appended to `out`, for it to release.
  void take_returned(std::uint16_t lcore, std::vector<port::RxFrame>& out);

 private:
  // One lcore's mailbox, written by the others under its lock.
  struct alignas(64) Box {
    transport::SpinLock mu;
    std::vector<HandedFrame> in;      ///< frames handed to this lcore
    std::vector<port::RxFrame> back;  ///< this lcore's frames, given back
    std::atomic<bool> has_in{false};  ///< in is not empty: most turns find it so
    std::atomic<bool> has_back{false};
    std::atomic<std::uint32_t> held{0};  ///< in's size, bounded by kMaxHandedFrames
  };
  // What one lcore staged for the others, its own thread only.
  struct Staged {
    std::array<std::vector<HandedFrame>, kMaxLcores> to;
    std::array<std::vector<port::RxFrame>, kMaxLcores> back;
  };
  bool reserve(std::uint16_t to);
  const std::uint16_t lcores_;
  std::unique_ptr<Box[]> boxes_;
  std::unique_ptr<Staged[]> staged_;
};

}  // namespace uroce::engine
