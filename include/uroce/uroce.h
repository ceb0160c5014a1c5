/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

/// @file
/// uroce's own C++ API: the RDMA objects of a uroce device without
/// libibverbs. Programs written against libibverbs need none of this (they
/// run over uroce unmodified, see docs/running-rdma-programs.md); this is
/// for C++ programs that embed uroce and want its objects directly.
///
/// The objects and their rules are the verbs' (IBA chapter 10): a Device
/// gives protection domains and completion queues; a ProtectionDomain
/// registers memory and creates queue pairs, shared receive queues and
/// address handles; a QueuePair moves messages between registered memory
/// here and there. Calls return 0 or an errno value, as libibverbs does.
/// Objects must be destroyed before the object that made them, and a
/// QueuePair before the CompletionQueues and SharedReceiveQueue it uses.
///
/// Threads: posting to a QueuePair and polling a CompletionQueue may each
/// happen on one thread at a time (any thread); the device's own poll
/// thread runs the datapath, and polling an empty CQ drives it too.
///
/// Example (one side; the other swaps `remote` and its keys out of band):
/// @code
///   std::string err;
///   auto dev = uroce::Device::open("uroce0", &err);
///   auto pd = dev->alloc_pd();
///   auto cq = dev->create_cq(256);
///   auto mr = pd->reg_mr(buf, len, uroce::access::kLocalWrite);
///   auto qp = pd->create_qp({.type = uroce::QpType::kRc, .send_cq = cq.get(),
///                            .recv_cq = cq.get()});
///   qp->connect({.gid = peer_gid, .qpn = peer_qpn, .psn = peer_psn});
///   uroce::Sge sge{reinterpret_cast<std::uint64_t>(buf), len, mr->lkey()};
///   qp->post_send({.opcode = uroce::Opcode::kRdmaWrite, .sges = {&sge, 1},
///                  .remote_addr = peer_addr, .rkey = peer_rkey});
///   auto wc = cq->wait(std::chrono::seconds(5));
/// @endcode

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uroce/config.h"

namespace uroce {

/// A RoCEv2 GID: an IPv6 address, or an IPv4 address mapped into one.
struct Gid {
  std::array<std::uint8_t, 16> raw{};
  /// The GID of an IPv4 or IPv6 address; nullopt if `ip` is neither.
  static std::optional<Gid> from_ip(std::string_view ip);
  std::string to_string() const;
  bool operator==(const Gid&) const = default;
};

/// Numeric values are libibverbs' (IBV_QPT_*, IBV_WR_*, IBV_WC_*, ...).
enum class QpType : std::uint8_t { kRc = 2, kUc = 3, kUd = 4 };
enum class QpState : std::uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kErr };

enum class Opcode : std::uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
};

enum class WcStatus : std::uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kFatalErr = 19,
  kGeneralErr = 21,
};
/// "success", "retry counter exceeded", ... (ibv_wc_status_str's words).
const char* to_string(WcStatus s);

enum class WcOpcode : std::uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

namespace access {
inline constexpr unsigned kLocalWrite = 1;
inline constexpr unsigned kRemoteWrite = 2;
inline constexpr unsigned kRemoteRead = 4;
inline constexpr unsigned kRemoteAtomic = 8;
inline constexpr unsigned kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
}  // namespace access

namespace send_flags {
inline constexpr unsigned kFence = 1;
inline constexpr unsigned kSignaled = 2;
inline constexpr unsigned kSolicited = 4;
inline constexpr unsigned kInline = 8;
}  // namespace send_flags

namespace wc_flags {
inline constexpr unsigned kGrh = 1;      ///< a UD receive: 40 bytes of GRH lead the data
inline constexpr unsigned kWithImm = 2;  ///< imm_data is valid
}  // namespace wc_flags

/// `length` bytes at `addr` in a region registered with key `lkey`.
struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

class AddressHandle;

