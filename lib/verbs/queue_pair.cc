/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/queue_pair.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cc/qp_congestion.h"
#include "transport/random.h"
#include "verbs/access.h"
#include "verbs/device.h"
#include "wire/multicast.h"

namespace uroce::verbs {

QueuePair::QueuePair(Context& ctx, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq, Xrcd* xrcd)
    : ctx_(ctx),
      dev_(ctx.device()),
      pd_(pd),
      send_cq_(send_cq),
      recv_cq_(recv_cq),
      srq_(srq),
      xrcd_(xrcd) {
  if (pd_) memory_.emplace(dev_.mrs(), pd_->id());
  // Counted before the QP exists, so that a destroy racing with us sees
  // them in use.
  if (pd_) pd_->users().acquire();
  if (send_cq_) send_cq_->users().acquire();
  if (recv_cq_) recv_cq_->users().acquire();
  if (srq_) srq_->users().acquire();
  if (xrcd_) xrcd_->users().acquire();
}

int QueuePair::create(Pd& pd, const QpCaps& caps, Cq& send_cq, Cq& recv_cq, Srq* srq,
                      std::unique_ptr<QueuePair>* out) {
  using transport::QpType;
  Context& ctx = pd.context();
  if (&send_cq.context() != &ctx || &recv_cq.context() != &ctx ||
      (srq && (&srq->pd().context() != &ctx || srq->xrcd() != nullptr)))
    return EINVAL;
  if (caps.type != QpType::kRc && caps.type != QpType::kUc && caps.type != QpType::kUd)
    return EOPNOTSUPP;
  const DeviceAttr& a = pd.device().attr();
  // With an SRQ the receive capabilities are the SRQ's and are ignored
  // here, as IBA 11.2.4.1 says.
  if (!srq && (caps.max_recv_wr > a.max_qp_wr || caps.max_recv_sge > a.max_sge)) return EINVAL;
  std::unique_ptr<QueuePair> q(new QueuePair(ctx, &pd, &send_cq, &recv_cq, srq, nullptr));
  transport::QpInit init;
  init.send_cq = &send_cq;
  init.recv_cq = &recv_cq;
  init.srq = srq;
  if (int rc = q->start(caps, init); rc != 0) return rc;
  *out = std::move(q);
  return 0;
}

int QueuePair::create_xrc_initiator(Pd& pd, const QpCaps& caps, Cq& send_cq,
                                    std::unique_ptr<QueuePair>* out) {
  if (&send_cq.context() != &pd.context()) return EINVAL;
  std::unique_ptr<QueuePair> q(
      new QueuePair(pd.context(), &pd, &send_cq, nullptr, nullptr, nullptr));
  QpCaps c = caps;
  c.type = transport::QpType::kXrcIni;
  c.max_recv_wr = c.max_recv_sge = 0;
  transport::QpInit init;
  init.send_cq = &send_cq;
  if (int rc = q->start(c, init); rc != 0) return rc;
  *out = std::move(q);
  return 0;
}

int QueuePair::create_xrc_target(Xrcd& xrcd, std::shared_ptr<QueuePair>* out) {
  std::shared_ptr<QueuePair> q(
      new QueuePair(xrcd.context(), nullptr, nullptr, nullptr, nullptr, &xrcd));
  QpCaps c;
  c.type = transport::QpType::kXrcTgt;
  transport::QpInit init;
  init.xrc = &xrcd;
  if (int rc = q->start(c, init); rc != 0) return rc;
  xrcd.add_target(q->qpn(), q);
  *out = std::move(q);
  return 0;
}

int QueuePair::open_shared_target(Xrcd& xrcd, std::uint32_t qpn, bool attach,
                                  std::shared_ptr<QueuePair>* out) {
  if (xrcd.host_domain() == 0) return ENOENT;
  std::shared_ptr<QueuePair> q(
      new QueuePair(xrcd.context(), nullptr, nullptr, nullptr, nullptr, &xrcd));
  q->owns_qpn_ = false;
  QpCaps c;
  c.type = transport::QpType::kXrcTgt;
  transport::QpInit init;
  init.xrc = &xrcd;
  if (int rc = q->start(c, init, qpn, attach); rc != 0) return rc;
  *out = std::move(q);
  return 0;
}

void QueuePair::attach_held() { dev_.engine_of(qp_->qpn()).attach_held(*qp_); }

int QueuePair::map_shared_target(std::uint32_t qpn, bool create, transport::QpInit& init) {
  std::uint32_t domain = xrcd_->host_domain();
  const int fd = dev_.port().open_xrc_target(&domain, qpn, create);
  if (fd < 0) return -fd;
  xrc_block_ = XrcTargetBlock::map(fd);
  const int err = errno;
  close(fd);
  if (!xrc_block_) return err;
  init.shared = xrc_block_->responder();
  init.shared_lock = xrc_block_.get();
  return 0;
}

int QueuePair::start(const QpCaps& caps, transport::QpInit init, std::uint32_t qpn, bool attach) {
  using transport::QpType;
  const DeviceAttr& a = dev_.attr();
  if (caps.max_send_wr > a.max_qp_wr || caps.max_send_sge > a.max_sge ||
      caps.max_inline_data > a.max_inline_data)
    return EINVAL;
  const bool sends = caps.type != QpType::kXrcTgt;
  const bool own_rq =
      srq_ == nullptr && caps.type != QpType::kXrcIni && caps.type != QpType::kXrcTgt;
  QpCaps& granted = caps_;
  granted = caps;
  // A queue of depth 0 still holds one WR; one SGE always fits. A queue
  // the QP does not have (an SRQ's, an XRC end's) is granted as 0.
  granted.max_send_wr = sends ? std::max(caps.max_send_wr, 1u) : 0;
  granted.max_send_sge = sends ? std::max(caps.max_send_sge, 1u) : 0;
  granted.max_inline_data = sends ? caps.max_inline_data : 0;
  granted.max_recv_wr = own_rq ? std::max(caps.max_recv_wr, 1u) : 0;
  granted.max_recv_sge = own_rq ? std::max(caps.max_recv_sge, 1u) : 0;

  init.type = caps.type;
  // A UD QP is lcore 0's, with multicast and QP 1 (engine/handoff.h).
  init.qpn = owns_qpn_ ? dev_.alloc_qpn(caps.type == QpType::kUd) : qpn;
  if (init.qpn == 0) return EIO;  // a shared device whose daemon is gone
  if (caps.type == QpType::kXrcTgt && xrcd_->host_domain() != 0) {
    if (const int rc = map_shared_target(init.qpn, owns_qpn_, init); rc != 0) {
      if (owns_qpn_) {
        dev_.port().close_xrc_target(init.qpn);  // made, maybe, and not mapped
        dev_.free_qpn(init.qpn);
      }
      return rc;
    }
  }
  init.max_send_wr = std::max(granted.max_send_wr, 1u);
  init.max_send_sge = std::max(granted.max_send_sge, 1u);
  init.max_inline_data = granted.max_inline_data;
  init.max_recv_wr = std::max(granted.max_recv_wr, 1u);
  init.max_recv_sge = std::max(granted.max_recv_sge, 1u);
  init.sq_sig_all = caps.sq_sig_all;
  if (memory_) {
    init.memory = &*memory_;
    memory_->set_qpn(init.qpn);
  }
  init.events = ctx_.event_sink();
  init.port_mtu = dev_.port_attr().active_mtu;
  init.selective_repeat = dev_.config().selective_repeat;
  cc_ = dev_.make_congestion(&qp_raw_, init.qpn);
  if (cc_ && caps.type != QpType::kUd) {
    // UD datagrams go to many peers: no per-QP rate for them.
    init.gate = cc_.get();
    init.congestion = cc_.get();
  }
  qp_ = std::make_unique<transport::Qp>(init);
  qp_raw_ = qp_.get();
  ctx_.enter(*qp_, *this);
  if (attach) dev_.engine_of(init.qpn).attach(*qp_);
  return 0;
}

bool QueuePair::in_groups() const {
  std::lock_guard lock(mcast_mu_);
  return !mcast_.empty();
}

int QueuePair::destroy(std::unique_ptr<QueuePair>& qp) {
  if (qp && qp->in_groups()) return EBUSY;
  qp.reset();
  return 0;
}

int QueuePair::destroy(std::shared_ptr<QueuePair>& qp) {
  if (qp && qp->in_groups()) return EBUSY;
  qp.reset();
  return 0;
}

QueuePair::~QueuePair() {
  for (const wire::IpAddr& g : mcast_) dev_.detach_mcast(g, qp_->qpn());
  if (qp_) {
    if (xrcd_) xrcd_->remove_target(qp_->qpn(), this);
    // A shared target QP this program made ends at the daemon first: no
    // request for it comes to this program after, to adopt it again.
    if (xrc_block_ && owns_qpn_) dev_.port().close_xrc_target(qp_->qpn());
    // No event names it from now on, and once it is detached no packet
    // reaches it.
    ctx_.leave(*qp_);
    dev_.engine_of(qp_->qpn()).detach(*qp_);
    if (memory_) memory_->release();
    dev_.retire_qp_counters(qp_->counters());
    if (owns_qpn_) dev_.free_qpn(qp_->qpn());
    qp_.reset();
  }
  if (xrcd_) xrcd_->users().release();
  if (srq_) srq_->users().release();
  if (recv_cq_) recv_cq_->users().release();
  if (send_cq_) send_cq_->users().release();
  if (pd_) pd_->users().release();
}

int QueuePair::modify(const QpModify& m, unsigned mask) {
  namespace am = transport::attr_mask;
  // The attributes uroce takes; resizing (kCap) and alternate paths are
  // refused.
  constexpr unsigned kKnown = (am::kDestQpn << 1) - 1;
  if ((mask & ~kKnown) || (mask & (am::kCap | am::kAltPath))) return EINVAL;
  // An XRC end ignores the attributes of the half it has not, as the
  // kernel's uverbs drops them (modify_qp_mask) before the state machine
  // looks: programs (perftest) set them as for RC.
  if (type() == transport::QpType::kXrcIni) mask &= ~(am::kMaxDestRdAtomic | am::kMinRnrTimer);
  if (type() == transport::QpType::kXrcTgt)
    mask &= ~(am::kMaxQpRdAtomic | am::kRetryCnt | am::kRnrRetry);
  // (A shared XRC target's state may be another program's doing.)
  engine::Engine& engine = dev_.engine_of(qp_->qpn());
  if (mask & am::kCurState) engine.locked([&] { qp_->sync_shared(); });
  if ((mask & am::kCurState) && m.cur_state != qp_->state()) return EINVAL;
  if ((mask & am::kPort) && m.port_num != 1) return EINVAL;
  if ((mask & am::kPkeyIndex) && m.pkey_index != 0) return EINVAL;
  transport::QpAttr attr = m.attr;
  if (mask & am::kAccessFlags) {
    if ((attr.qp_access_flags & ~access::kQp) != 0) return EINVAL;
    attr.qp_access_flags &= ~access::kOnDemand;
  }
  Device& dev = dev_;
  if (mask & am::kAv) {
    // The destination QPN is part of the flow's UDP source port.
    const std::uint32_t dst_qpn =
        (mask & am::kDestQpn) ? attr.dest_qp_num : qp_->attr().dest_qp_num;
    if (int rc = dev.resolve(m.av, qp_->qpn(), dst_qpn, &attr.route); rc != 0) return rc;
  }
  if (int rc = engine.locked([&] { return qp_->modify(attr, mask, engine::now_ns()); });
      rc != 0)
    return rc;
  if ((mask & am::kState) && attr.qp_state == transport::QpState::kReset) {
    // A reset QP starts over: the completions it left in its CQs (the
    // flushes of its error state) go too.
    if (send_cq_) send_cq_->remove_qp_completions(qp_->qpn());
    if (recv_cq_ && recv_cq_ != send_cq_) recv_cq_->remove_qp_completions(qp_->qpn());
  }
  return 0;
}

void QueuePair::query(transport::QpAttr* attr, transport::QpState* state) {
  dev_.engine_of(qp_->qpn()).locked([&] {
    qp_->sync_shared();  // what another program's modify changed
    *attr = qp_->attr();
    *state = qp_->state();
  });
}

namespace {
// Past this many send WRs outstanding, a post leaves its packets for the
// engine's next pass instead of running a send pass of its own. A queue
// that deep belongs to a program that streams (perftest's bandwidth
// tests keep 128 in flight) and will poll its CQ for their completions
// soon, or wait while the poll thread does: that pass then sends all
// that was posted meanwhile in one burst, as a NIC reads a batch of
// WQEs on one doorbell. A ping-pong, or ib_write_lat, has one or two
// outstanding and sends at once. Measured over memif, 64 B: ib_write_bw
// 0.94 -> 1.23 Mpps, ib_send_bw 0.7-1.0 -> 1.26 (docs/benchmarks.md).
constexpr std::uint64_t kDeepQueue = 16;
}  // namespace

std::uint32_t QueuePair::random_psn() { return transport::secure_random_psn(); }

int QueuePair::post_send(const transport::SendWr& wr) {
  std::lock_guard lock(send_mu_);
  return qp_->post_send(wr);
}

void QueuePair::doorbell() {
  engine::PollThread& progress = dev_.progress_of(qp_->qpn());
  if (qp_->sq_outstanding() > kDeepQueue) {
    progress.note_post();
    return;
  }
  progress.send_now();
}

int QueuePair::post_recv(const transport::RecvWr& wr) {
  if (caps_.max_recv_wr == 0) return EINVAL;  // the QP receives from an SRQ, or not at all
  std::lock_guard lock(recv_mu_);
  return qp_->post_recv(wr);
}

int QueuePair::attach_mcast(const std::array<std::uint8_t, 16>& gid, std::uint16_t /*lid*/) {
  wire::IpAddr group;
  group.bytes = gid;
  if (type() != transport::QpType::kUd || !wire::is_multicast(group)) return EINVAL;
  std::lock_guard lock(mcast_mu_);
  if (std::find(mcast_.begin(), mcast_.end(), group) != mcast_.end()) return 0;
  if (int rc = dev_.attach_mcast(group, *qp_); rc != 0) return rc;
  mcast_.push_back(group);
  return 0;
}

int QueuePair::detach_mcast(const std::array<std::uint8_t, 16>& gid, std::uint16_t /*lid*/) {
  wire::IpAddr group;
  group.bytes = gid;
  if (type() != transport::QpType::kUd || !wire::is_multicast(group)) return EINVAL;
  std::lock_guard lock(mcast_mu_);
  const auto it = std::find(mcast_.begin(), mcast_.end(), group);
  if (it == mcast_.end()) return EINVAL;
  if (int rc = dev_.detach_mcast(group, qpn()); rc != 0) return rc;
  mcast_.erase(it);
  return 0;
}

std::vector<wire::IpAddr> QueuePair::mcast_groups() const {
  std::lock_guard lock(mcast_mu_);
  return mcast_;
}

int QueuePair::set_ud_destination(const Ah& ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey,
                                  transport::SendWr* wr) const {
  if (&ah.pd().context() != &ctx_) return EINVAL;
  wr->ud.route = &ah.route_template();
  wr->ud.remote_qpn = remote_qpn;
  // A Q_Key with the high bit set means the QP's own (IBA 10.2.5); the
  // transport substitutes it when it builds the packet.
  wr->ud.remote_qkey = remote_qkey;
  return 0;
}

}  // namespace uroce::verbs
