/* SPDX-License-Identifier: BSD-3-Clause */
// The client end of memif_test's link, in a process of its own as a
// memif peer is: it sends frames of FRAME bytes, frame k's byte i being
// (7k + i) mod 256, until the ring takes no more, prints "sent N", and
// keeps the link up until a signal ends it, or two minutes pass (a test
// that died does not leave it holding its hugepages).
//
//   memif_sender SOCKET MTU FRAME

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"

using namespace uroce::dpdk;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: memif_sender SOCKET MTU FRAME\n");
    return 2;
  }
  const std::string device =
      std::string("net_memif0,role=client,socket=") + argv[1] + ",socket-abstract=no";
  alarm(120);
  const auto frame = static_cast<std::uint32_t>(std::atoi(argv[3]));
  EalOptions eal;
  eal.hugepages = true;
  eal.memory_mb = 192;
  if (const std::string err = eal_init(eal); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  PortOptions po;
  po.mtu = static_cast<std::uint32_t>(std::atoi(argv[2]));
  std::string err;
  auto port = DpdkPort::open(device, po, &err);
  if (!port || !port->link_up()) {
    std::fprintf(stderr, "memif_sender: %s\n", port ? "the link is down" : err.c_str());
    return 1;
  }
  port->attach_thread();
  // The ring refuses only once it is full: a few refusals make sure.
  std::uint32_t sent = 0;
  for (int refused = 0; refused < 4;) {
    uroce::port::TxFrame f;
    if (!port->tx_alloc(frame, f) || f.room.size() < frame) {
      std::fprintf(stderr, "memif_sender: no buffer for a frame of %u bytes\n", frame);
      return 1;
    }
    for (std::uint32_t i = 0; i < frame; ++i) f.room[i] = static_cast<std::uint8_t>(sent * 7 + i);
    f.length = frame;
    if (port->tx_burst(&f, 1) == 1) {
      ++sent;
    } else {
      port->tx_free(f);
      ++refused;
    }
  }
  std::printf("sent %u\n", sent);
  std::fflush(stdout);
  for (;;) pause();
}
