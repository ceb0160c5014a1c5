/* SPDX-License-Identifier: BSD-3-Clause */
// A second process in an XRC domain (daemon_xrc_test.cc): attaches to the
// first device of the daemon on SOCKET, opens the domain of FILE (which
// the test's process made), makes an SRQ in it with COUNT receives of
// LENGTH bytes and a region a WRITE may reach, and says so on stdout:
//   "ready <srqn> <region address> <rkey>"
// Then it waits for COUNT messages through a target QP of the test's
// process, which it never opens: message i must be LENGTH bytes of
// pattern(i), and the region must hold pattern(1000) once the last has
// come. Prints "ok" and exits 0, or says what was wrong and exits 1.
//
//   xrc_member SOCKET FILE COUNT LENGTH

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/discovery.h"
#include "verbs/access.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/srq.h"
#include "verbs/xrcd.h"

namespace {

using namespace uroce;

std::uint8_t pattern(std::uint32_t message, std::uint32_t k) {
  return static_cast<std::uint8_t>(message * 31 + k);
}

int fail(const std::string& why) {
  std::printf("%s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

int run(const std::string& socket, const std::string& file, std::uint32_t count,
        std::uint32_t length) {
  Config c;
  c.daemon_socket = socket;
  const std::vector<DeviceConfig> devs = daemon::daemon_devices(c);
  if (devs.empty()) return fail("no daemon device");
  std::string err;
  auto dev = verbs::Device::open(devs[0], c, &err);
  if (!dev) return fail("device: " + err);
  auto ctx = std::make_unique<verbs::Context>(*dev, nullptr);
  auto pd = verbs::Pd::create(*ctx);
  std::unique_ptr<verbs::Cq> cq;
  if (verbs::Cq::create(*ctx, 1024, nullptr, 0, &cq) != 0) return fail("cq");
  std::vector<std::uint8_t> buf(std::size_t{count + 1} * length, 0);
  std::unique_ptr<verbs::Mr> mr;
  const auto base = reinterpret_cast<std::uint64_t>(buf.data());
  if (verbs::Mr::reg(*pd, buf.data(), buf.size(), base,
                     verbs::access::kLocalWrite | verbs::access::kRemoteWrite, &mr) != 0)
    return fail("mr");
  const int fd = open(file.c_str(), O_RDONLY);
  if (fd < 0) return fail("open " + file);
  verbs::Xrcd* xrcd = nullptr;
  // No O_CREAT: the domain is the host's, made by the other process.
  if (int rc = verbs::Xrcd::open(*ctx, fd, 0, &xrcd); rc != 0)
    return fail("ibv_open_xrcd: " + std::to_string(rc));
  close(fd);
  {
    std::unique_ptr<verbs::Srq> srq;
    if (verbs::Srq::create_xrc(*pd, *xrcd, *cq, count, 1, 0, &srq) != 0) return fail("srq");
    for (std::uint32_t i = 0; i < count; ++i) {
      transport::RecvWr r;
      r.wr_id = i;
      r.num_sge = 1;
      r.sg_list[0] = {base + std::uint64_t{i} * length, length, mr->lkey()};
      if (srq->post_recv(r) != 0) return fail("post_recv");
    }
    const std::uint64_t region = base + std::uint64_t{count} * length;
    std::printf("ready %u %llu %u\n", srq->srq_num(), static_cast<unsigned long long>(region),
                mr->rkey());
    std::fflush(stdout);

    std::uint32_t got = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got < count && std::chrono::steady_clock::now() < end) {
      transport::Wc wc[16];
      const std::uint32_t n = cq->poll(wc, 16);
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      for (std::uint32_t k = 0; k < n; ++k, ++got) {
        const transport::Wc& w = wc[k];
        if (w.status != transport::WcStatus::kSuccess || w.wr_id != got || w.byte_len != length)
          return fail("completion " + std::to_string(got) + ": status " +
                      std::to_string(static_cast<int>(w.status)) + ", wr_id " +
                      std::to_string(w.wr_id) + ", byte_len " + std::to_string(w.byte_len));
        for (std::uint32_t b = 0; b < length; ++b)
          if (buf[std::size_t{got} * length + b] != pattern(got, b))
            return fail("message " + std::to_string(got) + ": byte " + std::to_string(b));
      }
    }
    if (got < count) return fail("only " + std::to_string(got) + " messages");
    for (std::uint32_t b = 0; b < length; ++b)
      if (buf[std::size_t{count} * length + b] != pattern(1000, b))
        return fail("the WRITE: byte " + std::to_string(b));
  }
  if (verbs::Xrcd::close(xrcd) != 0) return fail("ibv_close_xrcd");
  std::printf("ok\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: xrc_member SOCKET FILE COUNT LENGTH\n");
    return 2;
  }
  return run(argv[1], argv[2], static_cast<std::uint32_t>(std::atoi(argv[3])),
             static_cast<std::uint32_t>(std::atoi(argv[4])));
}
