/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A deterministic network for connection managers: hosts, each with a
// Cma, exchanging their MADs as real RoCEv2 frames (built and parsed by
// lib/wire: UD SEND-only to QP 1), through links with seeded loss,
// duplication, reordering and delay, on simulated time. Nothing here
// stands in for lib/cm: MADs go in through Cma::receive and timers run at
// Cma::next_deadline, as the engine will drive them.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cm/cma.h"
#include "cm/seeded_random.h"
#include "wire/roce_frame.h"

namespace uroce::test {

using cm::Nanos;

/// What a link does to each MAD.
struct CmFaults {
  double drop = 0;
  double duplicate = 0;
  double reorder = 0;    ///< held back by up to reorder_window
  Nanos delay = 50'000;  ///< one way
  Nanos reorder_window = 30 * kMs;
  Nanos cut_at = 0;  ///< from this time on every MAD is lost (0: never)
};

class CmNet;

/// One host: an address, a MAC, a CA GUID and a Cma on channel 0.
class CmHost : public cm::MadSender {
 public:
  CmHost(CmNet& net, int index, const wire::IpAddr& ip, std::uint64_t seed,
         const cm::CmaDevice& device);
  cm::Cma& cma() { return *cma_; }
  const wire::IpAddr& ip() const { return ip_; }
  const wire::MacAddr& mac() const { return mac_; }
  int index() const { return index_; }
  void send_mad(const cm::OutMad& mad) override;

  /// Called after every step of the network: the application's reaction
  /// to events (take them with cma().get_event(0, ...)).
  std::function<void(CmHost&)> app;

 private:
  CmNet& net_;
  int index_;
  wire::IpAddr ip_;
  wire::MacAddr mac_;
  SeededRandom random_;
  std::unique_ptr<cm::Cma> cma_;
};

/// A MAD the network carried: when, from which host, its frame.
struct CapturedMad {
  Nanos at = 0;
  int from = 0;
  std::vector<std::uint8_t> frame;
  std::vector<std::uint8_t> mad;
};

class CmNet {
 public:
  explicit CmNet(std::uint64_t seed);

  /// A host at `ip` (IPv4 or IPv6 text), its device built from `device`
  /// with this address as GID 0 and a GUID of its own.
  CmHost& add_host(const std::string& ip, cm::CmaDevice device = {});
  CmHost& host(int i) { return *hosts_[i]; }

  void set_faults(const CmFaults& f) { faults_ = f; }
  const CmFaults& faults() const { return faults_; }
  /// Drops a MAD the filter returns true for (targeted loss), before faults.
  std::function<bool(const CmHost& from, const cm::Mad& mad)> drop_if;

  Nanos now() const { return now_; }
  /// Runs until `done` or virtual time `limit`; true when `done` held.
  bool run_until(const std::function<bool()>& done, Nanos limit);
  void run_for(Nanos span);
  /// Makes the network step at `t` even if nothing arrives or expires then
  /// (for an application acting later).
  void wake_at(Nanos t) { wakes_.insert(t); }

  /// Hands a frame to the host it is addressed to, now (a forged MAD).
  void inject(int to, const std::vector<std::uint8_t>& mad, const cm::GsiAddress& from);

  const std::vector<CapturedMad>& captured() const { return captured_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t duplicated() const { return duplicated_; }
  std::uint64_t reordered() const { return reordered_; }

 private:
  friend class CmHost;
  struct Arrival {
    Nanos at;
    std::uint64_t seq;
    int to;
    std::vector<std::uint8_t> frame;
    bool operator>(const Arrival& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void transmit(CmHost& from, const cm::OutMad& mad);
  void deliver(const Arrival& a);
  bool step(Nanos limit);
  void run_apps();

  std::mt19937_64 rng_;
  std::uint64_t seed_;
  Nanos now_ = 0;
  std::uint64_t seq_ = 0;
  std::vector<std::unique_ptr<CmHost>> hosts_;
  CmFaults faults_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  std::set<Nanos> wakes_;
  std::vector<CapturedMad> captured_;
  std::uint64_t dropped_ = 0;
  std::uint64_t duplicated_ = 0;
  std::uint64_t reordered_ = 0;
};

}  // namespace uroce::test
