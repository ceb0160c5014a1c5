/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The host side of one device, run by the device daemon for every program
// of the host (the "software SR-IOV" shape: the daemon switches frames,
// each program keeps its queue pairs and their memory). The daemon's own
// engine runs the port: the host stack answers ARP, ND and ping, software
// PFC and the fault decorator apply, frames to the device's own addresses
// loop back through every check. What the engine's (absent) QPs do not
// take goes to the program that owns the destination QPN, through that
// program's receive ring; what programs send comes out of their transmit
// rings, checked (their MAC, IPs, VLAN and, for datagrams, the QPNs they
// own), round robin with a budget each, onto the engine's transmit path.
//
// One thread runs it (the daemon's loop): attach, detach, the QPN calls
// and the engine's iterations. for_each_counter may be called from any.

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/counters.h"
#include "daemon/host_xrc.h"
#include "engine/engine.h"
#include "port/port.h"
#include "port/shm_ring.h"
#include "uroce/config.h"
#include "wire/ip.h"

namespace uroce::daemon {

/// One attached program: its control socket, its rings and its QPNs.
class Program {
 public:
  Program(int sock, pid_t pid, std::unique_ptr<port::ShmRegion> rings);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  int sock() const { return sock_; }
  pid_t pid() const { return pid_; }
  const port::ShmRegion& rings() const { return *rings_; }
  const ProgramCounters& counters() const { return counters_; }
  std::size_t qp_count() const { return qpns_.size(); }

 private:
  friend class HostSwitch;
  const int sock_;
  const pid_t pid_;
  std::unique_ptr<port::ShmRegion> rings_;
  port::RingConsumer from_;  ///< what it sends
  port::RingProducer to_;    ///< what it receives
  std::vector<std::uint32_t> qpns_;
  std::vector<std::uint64_t> cm_services_;  ///< what its CM listens on
  std::vector<std::uint32_t> comm_ids_;     ///< its CM's local comm IDs (and SIDR request IDs)
  std::unordered_map<std::uint32_t, std::uint64_t>
      cm_ports_;     ///< its CM's bindings: key -> ServiceID
  bool cm_ = false;  ///< its CM has spoken or listened
  ProgramCounters counters_;
};

class HostSwitch final : private engine::Forwarder {
 public:
  /// `port` is the device's (faults included), `ec` its engine's
  /// configuration (verbs::Device::engine_setup).
  HostSwitch(const DeviceConfig& dc, port::Port& port, engine::EngineConfig ec);
  ~HostSwitch();

  const DeviceConfig& config() const { return cfg_; }
  engine::Engine& engine() { return *engine_; }
  /// The device's addresses are now these (a netdev device's interface
  /// gained or lost one), in EngineConfig::addresses' order.
  void set_addresses(std::vector<wire::IpAddr> addresses);
  port::Port& port() { return port_; }

  /// Attaches a program on socket `sock` (which stays the caller's):
  /// makes its rings. Null with *error when they cannot be made.
  Program* attach(int sock, pid_t pid, std::string* error);
  /// Drops a program, its rings and its QPNs: frames for them are dropped
  /// from now on, and their peers see a dead host.
  void detach(Program* p);
  /// A QPN unique on the host, now the program's; 0 when the program has
  /// as many as a device allows.
  std::uint32_t alloc_qpn(Program& p);
  /// False when the QPN is not the program's.
  bool free_qpn(Program& p, std::uint32_t qpn);
  /// The ServiceIDs the program's connection manager listens on now: REQs
  /// and SIDR_REQs for them go to it (to the first program that listens,
  /// when several do).
  void set_cm_services(Program& p, const std::vector<std::uint64_t>& service_ids);
  /// The host's port spaces, one bind list per port as the kernel keeps
  /// them: binds `key` of the program on the port of `service_id` (again,
  /// with new terms, if it holds it) unless another program's binding
  /// stands in the way as cma_check_port decides: 0, EADDRINUSE or
  /// EADDRNOTAVAIL. `flags` are port::Port::CmBindFlags.
  int bind_cm_port(Program& p, std::uint32_t key, std::uint64_t service_id, const wire::IpAddr& ip,
                   unsigned flags);
  void unbind_cm_port(Program& p, std::uint32_t key);
  /// The host's XRC domains (host_xrc.h), each call HostXrc's of the same
  /// name, holding the engine. A target QP's QPN and an SRQ's number must
  /// be the program's (alloc_qpn).
  std::int64_t open_xrc_domain(Program& p, int fd, int oflags);
  bool close_xrc_domain(Program& p, std::uint32_t domain);
  bool add_xrc_srq(Program& p, std::uint32_t domain, std::uint32_t srqn);
  bool remove_xrc_srq(Program& p, std::uint32_t srqn);
  int open_xrc_target(Program& p, std::uint32_t* domain, std::uint32_t qpn, bool create);
  bool close_xrc_target(Program& p, std::uint32_t qpn);
  const std::vector<std::unique_ptr<Program>>& programs() const { return programs_; }

