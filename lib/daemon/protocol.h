/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The control channel between the device daemon (uroced) and a program:
// a Unix SOCK_SEQPACKET socket, one request and one reply at a time, each
// a message of a few words and a text, a file descriptor riding along
// (SCM_RIGHTS) where one is handed over. The kernel tells the daemon who
// is on the other end (SO_PEERCRED), and tells each side when the other
// is gone, SIGKILL included: the socket hangs up.
//
//   program                      daemon
//   kList                   ->   kDevices  text: the devices as [[device]] TOML
//   kPortInfo text: device  ->   kPort     text: "mac=..;mtu=..;speed=.."
//   kAttach  text: device   ->   kAttached text: the same, fd: the rings
//   kAllocQpn               ->   kQpn      value: a QPN unique on the host
//   kFreeQpn value: QPN     ->   kDone
//   kCmServices text: ServiceIDs in hex, comma-separated, what the
//            program's CM listens on now  ->   kDone
//   kCmBind  value: key (an rdma_cm id), text: "<ServiceID hex> <ip> <flags>"
//            (port::Port::CmBindFlags), a port the program's CM binds
//                           ->   kDone     value: 0, EADDRINUSE, EADDRNOTAVAIL
//                                          or EACCES
//   kCmUnbind value: key    ->   kDone
//   kXrcdOpen text: oflags (decimal), fd: the file
//                           ->   kDone     value: the host's XRC domain of the
//                                          file (its inode), now opened once
//                                          more by the program
//   kXrcdClose value: domain ->  kDone
//   kXrcSrqAdd value: SRQ number (a QPN of the program's), text: domain
//                           ->   kDone     requests naming it go to the program
//   kXrcSrqRemove value: SRQ number  ->  kDone
//   kXrcTgtOpen value: QPN, text: "<domain> <create 0|1>"  (domain 0: any
//            the program has open)
//                           ->   kDone     value: the domain, fd: the target
//                                          QP's shared responder block
//                                          (verbs/xrc_target_block.h), made
//                                          with create for a QPN of the
//                                          program's
//   kXrcTgtClose value: QPN ->   kDone     (the target QP's maker: it is gone)
//   any                     ->   kError    value: errno, text: why
//   kCapture text: device   ->   kDone     text: the device ("": the first)
//                           then kFrame    value: direction, text: FrameHeader + frame
//                                          ... until the program hangs up
//
// and from `uroce link` (apps/uroce.cc), as `rdma link` speaks to the
// kernel, for root or the daemon's own user only (SO_PEERCRED):
//   kLinkAdd text: one [[device]] table  ->  kDone   text: the device's name
//   kLinkDelete text: device              ->  kDone
//   kLinkShow                             ->  kLinks  text: a line per device,
//            "<name> state=<up|down> netdev=<iface> port=<DPDK device> mtu=<n>
//             programs=<n> gids=<ip>,<ip>,..." (netdev= empty when none)
//
// A connection that attached is the program's hold on the device: when it
// closes, the daemon drops the program's rings and QPNs. A connection that
// asked for a capture (uroce-stat capture) only receives from then on:
// every frame the device sends and receives, self-delivered ones included,
// sent without waiting; what does not fit in its socket is dropped and
// counted.

#include <cstdint>
#include <string>

#include "wire/ip.h"

namespace uroce::daemon {

inline constexpr std::uint32_t kProtocolVersion = 1;
/// Longest text of a message.
inline constexpr std::size_t kMaxText = 16384;

enum class Op : std::uint32_t {
  kList = 1,
  kDevices,
  kAttach,
  kAttached,
  kAllocQpn,
  kQpn,
  kFreeQpn,
  kDone,
  kError,
  kPortInfo,
  kPort,
  kCmServices,
  kCapture,
  kFrame,
  // uroce link's, added after version 1's. A daemon older than an op
  // hangs up on it (recv_message refuses it): a program asks only a daemon
  // it knows has the op (AttachedPort probes).
  kLinkAdd,
  kLinkDelete,
  kLinkShow,
  kLinks,
  // The host's rdma_cm port spaces, added after uroce link's.
  kCmBind,
  kCmUnbind,
  // XRC domains shared between the host's programs, added after the port
  // spaces.
  kXrcdOpen,
  kXrcdClose,
  kXrcSrqAdd,
  kXrcSrqRemove,
  kXrcTgtOpen,
  kXrcTgtClose,  ///< the last: recv_message refuses any op past it
};

/// What precedes a captured frame in a kFrame's text.
struct FrameHeader {
  std::uint64_t time_ns;  ///< CLOCK_REALTIME, when the daemon saw it
  std::uint32_t dropped;  ///< frames of this capture dropped before this one
  std::uint32_t length;   ///< the frame's length (more than follows if cut)
};
/// The longest frame a kFrame carries whole.
inline constexpr std::size_t kMaxCapturedFrame = kMaxText - sizeof(FrameHeader);

struct Message {
  Op op = Op::kError;
  std::uint32_t value = 0;
  std::string text;
  int fd = -1;  ///< a descriptor handed over: the receiver owns it
};

/// Sends `m` (its fd, when >= 0, along with it). False with errno set.
bool send_message(int sock, const Message& m);
/// Sends a kFrame without waiting (the socket is non-blocking): false
/// with errno (EAGAIN when the socket is full). Allocates nothing.
bool send_frame(int sock, std::uint32_t direction, const FrameHeader& h, const std::uint8_t* frame);
/// Receives one message: 1, 0 when the peer has closed, -1 with errno
/// (EAGAIN on a non-blocking socket with nothing to read; EPROTO for a
/// message of another version or a malformed one, whose descriptor, if
/// any, is closed).
int recv_message(int sock, Message* m);
/// A request and its reply, on a blocking socket. False with errno set
/// when the daemon cannot be reached or hangs up; a kError reply is a
/// reply (true).
bool call(int sock, const Message& request, Message* reply);

/// Connects to the daemon's socket; -1 with errno when nobody listens.
int connect_daemon(const std::string& path);

/// "mac=02:..;mtu=1500;speed=10000" and back.
struct PortInfo {
  std::uint8_t mac[6] = {};
  std::uint32_t mtu = 0;
  std::uint32_t speed_mbps = 0;
};
std::string format_port_info(const PortInfo& p);
bool parse_port_info(const std::string& text, PortInfo* out);

/// A kCmBind's text, "<ServiceID hex> <ip> <flags>" (flags decimal,
/// port::Port::CmBindFlags), and back: false for anything else, flags
/// past the known ones included.
std::string format_cm_binding(std::uint64_t service_id, const wire::IpAddr& ip, unsigned flags);
bool parse_cm_binding(std::string_view text, std::uint64_t* service_id, wire::IpAddr* ip,
                      unsigned* flags);

}  // namespace uroce::daemon
