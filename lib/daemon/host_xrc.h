/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The host's XRC domains, shared between its programs as the kernel
// shares them (IBA A14.3: a domain is named by a file; every process that
// opens the file gets the same domain). A target QP of a domain delivers
// each request to the SRQ its XRCETH names, whichever program made that
// SRQ; only that program can write the SRQ's buffers, so the daemon hands
// it the request, and each program that receives for the target QP has a
// Qp of its own for it, over one responder they share
// (transport/responder_state.h, verbs/xrc_target_block.h).
//
// HostXrc keeps, for one device: the domains by file, with how many times
// each program has each open; the XRC SRQs by number, with their program
// and domain; and the target QPs by QPN, with the program that made each,
// its domain and its shared block. HostSwitch changes and reads it holding
// the engine.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

#include "wire/roce_parser.h"

namespace uroce::daemon {

class Program;

class HostXrc {
 public:
  HostXrc() = default;
  ~HostXrc();
  HostXrc(const HostXrc&) = delete;
  HostXrc& operator=(const HostXrc&) = delete;

  /// ibv_open_xrcd's domain of `file` (its device and inode, which `fd`
  /// is open on), for `p`, with `oflags` (O_CREAT, O_EXCL) as the kernel
  /// judges them host-wide: the domain's number, or -EINVAL (none and no
  /// O_CREAT, one and O_EXCL, other flags) or -errno. A new domain keeps
  /// a descriptor of the file, as the kernel holds the inode: its number
  /// names no other file while the domain lasts.
  std::int64_t open_domain(Program& p, std::pair<dev_t, ino_t> file, int fd, int oflags);
  /// One opening less; false when `p` has none.
  bool close_domain(Program& p, std::uint32_t domain);
  /// The XRC SRQ `srqn` of `domain`, now `p`'s (its QPN `srqn`, checked by
  /// the caller); false when `p` has not the domain open.
  bool add_srq(Program& p, std::uint32_t domain, std::uint32_t srqn);
  bool remove_srq(Program& p, std::uint32_t srqn);
  /// The shared block of target QP `qpn`: with `create`, made for a QPN of
  /// `p`'s in `*domain`, which `p` has open; otherwise of a target QP of
  /// `*domain` (0: of any domain `p` has open, written back). A
  /// descriptor that stays HostXrc's, or -errno.
  int open_target(Program& p, std::uint32_t* domain, std::uint32_t qpn, bool create);
  /// The target QP `p` made is gone; false when it made none of `qpn`.
  bool close_target(Program& p, std::uint32_t qpn);
  /// `p` detached: everything of its goes.
  void forget(Program& p);
  /// `p` freed its QPN `qpn`: an SRQ or a target QP of that number goes.
  void forget_qpn(Program& p, std::uint32_t qpn);

  /// Who receives `pkt`, a request for a target QP of a shared domain
  /// naming an SRQ of that domain: the SRQ's program. Null for anything
  /// else (it goes to the QPN's owner, as every frame does; for a target
  /// QP, its maker, which NAKs an SRQ its domain has not).
  Program* route(const wire::RocePacket& pkt) const;

 private:
  struct Domain {
    std::pair<dev_t, ino_t> file;
    int fd = -1;                              ///< the file, held
    std::map<Program*, std::uint32_t> opens;  ///< per program, how many
  };
  struct Srq {
    Program* program = nullptr;
    std::uint32_t domain = 0;
  };
  struct Target {
    Program* maker = nullptr;
    std::uint32_t domain = 0;
    int fd = -1;  ///< the shared block
  };
  bool has_open(const Program& p, std::uint32_t domain) const;
  void drop_domain_if_unused(std::uint32_t domain);

  std::unordered_map<std::uint32_t, Domain> domains_;
  std::map<std::pair<dev_t, ino_t>, std::uint32_t> by_file_;
  std::uint32_t next_domain_ = 1;
  std::unordered_map<std::uint32_t, Srq> srqs_;        ///< by SRQ number
  std::unordered_map<std::uint32_t, Target> targets_;  ///< by QPN
};

}  // namespace uroce::daemon
