/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A Port that wraps another (the fault decorator, the capture decorator):
// every call goes to the inner port unless the decorator overrides it. A
// decorator then states only what it changes, and a call the Port
// interface gains reaches the inner port through every decorator.

#include <memory>
#include <utility>
#include <vector>

#include "port/port.h"

namespace uroce::port {

class Decorator : public Port {
 public:
  explicit Decorator(std::unique_ptr<Port> inner) : inner_(std::move(inner)) {}
  Decorator(const Decorator&) = delete;
  Decorator& operator=(const Decorator&) = delete;

  void attach_thread() override { inner_->attach_thread(); }
  bool short_bursts() const override { return inner_->short_bursts(); }
  std::uint16_t rx_burst(RxFrame* out, std::uint16_t max) override {
    return inner_->rx_burst(out, max);
  }
  bool offloads_ipv4_checksum() const override { return inner_->offloads_ipv4_checksum(); }
  void rx_release(RxFrame* frames, std::uint16_t n) override { inner_->rx_release(frames, n); }
  bool tx_alloc(std::uint32_t size, TxFrame& out) override { return inner_->tx_alloc(size, out); }
  std::uint16_t tx_burst(TxFrame* frames, std::uint16_t n) override {
    return inner_->tx_burst(frames, n);
  }
  void tx_free(TxFrame& frame) override { inner_->tx_free(frame); }
  wire::MacAddr mac() const override { return inner_->mac(); }
  std::uint32_t mtu() const override { return inner_->mtu(); }
  bool link_up() const override { return inner_->link_up(); }
  std::uint32_t speed_mbps() const override { return inner_->speed_mbps(); }
  void for_each_stat(const StatFn& fn) const override { inner_->for_each_stat(fn); }
  int enable_hardware_pfc(std::uint8_t lossless, std::uint16_t quanta) override {
    return inner_->enable_hardware_pfc(lossless, quanta);
  }
  bool shared() const override { return inner_->shared(); }
  std::uint32_t alloc_qpn() override { return inner_->alloc_qpn(); }
  void free_qpn(std::uint32_t qpn) override { inner_->free_qpn(qpn); }
  bool failed() const override { return inner_->failed(); }
  void set_cm_services(const std::vector<std::uint64_t>& service_ids) override {
    inner_->set_cm_services(service_ids);
  }
  int bind_cm_port(std::uint32_t key, std::uint64_t service_id, const wire::IpAddr& ip,
                   unsigned flags) override {
    return inner_->bind_cm_port(key, service_id, ip, flags);
  }
  void unbind_cm_port(std::uint32_t key) override { inner_->unbind_cm_port(key); }
  std::int64_t open_xrc_domain(int fd, int oflags) override {
    return inner_->open_xrc_domain(fd, oflags);
  }
  void close_xrc_domain(std::uint32_t domain) override { inner_->close_xrc_domain(domain); }
  bool add_xrc_srq(std::uint32_t domain, std::uint32_t srqn) override {
    return inner_->add_xrc_srq(domain, srqn);
  }
  void remove_xrc_srq(std::uint32_t srqn) override { inner_->remove_xrc_srq(srqn); }
  int open_xrc_target(std::uint32_t* domain, std::uint32_t qpn, bool create) override {
    return inner_->open_xrc_target(domain, qpn, create);
  }
  void close_xrc_target(std::uint32_t qpn) override { inner_->close_xrc_target(qpn); }

  Port& inner() { return *inner_; }

 protected:
  std::unique_ptr<Port> inner_;
};

}  // namespace uroce::port
