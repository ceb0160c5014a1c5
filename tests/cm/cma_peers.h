/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// rdma_cm applications for the simulated network: a Peer reacts to its
// Cma's events as rping and ucmatose do (resolve the route once the
// address is, connect once the route is, accept a request, complete a
// CONNECT_RESPONSE, disconnect once disconnected), with QPs that record
// the transitions the CM asks of them, and keeps every event it saw.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cm/cm_net.h"
#include "cm/cma.h"

namespace uroce::test {

/// A QP the CM drives: records each modify and its time.
class FakeQp : public cm::QpControl {
 public:
  struct Step {
    cm::QpAttr attr;
    unsigned mask = 0;
    Nanos at = 0;
  };
  explicit FakeQp(const CmNet& net, std::uint32_t qpn) : net_(net), qpn_(qpn) {}
  int modify_qp(std::uint32_t qpn, const cm::QpAttr& attr, unsigned mask) override;

  std::uint32_t qpn() const { return qpn_; }
  cm::QpState state() const { return state_; }
  const std::vector<Step>& steps() const { return steps_; }
  /// When the QP first reached `s`, or nullopt.
  std::optional<Nanos> reached(cm::QpState s) const;
  std::optional<cm::QpState> fail_at;  ///< refuse moving to this state (EINVAL)

 private:
  const CmNet& net_;
  std::uint32_t qpn_;
  cm::QpState state_ = cm::QpState::kReset;
  std::vector<Step> steps_;
};

class Peer {
 public:
  Peer(CmNet& net, CmHost& host);

  cm::Cma& cma() { return host_.cma(); }
  CmHost& host() { return host_; }

  /// A listener on `port` of the any address (or `ip`).
  std::uint32_t listen(cm::PortSpace ps, std::uint16_t port, int backlog = 16,
                       std::optional<wire::IpAddr> ip = std::nullopt);
  /// Starts a connection to `dst`:`port`; address resolution answers at once.
  std::uint32_t connect(cm::PortSpace ps, const wire::IpAddr& dst, std::uint16_t port);
  void disconnect(std::uint32_t id) { cma().disconnect(id, net_.now()); }

  /// Takes and reacts to every queued event.
  void pump();

  std::size_t count(std::uint32_t id, cm::CmaEventType type) const;
  const std::vector<cm::CmaEvent>& events(std::uint32_t id) const;
  const std::vector<cm::CmaEvent>& log() const { return log_; }
  FakeQp* qp(std::uint32_t id);
  /// The id of the first CONNECT_REQUEST this peer saw, 0 if none.
  std::uint32_t first_request() const;

  // Behaviour.
  bool attach_qps = true;       ///< QPs the CM drives; false: the librdmacm way
  bool accept_requests = true;  ///< false: reject them with `reject_data`
  std::vector<std::uint8_t> reject_data;
  Nanos accept_delay = 0;          ///< accept this long after the request
  bool destroy_on_failure = true;  ///< destroy an id on UNREACHABLE, REJECTED, ...
  cm::ConnParam param;             ///< for connect() and accept()
  std::vector<std::uint8_t> private_data;

 private:
  void react(const cm::CmaEvent& e);
  void accept(std::uint32_t id);
  std::uint32_t new_qpn() { return next_qpn_++; }

  CmNet& net_;
  CmHost& host_;
  std::uint32_t next_qpn_;
  std::map<std::uint32_t, std::vector<cm::CmaEvent>> by_id_;
  std::vector<cm::CmaEvent> log_;
  std::map<std::uint32_t, std::unique_ptr<FakeQp>> qps_;
  std::vector<std::pair<Nanos, std::uint32_t>> to_accept_;
};

}  // namespace uroce::test
