/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/pipe_port.h"

#include <algorithm>

namespace uroce::test {

namespace {

// A queue of a pipe as the device's lcore sees it: the queue's PipePort,
// which the pipe keeps.
class QueueRef final : public port::Port {
 public:
  explicit QueueRef(PipePort& q) : q_(q) {}
  std::uint16_t rx_burst(port::RxFrame* out, std::uint16_t max) override {
    return q_.rx_burst(out, max);
  }
  void rx_release(port::RxFrame* frames, std::uint16_t n) override { q_.rx_release(frames, n); }
  bool tx_alloc(std::uint32_t size, port::TxFrame& out) override { return q_.tx_alloc(size, out); }
  std::uint16_t tx_burst(port::TxFrame* frames, std::uint16_t n) override {
    return q_.tx_burst(frames, n);
  }
  void tx_free(port::TxFrame& frame) override { q_.tx_free(frame); }
  wire::MacAddr mac() const override { return q_.mac(); }
  std::uint32_t mtu() const override { return q_.mtu(); }
  bool link_up() const override { return q_.link_up(); }
  std::uint32_t speed_mbps() const override { return q_.speed_mbps(); }

 private:
  PipePort& q_;
};

}  // namespace

std::unique_ptr<port::Port> PipePort::open_queue(std::uint16_t q) {
  if (q == 0 || q > queues_.size()) return nullptr;
  return std::make_unique<QueueRef>(*queues_[q - 1u]);
}

std::uint16_t PipePort::rx_burst(port::RxFrame* out, std::uint16_t max) {
  std::lock_guard lock(mu_);
  std::uint16_t n = 0;
  while (n < max && !rx_.empty()) {
    auto buf = std::make_unique<std::vector<std::uint8_t>>(std::move(rx_.front()));
    rx_.pop_front();
    out[n].data = wire::ConstBytes(buf->data(), buf->size());
    out[n].handle = buf.get();
    in_use_.push_back(std::move(buf));
    ++n;
  }
  return n;
}

void PipePort::rx_release(port::RxFrame* frames, std::uint16_t n) {
  std::lock_guard lock(mu_);
  for (std::uint16_t i = 0; i < n; ++i) {
    std::erase_if(in_use_, [&](const auto& b) { return b.get() == frames[i].handle; });
  }
}

bool PipePort::tx_alloc(std::uint32_t size, port::TxFrame& out) {
  auto* buf = new std::vector<std::uint8_t>(std::max<std::uint32_t>(size, 60));
  out.room = wire::Bytes(buf->data(), buf->size());
  out.length = 0;
  out.handle = buf;
  return true;
}

std::uint16_t PipePort::tx_burst(port::TxFrame* frames, std::uint16_t n) {
  for (std::uint16_t i = 0; i < n; ++i) {
    auto* buf = static_cast<std::vector<std::uint8_t>*>(frames[i].handle);
    buf->resize(frames[i].length);
    if (keep_sent) sent.push_back(*buf);
    if (peer_) peer_->inject(std::move(*buf));
    delete buf;
  }
  return n;
}

void PipePort::tx_free(port::TxFrame& frame) {
  delete static_cast<std::vector<std::uint8_t>*>(frame.handle);
  frame.handle = nullptr;
}

}  // namespace uroce::test