struct SendWr {
  std::uint64_t wr_id = 0;
  Opcode opcode = Opcode::kSend;
  unsigned flags = send_flags::kSignaled;
  std::span<const Sge> sges;          ///< read (or, for READ and atomics, written) locally
  std::uint32_t imm_data = 0;         ///< network byte order, as it goes on the wire
  std::uint64_t remote_addr = 0;      ///< RDMA and atomics
  std::uint32_t rkey = 0;             ///< RDMA and atomics
  std::uint64_t compare_add = 0;      ///< atomics: the value to compare with, or to add
  std::uint64_t swap = 0;             ///< compare-and-swap
  const AddressHandle* ah = nullptr;  ///< UD: where to
  std::uint32_t remote_qpn = 0;       ///< UD
  std::uint32_t remote_qkey = 0;      ///< UD
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  std::span<const Sge> sges;
};

struct Completion {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0;  ///< network byte order; with wc_flags::kWithImm
  std::uint32_t qp_num = 0;
  std::uint32_t src_qp = 0;  ///< UD: the sender's QPN
  unsigned flags = 0;        ///< wc_flags
  bool ok() const { return status == WcStatus::kSuccess; }
};

/// A named counter and its value (see docs/counters.md).
using Counter = std::pair<std::string, std::uint64_t>;

class CompletionQueue {
 public:
  ~CompletionQueue();
  /// Takes up to `out.size()` completions, oldest first; returns how many.
  /// An empty CQ drives the datapath once before it answers.
  std::size_t poll(std::span<Completion> out);
  /// The next completion, or nullopt after `timeout`.
  std::optional<Completion> wait(std::chrono::milliseconds timeout);

