/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/pipe_port.h"

#include <algorithm>

namespace uroce::test {

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
