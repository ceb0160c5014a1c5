/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// One end of a two-process RoCEv2 exchange over a real DPDK port, for the
// two-process tests and benchmarks: a uroce device (lib/verbs: EAL, port,
// engine and poll thread, memory regions), one RC QP; the two ends swap QP
// numbers, PSNs and keys through files in a shared directory, and the
// device resolves the peer's GID with ARP.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "transport/qp.h"
#include "verbs/device.h"

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
  bool srq = false;       ///< the RC QP takes its receives from a shared receive queue
  std::uint32_t mtu = 0;  ///< link MTU; 0 keeps the port's
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

  transport::Qp& qp() { return *qp_; }
  transport::Cq& send_cq() { return scq_; }
  transport::Cq& recv_cq() { return rcq_; }
  /// Posts a receive to the RC QP, or to its SRQ if it has one.
  int post_recv(const transport::RecvWr& wr) { return o_.srq ? srq_.post(wr) : qp_->post_recv(wr); }

  /// A UD QP beside the RC one, with CQs of its own, and the route and
  /// QPN of the peer's UD QP (after connect()).
  transport::Qp& ud() { return *ud_; }
  transport::Cq& ud_send_cq() { return ud_scq_; }
  transport::Cq& ud_recv_cq() { return ud_rcq_; }
  const wire::RoceRoute& peer_ud_route() const { return peer_ud_route_; }
  std::uint32_t peer_ud_qpn() const { return peer_ud_qpn_; }
  static constexpr std::uint32_t kUdQkey = 0x11111111;
  verbs::Device& device() { return *dev_; }

  /// Registers [p, p + n) for every access; returns the key.
  std::uint32_t reg(const void* p, std::size_t n);

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
  static constexpr verbs::PdId kPd = 1;
  EndpointOptions o_;
  std::unique_ptr<verbs::Device> dev_;
  std::unique_ptr<verbs::PdMemory> memory_;
  transport::Cq scq_{1024};
  transport::Cq rcq_{1024};
  transport::RecvQueue srq_{256, 4};
  std::unique_ptr<transport::Qp> qp_;
  std::uint32_t psn_ = 0;
  transport::Cq ud_scq_{256};
  transport::Cq ud_rcq_{256};
  std::unique_ptr<transport::Qp> ud_;
  wire::RoceRoute peer_ud_route_;
  std::uint32_t peer_ud_qpn_ = 0;
};

}  // namespace uroce::test
