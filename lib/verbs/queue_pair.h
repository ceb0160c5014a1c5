/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A queue pair as the verbs see it: the transport's Qp with the memory it
// may reach (its PD's regions), its number on the device, its place in
// the engine's dispatch table, and the objects it uses (PD, CQs, SRQ),
// which cannot be destroyed while it exists. Creation checks the
// requested capabilities against the device's limits before it allocates
// anything, as a provider does.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "transport/qp.h"
#include "verbs/address_vector.h"
#include "verbs/ah.h"
#include "verbs/cq.h"
#include "verbs/mr_table.h"
#include "verbs/pd.h"
#include "verbs/srq.h"
#include "verbs/xrc_target_block.h"
#include "verbs/xrcd.h"
#include "wire/ip.h"

namespace uroce::cc {
class QpCongestion;
}

namespace uroce::verbs {

/// What ibv_qp_init_attr asks for.
struct QpCaps {
  transport::QpType type = transport::QpType::kRc;
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_send_sge = 0;
  std::uint32_t max_recv_sge = 0;
  std::uint32_t max_inline_data = 0;
  bool sq_sig_all = false;
};

/// ibv_modify_qp's arguments: the transport's attributes, and what the
/// verbs check around them.
struct QpModify {
  transport::QpAttr attr;
  transport::QpState cur_state = transport::QpState::kReset;  ///< with attr_mask::kCurState
  std::uint8_t port_num = 1;                                  ///< with kPort
  std::uint16_t pkey_index = 0;                               ///< with kPkeyIndex
  AddressVector av;                                           ///< with kAv
};

class QueuePair {
 public:
  /// Creates a QP in `pd`, completing into `send_cq` and `recv_cq`,
  /// receiving from `srq` if not null, and attaches it to the engine (in
  /// RESET it ignores every packet). Returns 0; EINVAL for CQs or an SRQ
  /// of another context, or capabilities beyond the device's; EOPNOTSUPP
  /// for a QP type uroce does not offer.
  static int create(Pd& pd, const QpCaps& caps, Cq& send_cq, Cq& recv_cq, Srq* srq,
                    std::unique_ptr<QueuePair>* out);
  /// An XRC initiator (IBV_QPT_XRC_SEND): RC's requester, no receive
  /// queue; EINVAL as create.
  static int create_xrc_initiator(Pd& pd, const QpCaps& caps, Cq& send_cq,
                                  std::unique_ptr<QueuePair>* out);
  /// An XRC target (IBV_QPT_XRC_RECV) of `xrcd`: RC's responder, no send
  /// queue, no PD and no CQ of its own (each message brings its SRQ's).
  /// It belongs to the domain: ibv_open_qp finds it there, and it goes
  /// with the last handle (shared_ptr) to it.
  /// In a domain shared with other programs (Xrcd::host_domain), its
  /// responder is in a block the device daemon makes, which every program
  /// that receives for it maps (verbs/xrc_target_block.h).
  static int create_xrc_target(Xrcd& xrcd, std::shared_ptr<QueuePair>* out);
  /// This program's QP for the target QP `qpn` another program made in
  /// the shared domain `xrcd`: the same QPN, over the block the daemon
  /// hands out (ibv_open_qp, and the first request the daemon hands this
  /// program for it). With `attach` false the caller attaches it to the
  /// engine (the engine thread, holding it). ENOENT when the daemon has
  /// no such target QP in the domain.
  static int open_shared_target(Xrcd& xrcd, std::uint32_t qpn, bool attach,
                                std::shared_ptr<QueuePair>* out);
  /// Attaches a QP made with `attach` false to the engine, which the
  /// caller holds.
  void attach_held();
  /// ibv_destroy_qp: EBUSY while the QP is attached to a multicast group
  /// (the kernel's uverbs_free_qp refuses it until the program detached).
  static int destroy(std::unique_ptr<QueuePair>& qp);
  /// The same for a handle of a QP that may have several (an XRC target).
  static int destroy(std::shared_ptr<QueuePair>& qp);
  /// Once this returns no packet reaches the QP and nothing completes into
  /// its CQs any more; the groups it was still attached to (a context
  /// torn down) lose it, as uverbs detaches them when a process ends.
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  transport::Qp& qp() { return *qp_; }
  const transport::Qp& qp() const { return *qp_; }
  std::uint32_t qpn() const { return qp_->qpn(); }
  transport::QpType type() const { return qp_->type(); }
  /// A snapshot of its state (another thread may be moving it).
  transport::QpState state() const { return qp_->state(); }
  /// Calls fn(name, value) for each of the QP's transport counters.
  template <typename F>
  void for_each_counter(F&& fn) const {
    qp_->counters().for_each(fn);
  }
  /// An initial PSN, unpredictable (for front ends that choose one).
  static std::uint32_t random_psn();
  /// The PD, CQs and SRQ it was made with; an XRC target has none of
  /// them (null), an XRC initiator no receive CQ.
  Pd* pd() const { return pd_; }
  Context& context() const { return ctx_; }
  Cq* send_cq() const { return send_cq_; }
  Cq* recv_cq() const { return recv_cq_; }
  Srq* srq() const { return srq_; }
  /// An XRC target's domain.
  Xrcd* xrcd() const { return xrcd_; }
  /// The capabilities granted (at least those asked for).
  const QpCaps& caps() const { return caps_; }
  /// The program's handle of the QP (its ibv_qp), for events.
  void* handle = nullptr;

