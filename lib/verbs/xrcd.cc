/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/xrcd.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/queue_pair.h"
#include "verbs/srq.h"
#include "wire/opcode.h"

namespace uroce::verbs {

int Xrcd::open(Context& ctx, int fd, int oflags, Xrcd** out) {
  return ctx.device().xrc_domains().open(ctx, fd, oflags, out);
}

int Xrcd::close(Xrcd* xrcd) { return xrcd->device().xrc_domains().close(xrcd); }

Device& Xrcd::device() const { return ctx_.device(); }

transport::XrcDomain::Lookup Xrcd::find_srq(std::uint32_t srqn, transport::XrcSrq* out) {
  Srq* srq = device().xrc_domains().find_srq(srqn);
  if (srq == nullptr) return Lookup::kNoSuchSrq;
  if (srq->xrcd() != this) return Lookup::kOtherDomain;
  out->rq = srq;
  out->cq = srq->cq();
  out->memory = srq->memory();
  return Lookup::kFound;
}

void Xrcd::add_target(std::uint32_t qpn, const std::weak_ptr<QueuePair>& qp) {
  std::lock_guard lock(targets_mu_);
  targets_[qpn] = qp;
}

void Xrcd::remove_target(std::uint32_t qpn, const QueuePair* qp) {
  std::lock_guard lock(targets_mu_);
  const auto it = targets_.find(qpn);
  if (it == targets_.end()) return;
  const std::shared_ptr<QueuePair> held = it->second.lock();
  if (held == nullptr || held.get() == qp) targets_.erase(it);
}

std::shared_ptr<QueuePair> Xrcd::open_target(std::uint32_t qpn) {
  {
    std::lock_guard lock(targets_mu_);
    const auto it = targets_.find(qpn);
    if (it != targets_.end()) return it->second.lock();
  }
  // Another program's, in a shared domain: a Qp of this program's for it,
  // made without the lock (the engine's thread takes it to adopt one),
  // and attached holding the engine, then the lock, as that thread does:
  // one the engine adopted meanwhile wins, and ours goes, unattached.
  std::shared_ptr<QueuePair> q;
  if (QueuePair::open_shared_target(*this, qpn, false, &q) != 0) return nullptr;
  std::shared_ptr<QueuePair> other;
  device().engine_of(qpn).locked([&] {
    std::lock_guard lock(targets_mu_);
    std::weak_ptr<QueuePair>& slot = targets_[qpn];
    if (auto existing = slot.lock()) {
      other = std::exchange(q, existing);
    } else {
      slot = q;
      adopted_.push_back(q);
      q->attach_held();
    }
  });
  return q;
}

transport::Qp* Xrcd::adopt_target(std::uint32_t qpn) {
  std::shared_ptr<QueuePair> q;
  if (QueuePair::open_shared_target(*this, qpn, false, &q) != 0) return nullptr;
  std::lock_guard lock(targets_mu_);
  targets_[qpn] = q;
  adopted_.push_back(q);
  return &q->qp();
}

std::vector<std::shared_ptr<QueuePair>> Xrcd::take_adopted() {
  std::lock_guard lock(targets_mu_);
  return std::exchange(adopted_, {});
}

XrcDomains::~XrcDomains() {
  // Domains the program never closed go with the device.
  for (auto& entry : by_file_) delete entry.second;
}

int XrcDomains::open(Context& ctx, int fd, int oflags, Xrcd** out) {
  if ((oflags & ~(O_CREAT | O_EXCL)) != 0) return EINVAL;
  std::pair<dev_t, ino_t> file{0, 0};
  if (fd == -1) {
    if (!(oflags & O_CREAT)) return EINVAL;
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0) return EBADF;
    file = {st.st_dev, st.st_ino};
  }
  std::lock_guard lock(mu_);
  std::int64_t host = 0;
  if (fd != -1) {
    if (const auto it = by_file_.find(file); it != by_file_.end()) {
      if (oflags & O_EXCL) return EINVAL;
      ++it->second->opens_;
      *out = it->second;
      return 0;
    }
    // The host's domain of the file, which another program may have made:
    // the daemon judges O_CREAT and O_EXCL host-wide.
    host = dev_.port().open_xrc_domain(fd, oflags);
    if (host < 0) return static_cast<int>(-host);
    if (host == 0 && !(oflags & O_CREAT)) return EINVAL;
  }
  auto* x = new Xrcd(ctx);
  x->file_ = file;
  x->host_domain_ = static_cast<std::uint32_t>(host);
  x->opens_ = 1;
  ctx.objects().acquire();
  if (fd != -1) by_file_[file] = x;
  *out = x;
  return 0;
}

int XrcDomains::close(Xrcd* xrcd) {
  {
    std::lock_guard lock(mu_);
    if (xrcd->opens_ > 1) {
      --xrcd->opens_;
      return 0;
    }
  }
  // The last closing: the Qps of other programs' target QPs go first, but
  // for those the program holds (ibv_open_qp), which keep the domain
  // busy. Outside the lock: a QP going takes the engine, whose thread may
  // be adopting one under it.
  {
    std::lock_guard lock(mu_);
    xrcd->closing_ = true;
  }
  xrcd->take_adopted().clear();
  {
    std::lock_guard lock(mu_);
    xrcd->closing_ = false;
    if (xrcd->opens_ > 1) {
      --xrcd->opens_;
      return 0;
    }
    if (xrcd->users_.busy()) return EBUSY;
    if (xrcd->file_ != std::pair<dev_t, ino_t>{0, 0}) by_file_.erase(xrcd->file_);
  }
  if (xrcd->host_domain_ != 0) dev_.port().close_xrc_domain(xrcd->host_domain_);
  Context& ctx = xrcd->ctx_;
  delete xrcd;
  ctx.objects().release();
  return 0;
}

void XrcDomains::drop_adopted() {
  std::vector<std::shared_ptr<QueuePair>> adopted;
  {
    std::lock_guard lock(mu_);
    for (auto& [file, x] : by_file_) {
      auto some = x->take_adopted();
      adopted.insert(adopted.end(), some.begin(), some.end());
    }
  }
  adopted.clear();  // outside the lock: a QP going takes the engine
}

void XrcDomains::add_srq(std::uint32_t srqn, Srq& srq) {
  dev_.hold_all([&] { srqs_[srqn] = &srq; });
}

void XrcDomains::remove_srq(std::uint32_t srqn) {
  dev_.hold_all([&] { srqs_.erase(srqn); });
}

Srq* XrcDomains::find_srq(std::uint32_t srqn) const {
  const auto it = srqs_.find(srqn);
  return it == srqs_.end() ? nullptr : it->second;
}

transport::Qp* XrcDomains::adopt_target(const wire::RocePacket& pkt) {
  // Only the daemon hands a program requests for a QPN it has no QP of,
  // and only XRC requests naming one of its SRQs.
  if (!pkt.info->is_request() || wire::transport_of(pkt.bth.opcode) != wire::Transport::kXrc)
    return nullptr;
  std::lock_guard lock(mu_);
  // The daemon knows the target QP's domain: the share of it that the
  // program has is the one the daemon opens the target QP in.
  for (auto& [file, x] : by_file_) {
    if (x->host_domain_ == 0 || x->closing_) continue;
    if (transport::Qp* q = x->adopt_target(pkt.bth.dest_qp)) return q;
  }
  return nullptr;
}

}  // namespace uroce::verbs