  /// The device's counters (its engine's), each attached program's, and
  /// their sum over every program the device has had, as (scope, name,
  /// value): "engine", "drop", "pfc", "process:<pid>", "programs".
  using CounterFn =
      std::function<void(std::string_view scope, std::string_view name, std::uint64_t value)>;
  void for_each_counter(const CounterFn& fn);

 private:
  // engine::Forwarder
  bool forward_roce(const wire::RocePacket& pkt, wire::ConstBytes frame) override;
  void forward_all(wire::ConstBytes frame) override;
  std::uint32_t pull(engine::Nanos now) override;

  void deliver(Program& p, wire::ConstBytes frame);
  /// Takes up to a turn's frames from the program's ring to the port.
  std::uint32_t pull_from(Program& p);
  /// Why a frame a program sent may not leave, or kCount when it may.
  ProgramCounter check(const Program& p, wire::ConstBytes frame) const;
  bool is_local(const wire::IpAddr& ip) const;
  bool owns(const Program& p, std::uint32_t qpn) const;
  /// A management datagram to QP 1: to the program whose connection it
  /// names, or that listens on the ServiceID a request asks for.
  void forward_mad(wire::ConstBytes frame);
  /// Learns which program a MAD it sends speaks for (its comm ID).
  void learn_mad(Program& p, wire::ConstBytes frame);
  void forget_cm(Program& p);
  void unbind_cm_port_locked(Program& p, std::uint32_t key);
  /// Whether the program's end of its connection is closed (it exited)
  /// though the server has not dropped it yet.
  static bool hung_up(const Program& p);

  const DeviceConfig cfg_;
  port::Port& port_;
  std::vector<wire::IpAddr> addresses_;
  const wire::MacAddr mac_;
  std::unique_ptr<engine::Engine> engine_;
  std::vector<std::unique_ptr<Program>> programs_;
  std::unordered_map<std::uint32_t, Program*> qpns_;  ///< the host's QPN space
  /// The host's connection manager, spread over the programs': who owns
  /// each comm ID and who listens on each ServiceID.
  std::unordered_map<std::uint32_t, Program*> comm_ids_;
  std::unordered_map<std::uint64_t, Program*> cm_services_;
  struct CmBinding {
    Program* program = nullptr;
    std::uint32_t key = 0;
    wire::IpAddr ip;
    unsigned flags = 0;
  };
  std::unordered_map<std::uint64_t, std::vector<CmBinding>> cm_ports_;  ///< by ServiceID
  HostXrc xrc_;
  std::size_t rr_ = 0;  ///< whose ring is read first
  mutable std::mutex
      mu_;  ///< programs_, their QPNs and retired_ changing, against for_each_counter
  /// The counters of the programs that detached, summed.
  std::array<std::uint64_t, ProgramCounters::kSize> retired_{};
};

}  // namespace uroce::daemon