  /// ibv_modify_qp: checks what the verbs check (known mask bits, the
  /// current state, port 1, P_Key index 0, QP access flags, an address
  /// vector with a GRH), resolves the address vector (kAv in the mask),
  /// then moves the QP while holding the engine. A QP moved to RESET
  /// leaves nothing in its CQs. 0 or errno.
  int modify(const QpModify& m, unsigned mask);
  /// The QP's attributes and state, read while holding the engine.
  void query(transport::QpAttr* attr, transport::QpState* state);

  /// Posts a send WR; programs may post from several threads (the send
  /// queue has one producer, so they take turns). 0, EINVAL or ENOMEM as
  /// Qp::post_send. A batch holds the lock across its WRs: lock_send,
  /// post_send_locked..., unlock_send.
  int post_send(const transport::SendWr& wr);
  void lock_send() { send_mu_.lock(); }
  int post_send_locked(const transport::SendWr& wr) { return qp_->post_send(wr); }
  void unlock_send() { send_mu_.unlock(); }
  /// Lets what was posted out now if the engine is free (the doorbell;
  /// DESIGN.md, progress).
  void doorbell();
  /// Posts a receive WR; EINVAL for a QP that receives from an SRQ.
  int post_recv(const transport::RecvWr& wr);
  /// ibv_attach_mcast: `gid` a multicast GID (wire::is_multicast) and
  /// the QP a UD one, else EINVAL (ib_attach_mcast); the LID, which RoCE
  /// does not use, is not checked. Attaching again is 0 and changes
  /// nothing; ENOMEM past the device's multicast limits.
  int attach_mcast(const std::array<std::uint8_t, 16>& gid, std::uint16_t lid);
  /// ibv_detach_mcast: EINVAL as attach_mcast, and for a group the QP is
  /// not attached to.
  int detach_mcast(const std::array<std::uint8_t, 16>& gid, std::uint16_t lid);
  /// The groups the QP is attached to.
  std::vector<wire::IpAddr> mcast_groups() const;
  /// Points a UD send WR at `ah`: EINVAL for an AH of another context.
  int set_ud_destination(const Ah& ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey,
                         transport::SendWr* wr) const;

 private:
  QueuePair(Context& ctx, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq, Xrcd* xrcd);
  /// Makes the transport QP (init: the type, sizes and CQs; a QPN, or 0
  /// for a new one) and attaches it to the engine unless told not to.
  int start(const QpCaps& caps, transport::QpInit init, std::uint32_t qpn = 0, bool attach = true);
  /// A target QP of a shared domain: the block of `qpn` mapped, made when
  /// `create`, and `init` pointed at it. 0 or an errno.
  int map_shared_target(std::uint32_t qpn, bool create, transport::QpInit& init);
  /// Attached to a multicast group: not to be destroyed (destroy).
  bool in_groups() const;

  Context& ctx_;
  Device& dev_;
  Pd* const pd_;
  Cq* const send_cq_;
  Cq* const recv_cq_;
  Srq* const srq_;
  Xrcd* const xrcd_;
  std::optional<PdMemory> memory_;  ///< the PD's: every QP but an XRC target
  QpCaps caps_;
  std::mutex send_mu_;
  std::mutex recv_mu_;
  mutable std::mutex mcast_mu_;      ///< before the device's multicast lock
  std::vector<wire::IpAddr> mcast_;  ///< the groups it is attached to
  // DCQCN's gate and observer outlive the QP that uses them (declared
  // first, destroyed last); the QP's address, for the CNP's route.
  std::unique_ptr<cc::QpCongestion> cc_;
  /// A target QP of a shared domain: its block, mapped (outlives qp_).
  std::unique_ptr<XrcTargetBlock> xrc_block_;
  /// The QPN is this program's (alloc_qpn), not another's target QP's.
  bool owns_qpn_ = true;
  const transport::Qp* qp_raw_ = nullptr;
  std::unique_ptr<transport::Qp> qp_;
};

}  // namespace uroce::verbs
