/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/xrcd.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/srq.h"

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

void Xrcd::remove_target(std::uint32_t qpn) {
  std::lock_guard lock(targets_mu_);
  targets_.erase(qpn);
}

std::shared_ptr<QueuePair> Xrcd::open_target(std::uint32_t qpn) {
  std::lock_guard lock(targets_mu_);
  const auto it = targets_.find(qpn);
  return it == targets_.end() ? nullptr : it->second.lock();
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
  if (fd != -1) {
    if (const auto it = by_file_.find(file); it != by_file_.end()) {
      if (oflags & O_EXCL) return EINVAL;
      ++it->second->opens_;
      *out = it->second;
      return 0;
    }
    if (!(oflags & O_CREAT)) return EINVAL;
  }
  auto* x = new Xrcd(ctx);
  x->file_ = file;
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
    if (xrcd->users_.busy()) return EBUSY;
    if (xrcd->file_ != std::pair<dev_t, ino_t>{0, 0}) by_file_.erase(xrcd->file_);
  }
  Context& ctx = xrcd->ctx_;
  delete xrcd;
  ctx.objects().release();
  return 0;
}

void XrcDomains::add_srq(std::uint32_t srqn, Srq& srq) {
  dev_.engine().locked([&] { srqs_[srqn] = &srq; });
}

void XrcDomains::remove_srq(std::uint32_t srqn) {
  dev_.engine().locked([&] { srqs_.erase(srqn); });
}

Srq* XrcDomains::find_srq(std::uint32_t srqn) const {
  const auto it = srqs_.find(srqn);
  return it == srqs_.end() ? nullptr : it->second;
}

}  // namespace uroce::verbs
