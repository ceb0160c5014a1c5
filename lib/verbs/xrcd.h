/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// XRC domains (IBA A14.3, ibv_open_xrcd). An XRC domain groups XRC SRQs
// and the XRC target QPs that receive into them: a message arriving on a
// target QP goes to the SRQ its XRCETH names, which must be of the target
// QP's domain. A domain opened on a file is shared by every opening of
// that file on the device, as the kernel shares one by inode; it lasts
// until its last opening is closed.
//
// On a device shared through its daemon, that is every opening on the
// host: the daemon keeps the host's domains (daemon/host_xrc.h), and each
// program's Xrcd of one is its share of it (host_domain). The daemon hands
// a program the requests that name its SRQs, whichever program made their
// target QP; the program receives them through a Qp of its own for that
// target QP (adopted, on the first), over the responder they share.
//
// The device's XRC state is one XrcDomains: its domains by file, and its
// XRC SRQs by number, which target QPs look up on the engine thread for
// every request (changes are made holding the engine).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/memory.h"
#include "verbs/use_count.h"
#include "wire/roce_parser.h"

namespace uroce::transport {
class Qp;
}  // namespace uroce::transport

namespace uroce::verbs {

class Context;
class Device;
class QueuePair;
class Srq;

class Xrcd : public transport::XrcDomain {
 public:
  /// ibv_open_xrcd. With `fd` -1 a domain of its own (`oflags` must have
  /// O_CREAT); otherwise the domain of the file `fd` is open on, made if
  /// `oflags` has O_CREAT. EINVAL when there is none and O_CREAT is
  /// missing, or there is one and O_EXCL is given, or for flags other
  /// than those two; EBADF for a bad `fd`.
  static int open(Context& ctx, int fd, int oflags, Xrcd** out);
  /// ibv_close_xrcd: one opening less. EBUSY when it is the last and XRC
  /// SRQs or target QPs remain in the domain.
  static int close(Xrcd* xrcd);

  Lookup find_srq(std::uint32_t srqn, transport::XrcSrq* out) override;

  Context& context() const { return ctx_; }
  Device& device() const;
  /// The domain's XRC SRQs and target QPs.
  UseCount& users() { return users_; }

  /// The host's domain this is a share of (its number at the daemon), or
  /// 0 for a domain of this process's.
  std::uint32_t host_domain() const { return host_domain_; }

  /// Target QPs, for ibv_open_qp: the QP `qpn` of this domain (in a
  /// shared domain, another program's too), or null.
  void add_target(std::uint32_t qpn, const std::weak_ptr<QueuePair>& qp);
  /// Forgets `qpn` if it is `qp`'s (another may have taken its place).
  void remove_target(std::uint32_t qpn, const QueuePair* qp);
  std::shared_ptr<QueuePair> open_target(std::uint32_t qpn);
  /// The engine thread, holding the engine: this program's Qp of the
  /// target QP `qpn` another program made in this shared domain, made for
  /// the first request the daemon hands this program for it. The caller
  /// attaches it. Null when there is no such target QP.
  transport::Qp* adopt_target(std::uint32_t qpn);
  /// The Qps adopted, which the domain holds until its last closing.
  std::vector<std::shared_ptr<QueuePair>> take_adopted();

 private:
  friend class XrcDomains;
  explicit Xrcd(Context& ctx) : ctx_(ctx) {}
  Context& ctx_;
  std::pair<dev_t, ino_t> file_{0, 0};  ///< the file it was opened on; 0, 0 for none
  std::uint32_t host_domain_ = 0;
  bool closing_ = false;     ///< its last closing is under way: adopts nothing (XrcDomains' lock)
  std::uint32_t opens_ = 0;  ///< under XrcDomains' lock
  UseCount users_;
  std::mutex targets_mu_;
  std::unordered_map<std::uint32_t, std::weak_ptr<QueuePair>> targets_;
  /// Other programs' target QPs this program receives for (under
  /// targets_mu_).
  std::vector<std::shared_ptr<QueuePair>> adopted_;
};

/// A device's XRC domains and XRC SRQs.
class XrcDomains {
 public:
  explicit XrcDomains(Device& dev) : dev_(dev) {}
  ~XrcDomains();

  /// Xrcd::open and Xrcd::close.
  int open(Context& ctx, int fd, int oflags, Xrcd** out);
  /// The device is closing with domains still open: the Qps adopted for
  /// other programs' target QPs go now, while the engine is there.
  void drop_adopted();
  int close(Xrcd* xrcd);

  /// An XRC SRQ enters or leaves the table target QPs look in (holding
  /// the engine, so no request is between two lookups of it).
  void add_srq(std::uint32_t srqn, Srq& srq);
  void remove_srq(std::uint32_t srqn);
  /// Engine thread: the SRQ `srqn`, or null.
  Srq* find_srq(std::uint32_t srqn) const;
  /// The engine thread, for a request the daemon handed this program for
  /// a target QP it has no Qp of (Engine's adopt_qp): the Qp of it,
  /// adopted into the program's share of its domain, or null.
  transport::Qp* adopt_target(const wire::RocePacket& pkt);

 private:
  Device& dev_;
  std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, Xrcd*> by_file_;
  std::unordered_map<std::uint32_t, Srq*> srqs_;  ///< changed holding the engine
};

}  // namespace uroce::verbs
