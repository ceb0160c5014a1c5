/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A program's port on a device the daemon serves: the rings the daemon
// handed over (port/ring_port.h), and the control socket that holds the
// attachment, through which the host's QPNs are asked for. The socket
// hanging up means the daemon is gone: the port has then failed for good
// (Port::failed), and the device with it.
//
// Registered as the port driver of "uroced:<device>" ports, which the
// daemon's device list names (daemon/discovery.h).

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "daemon/protocol.h"
#include "port/port.h"
#include "port/ring_port.h"

namespace uroce::daemon {

class AttachedPort final : public port::Port {
 public:
  /// Attaches to `device` of the daemon on `socket`. Null with *error.
  static std::unique_ptr<AttachedPort> open(const std::string& socket, const std::string& device,
                                            std::string* error);
  ~AttachedPort() override;

  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override {
    return ring_->rx_burst(out, max);
  }
  void rx_release(port::RxFrame* frames, std::uint16_t n) override { ring_->rx_release(frames, n); }
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override {
    return ring_->tx_alloc(size, out);
  }
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override {
    return ring_->tx_burst(frames, n);
  }
  void tx_free(port::TxFrame& frame) override { ring_->tx_free(frame); }
  wire::MacAddr mac() const override { return ring_->mac(); }
  std::uint32_t mtu() const override { return ring_->mtu(); }
  bool link_up() const override { return !failed() && ring_->link_up(); }
  std::uint32_t speed_mbps() const override { return ring_->speed_mbps(); }

  bool shared() const override { return true; }
  std::uint32_t alloc_qpn() override;
  void free_qpn(std::uint32_t qpn) override;
  /// Whether the daemon hung up.
  bool failed() const override;
  void set_cm_services(const std::vector<std::uint64_t>& service_ids) override;
  /// With a daemon from before the host's port spaces the program's
  /// ports are its own, as they were then.
  int bind_cm_port(std::uint32_t key, std::uint64_t service_id, const wire::IpAddr& ip,
                   unsigned flags) override;
  void unbind_cm_port(std::uint32_t key) override;
  /// With a daemon from before shared XRC domains, the program's domains
  /// are its own, as they were then.
  std::int64_t open_xrc_domain(int fd, int oflags) override;
  void close_xrc_domain(std::uint32_t domain) override;
  bool add_xrc_srq(std::uint32_t domain, std::uint32_t srqn) override;
  void remove_xrc_srq(std::uint32_t srqn) override;
  int open_xrc_target(std::uint32_t* domain, std::uint32_t qpn, bool create) override;
  void close_xrc_target(std::uint32_t qpn) override;

 private:
  AttachedPort(std::string socket, int sock, std::unique_ptr<port::RingPort> ring)
      : socket_(std::move(socket)), sock_(sock), ring_(std::move(ring)) {}
  /// Whether the daemon keeps the host's rdma_cm port spaces (asked once;
  /// under call_mu_).
  bool keeps_cm_ports();
  /// Whether the daemon shares XRC domains (likewise).
  bool shares_xrc();
  /// Whether the daemon knows `op`: asked on a connection of its own,
  /// where it answers kError to an op it knows (the connection is not
  /// attached) and hangs up on one it does not.
  bool knows(Op op);
  /// A request with no answer but kDone or kError (under call_mu_):
  /// whether it was kDone.
  bool tell(Op op, std::uint32_t value, std::string text = {});
  const std::string socket_;
  const int sock_;
  std::optional<bool> keeps_cm_ports_;
  std::optional<bool> shares_xrc_;
  std::unique_ptr<port::RingPort> ring_;
  std::mutex call_mu_;  ///< one request at a time on the socket
};

}  // namespace uroce::daemon
