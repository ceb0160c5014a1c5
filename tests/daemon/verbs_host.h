/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// What the daemon tests run traffic with: a verbs device (a program
// attached to the daemon, or the remote host at the pipe's other end)
// with a context, PD, CQ and a registered buffer, and RC and UD
// exchanges between two of them that check every byte.

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "uroce/config.h"
#include "verbs/ah.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"

namespace uroce::test {

using Counters = std::map<std::string, std::uint64_t>;

inline constexpr std::uint32_t kQkey = 0x11111111;
inline constexpr std::uint32_t kGrh = 40;
// Deadlines only bound a failing test: a loaded machine may be slow, and
// nothing here asserts on how long anything took.
inline constexpr std::chrono::milliseconds kLimit{10000};

/// Whether `cond` held within `limit`, looking every millisecond.
template <typename F>
bool eventually(F&& cond, std::chrono::milliseconds limit = kLimit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() > end) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

struct Host {
  /// Opens the device (a test failure, and no dev, when it cannot).
  Host(const DeviceConfig& dc, const Config& c);
  ~Host();

  std::uint64_t addr(std::size_t off) const {
    return reinterpret_cast<std::uint64_t>(buf.data() + off);
  }
  /// The RoCEv2 GID of the configured address.
  std::array<std::uint8_t, 16> gid() const { return dev->gids().at(1).bytes; }

  /// A new QP: RC ones stay in RESET (connect_rc), UD ones go to RTS
  /// with kQkey. Null with *err when the device refuses it.
  verbs::QueuePair* make_qp(transport::QpType type, int* err = nullptr);
  /// An address handle to `dgid`, from the configured address.
  const verbs::Ah& ah_to(const std::array<std::uint8_t, 16>& dgid);
  void post_recv(verbs::QueuePair& qp, std::uint64_t wr_id, std::size_t off, std::uint32_t len);
  /// A signalled work request over [off, off + len) of buf.
  transport::SendWr wr(transport::WrOpcode op, std::uint64_t wr_id, std::size_t off,
                       std::uint32_t len) const;
  void post(verbs::QueuePair& qp, const transport::SendWr& w);
  void send_ud(verbs::QueuePair& qp, const verbs::Ah& ah, std::uint32_t remote_qpn,
               std::uint64_t wr_id, std::size_t off, std::uint32_t len);
  /// Completions until `n` arrived or `limit` passed.
  std::vector<transport::Wc> poll(std::size_t n, std::chrono::milliseconds limit = kLimit);
  /// The next completion, which must be a success.
  transport::Wc expect_ok();
  /// The device's counters as "scope.name".
  Counters counters();

  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 17);
  std::unique_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::Pd> pd;
  std::unique_ptr<verbs::Cq> cq;
  std::unique_ptr<verbs::Mr> mr;
  std::vector<std::unique_ptr<verbs::Ah>> ahs;
  std::vector<std::unique_ptr<verbs::QueuePair>> qps;
};

/// Takes RC QP `q` through INIT and RTR to RTS, toward `peer_qpn` at
/// `peer_gid`. `timeout` is the local ACK timeout code (4.096 us << it).
void connect_rc(verbs::QueuePair& q, const std::array<std::uint8_t, 16>& peer_gid,
                std::uint32_t peer_qpn, std::uint8_t timeout = 14);

/// RC between a and b, over new QPs: a SEND each way, an RDMA WRITE from
/// a into b and a READ of it back; every byte must arrive intact.
void exchange_rc(Host& a, Host& b);
/// UD between a and b, over new QPs: a datagram each way, with the
/// sender's QPN as its source.
void exchange_ud(Host& a, Host& b);

}  // namespace uroce::test
