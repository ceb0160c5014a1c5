/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// One end of a two-process RoCEv2 exchange over a real DPDK port, for the
// two-process tests and benchmarks, written against uroce's public C++
// API (include/uroce/uroce.h) alone: a device, an RC QP (optionally on a
// shared receive queue) and a UD QP beside it; the two ends swap QP
// numbers, PSNs and keys through files in a shared directory, and the
// device resolves the peer's GID with ARP.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "uroce/uroce.h"

namespace uroce::test {

using Info = std::map<std::string, std::uint64_t>;

struct EndpointOptions {
  std::string role;  ///< "a" or "b": names the files this end writes
  std::string device;
  std::string ip;
  std::string peer;
  std::string dir;
  FaultSettings fault;
  PfcSettings pfc;
  bool hugepages = false;
  bool priority_tag = false;      ///< RoCE frames carry an 802.1Q priority tag
  bool ecn = false;               ///< RoCE packets leave ECN-capable
  bool selective_repeat = false;  ///< the device offers selective repeat
  std::uint16_t vlan_id = 0;      ///< the device's VLAN, 0 for none
  std::uint8_t timeout = 14;      ///< the RC QP's local ACK timeout (4.096 us << timeout)
  bool srq = false;               ///< the RC QP takes its receives from a shared receive queue
  std::uint32_t mtu = 0;          ///< link MTU; 0 keeps the port's
};

/// Prints the reason and exits the process with status 1.
[[noreturn]] void fail(const std::string& why);

class Endpoint {
 public:
  static constexpr std::uint32_t kUdQkey = 0x11111111;

  explicit Endpoint(const EndpointOptions& o);
  ~Endpoint();

  QueuePair& qp() { return *qp_; }
  CompletionQueue& send_cq() { return *scq_; }
  CompletionQueue& recv_cq() { return *rcq_; }
  /// Posts a receive to the RC QP, or to its SRQ if it has one.
  int post_recv(const RecvWr& wr) { return srq_ ? srq_->post_recv(wr) : qp_->post_recv(wr); }

  /// A UD QP beside the RC one, with CQs of its own, and an address handle
  /// for the peer's UD QP (after connect()).
  QueuePair& ud() { return *ud_; }
  CompletionQueue& ud_send_cq() { return *ud_scq_; }
  CompletionQueue& ud_recv_cq() { return *ud_rcq_; }
  const AddressHandle& peer_ud_ah() const { return *peer_ah_; }
  std::uint32_t peer_ud_qpn() const { return peer_ud_qpn_; }
  Device& device() { return *dev_; }

  /// Registers [p, p + n) for every access; returns the key.
  std::uint32_t reg(const void* p, std::size_t n);

  /// Publishes our QP's number and PSN and `extra`, waits for the peer's,
  /// and connects both QPs. Returns the peer's info.
  Info connect(const Info& extra);
  /// Tells the peer we reached `name` and waits until it has too.
  void sync(const std::string& name, std::chrono::seconds limit = std::chrono::seconds(120));

  /// Posts, waiting while the send queue is full.
  void post(const SendWr& wr);
  /// The next completion, or fail() after `limit`.
  Completion wait(CompletionQueue& cq, std::chrono::seconds limit = std::chrono::seconds(60));

  /// Prints "stat NAME VALUE" for every counter of the RC QP and the engine.
  void print_stats();

 private:
  EndpointOptions o_;
  std::unique_ptr<Device> dev_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionQueue> scq_, rcq_, ud_scq_, ud_rcq_;
  std::unique_ptr<SharedReceiveQueue> srq_;
  std::unique_ptr<QueuePair> qp_, ud_;
  std::vector<std::unique_ptr<MemoryRegion>> mrs_;
  std::unique_ptr<AddressHandle> peer_ah_;
  std::uint32_t peer_ud_qpn_ = 0;
};

}  // namespace uroce::test
