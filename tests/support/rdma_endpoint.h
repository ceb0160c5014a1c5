/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// One end of a two-process RoCEv2 exchange over a real DPDK port, for the
// two-process tests and benchmarks: EAL, the port, an engine with its poll
// thread, one RC QP and a memory table; the two ends swap QP numbers,
// PSNs and keys through files in a shared directory and resolve each
// other with ARP.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "dpdk/dpdk_port.h"
#include "engine/engine.h"
#include "engine/poll_thread.h"
#include "support/sim_memory.h"
#include "transport/qp.h"

namespace uroce::test {

using Info = std::map<std::string, std::uint64_t>;

struct EndpointOptions {
  std::string role;  ///< "a" or "b": names the files this end writes
  std::string device;
  std::string ip;
  std::string peer;
  std::string dir;
  engine::FaultConfig fault;
  bool hugepages = false;
};

/// Prints the reason and exits the process with status 1.
[[noreturn]] void fail(const std::string& why);

class Endpoint {
 public:
  static constexpr unsigned kAllAccess =
      transport::access::kLocalWrite | transport::access::kRemoteWrite |
      transport::access::kRemoteRead | transport::access::kRemoteAtomic;

  explicit Endpoint(const EndpointOptions& o);
  ~Endpoint();

  SimMemory& memory() { return mem_; }
  transport::Qp& qp() { return *qp_; }
  transport::Cq& send_cq() { return scq_; }
  transport::Cq& recv_cq() { return rcq_; }
  engine::Engine& engine() { return *engine_; }

  /// Registers [p, p + n) for every access; returns the key.
  std::uint32_t reg(const void* p, std::size_t n) { return mem_.reg(p, n, kAllAccess); }

  /// Publishes our QP's number and PSN and `extra`, waits for the peer's,
  /// resolves the peer and brings the QP to RTS. Returns the peer's info.
  Info connect(const Info& extra);
  /// Tells the peer we reached `name` and waits until it has too.
  void sync(const std::string& name, std::chrono::seconds limit = std::chrono::seconds(120));

  /// Posts, waiting while the send queue is full.
  void post(const transport::SendWr& wr);
  /// The next completion, or fail() after `limit`.
  transport::Wc wait(transport::Cq& cq, std::chrono::seconds limit = std::chrono::seconds(60));

  /// Prints "stat NAME VALUE" for every QP and engine counter.
  void print_stats();

 private:
  EndpointOptions o_;
  std::unique_ptr<dpdk::DpdkPort> port_;
  std::unique_ptr<engine::Engine> engine_;
  SimMemory mem_;
  transport::Cq scq_{1024};
  transport::Cq rcq_{1024};
  std::unique_ptr<transport::Qp> qp_;
  std::uint32_t psn_ = 0;
  std::unique_ptr<engine::PollThread> poller_;
};

}  // namespace uroce::test