 private:
  friend class Device;
  friend class ProtectionDomain;
  struct Impl;
  explicit CompletionQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class MemoryRegion {
 public:
  /// Deregisters; returns once the datapath can no longer touch the memory.
  ~MemoryRegion();
  std::uint32_t lkey() const;
  std::uint32_t rkey() const;
  void* addr() const;
  std::size_t length() const;

 private:
  friend class ProtectionDomain;
  struct Impl;
  explicit MemoryRegion(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class SharedReceiveQueue {
 public:
  ~SharedReceiveQueue();
  int post_recv(const RecvWr& wr);

 private:
  friend class ProtectionDomain;
  struct Impl;
  explicit SharedReceiveQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class AddressHandle {
 public:
  ~AddressHandle();

 private:
  friend class ProtectionDomain;
  friend class QueuePair;
  struct Impl;
  explicit AddressHandle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct QpInit {
  QpType type = QpType::kRc;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;  ///< receive from it instead of the QP's own queue
  std::uint32_t max_send_wr = 64;
  std::uint32_t max_recv_wr = 64;
  std::uint32_t max_send_sge = 1;
  std::uint32_t max_recv_sge = 1;
  std::uint32_t max_inline_data = 0;
  bool sq_sig_all = false;  ///< every send completes, signaled or not
};

/// The other end of an RC or UC connection, learnt out of band.
struct Remote {
  Gid gid;
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;  ///< its initial send PSN (QueuePair::psn() there)
};

/// How connect() sets the QP up; the defaults suit a lossless or lossy LAN.
struct ConnectOptions {
  std::uint8_t sgid_index = 1;      ///< our GID to send from: 1 is the first configured address
  unsigned access = access::kAll;   ///< what the peer may do to our memory
  std::uint32_t path_mtu = 0;       ///< bytes; 0 takes the port's active MTU
  std::uint8_t timeout = 14;        ///< local ACK timeout, 4.096 us << timeout
  std::uint8_t retry_cnt = 7;       ///< retransmissions before RETRY_EXC_ERR
  std::uint8_t rnr_retry = 7;       ///< 7 retries RNR NAKs forever
  std::uint8_t min_rnr_timer = 12;  ///< RNR NAK timer code (0.64 ms)
  std::uint8_t max_rd_atomic = 16;  ///< READs and atomics we may have outstanding
  std::uint8_t max_dest_rd_atomic = 16;  ///< ... and the peer's we accept
  std::uint32_t qkey = 0x11111111;       ///< UD
};

class QueuePair {
 public:
  /// Leaves the engine: no packet reaches it and nothing completes after.
  ~QueuePair();
  std::uint32_t qpn() const;
  /// Its initial send PSN, chosen at random: tell it to the peer.
  std::uint32_t psn() const;
  QpState state() const;

  /// RESET -> INIT -> RTR -> RTS. RC and UC: towards `peer`, whose MAC
  /// it resolves with ARP (EHOSTUNREACH if nobody answers). UD: `peer` is
  /// unused; datagrams name their destination.
  int connect(const Remote& peer, const ConnectOptions& options = {});

  /// 0, EINVAL (bad WR, or the QP is not in RTS), or ENOMEM (queue full).
  int post_send(const SendWr& wr);
  /// 0, EINVAL, or ENOMEM.
  int post_recv(const RecvWr& wr);

  /// UD: receive the datagrams sent to the multicast group `group` (an
  /// IPv4 group as its IPv4-mapped GID, or an IPv6 one), as
  /// ibv_attach_mcast. EINVAL for another QP type or a GID that is not a
  /// group, ENOMEM past the device's limits. A QP destroyed while
  /// attached leaves its groups.
  int attach_mcast(const Gid& group);
  /// EINVAL as attach_mcast, and for a group the QP is not attached to.
  int detach_mcast(const Gid& group);

  /// The transport's counters of this QP (retransmissions, NAKs, ...).
  std::vector<Counter> counters() const;

 private:
  friend class ProtectionDomain;
  struct Impl;
  explicit QueuePair(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class ProtectionDomain {
 public:
  ~ProtectionDomain();
  /// Registers [addr, addr + length) for `access`; null with *err (EINVAL
  /// for remote write or atomic access without local write, ENOMEM when
  /// the device's table is full).
  std::unique_ptr<MemoryRegion> reg_mr(void* addr, std::size_t length, unsigned access,
                                       int* err = nullptr);
  /// Null with *err: EINVAL for a missing CQ or sizes beyond the device's.
  std::unique_ptr<QueuePair> create_qp(const QpInit& init, int* err = nullptr);
  std::unique_ptr<SharedReceiveQueue> create_srq(std::uint32_t max_wr, std::uint32_t max_sge,
                                                 int* err = nullptr);
  /// A UD destination: the peer's GID, sent from our GID `sgid_index`;
  /// resolves the peer's MAC (EHOSTUNREACH if nobody answers).
  std::unique_ptr<AddressHandle> create_ah(const Gid& dgid, std::uint8_t sgid_index = 1,
                                           int* err = nullptr);

 private:
  friend class Device;
  struct Impl;
  explicit ProtectionDomain(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct PortInfo {
  bool active = false;           ///< the link is up
  std::uint32_t active_mtu = 0;  ///< bytes: the largest IB MTU the link carries
  std::vector<Gid> gids;         ///< 0: link-local; then one per configured address
  std::uint64_t node_guid = 0;
};

class Device {
 public:
  /// Opens the device `dc` describes (its DPDK port, the engine, a poll
  /// thread); null with *error saying why.
  static std::unique_ptr<Device> open(const DeviceConfig& dc, const Config& config,
                                      std::string* error);
  /// Opens the device called `name` in the configuration (UROCE_CONFIG and
  /// the environment, see docs/configuration.md).
  static std::unique_ptr<Device> open(const std::string& name, std::string* error);
  ~Device();

  const std::string& name() const;
  PortInfo port() const;
  std::unique_ptr<ProtectionDomain> alloc_pd();
  /// A CQ of `depth` entries; null with *err (EINVAL) for a depth of 0 or
  /// beyond the device's.
  std::unique_ptr<CompletionQueue> create_cq(std::uint32_t depth, int* err = nullptr);

  /// Runs the datapath once on this thread. Also orders memory: what the
  /// peer wrote into our regions before this call is visible after it.
  void poll();

  /// The engine's counters (frames, bursts, drops by reason, ARP, ...) and
  /// the PFC counters (rx_prio3_pause, ...).
  std::vector<Counter> counters() const;

 private:
  struct Impl;
  explicit Device(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uroce
