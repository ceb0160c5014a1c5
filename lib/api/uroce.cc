/* SPDX-License-Identifier: BSD-3-Clause */
// include/uroce/uroce.h over lib/verbs: each public object holds the
// verbs object that does the work and keeps the rules; calls convert
// between the public structs and the verbs layer's.

#include "uroce/uroce.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <thread>

#include "verbs/access.h"
#include "verbs/ah.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"
#include "verbs/srq.h"
#include "verbs/types.h"

namespace uroce {

static_assert(static_cast<int>(Opcode::kAtomicFetchAndAdd) ==
              static_cast<int>(verbs::WrOpcode::kAtomicFetchAndAdd));
static_assert(static_cast<int>(WcStatus::kGeneralErr) ==
              static_cast<int>(verbs::WcStatus::kGeneralErr));
static_assert(static_cast<int>(WcOpcode::kRecvRdmaWithImm) ==
              static_cast<int>(verbs::WcOpcode::kRecvRdmaWithImm));
static_assert(static_cast<int>(QpState::kErr) == static_cast<int>(verbs::QpState::kErr));
static_assert(wc_flags::kGrh == verbs::wc_flags::kGrh &&
              wc_flags::kWithImm == verbs::wc_flags::kWithImm);
static_assert(access::kRemoteAtomic == verbs::access::kRemoteAtomic);
static_assert(send_flags::kInline == verbs::send_flags::kInline);

// --- Gid ---------------------------------------------------------------

std::optional<Gid> Gid::from_ip(std::string_view ip) {
  const auto a = wire::IpAddr::parse(std::string(ip));
  if (!a) return std::nullopt;
  return Gid{a->bytes};
}

std::string Gid::to_string() const {
  wire::IpAddr a;
  a.bytes = raw;
  return a.to_string();
}

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kLocLenErr:
      return "local length error";
    case WcStatus::kLocQpOpErr:
      return "local QP operation error";
    case WcStatus::kLocProtErr:
      return "local protection error";
    case WcStatus::kWrFlushErr:
      return "Work Request Flushed Error";
    case WcStatus::kBadRespErr:
      return "bad response error";
    case WcStatus::kLocAccessErr:
      return "local access error";
    case WcStatus::kRemInvReqErr:
      return "remote invalid request error";
    case WcStatus::kRemAccessErr:
      return "remote access error";
    case WcStatus::kRemOpErr:
      return "remote operation error";
    case WcStatus::kRetryExcErr:
      return "transport retry counter exceeded";
    case WcStatus::kRnrRetryExcErr:
      return "RNR retry counter exceeded";
    case WcStatus::kFatalErr:
      return "fatal error";
    case WcStatus::kGeneralErr:
      return "general error";
  }
  return "unknown";
}

// --- Impl structs ----------------------------------------------------------

// A Device is one verbs context on its device: every object it makes
// belongs to it.
struct Device::Impl {
  std::unique_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::Context> ctx;  // after dev: destroyed first
};

struct ProtectionDomain::Impl {
  std::unique_ptr<verbs::Pd> pd;
};

struct MemoryRegion::Impl {
  std::unique_ptr<verbs::Mr> mr;
};

struct CompletionQueue::Impl {
  std::unique_ptr<verbs::Cq> cq;
};

struct SharedReceiveQueue::Impl {
  std::unique_ptr<verbs::Srq> srq;
};

struct AddressHandle::Impl {
  std::unique_ptr<verbs::Ah> ah;
};

struct QueuePair::Impl {
  std::unique_ptr<verbs::QueuePair> qp;
  std::uint32_t psn = 0;
};

namespace {

int copy_sges(std::span<const Sge> in, std::uint32_t max, verbs::Sge* out, std::uint32_t* n) {
  if (in.size() > max) return EINVAL;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = {in[i].addr, in[i].length, in[i].lkey};
  *n = static_cast<std::uint32_t>(in.size());
  return 0;
}

Completion from_wc(const verbs::Wc& w) {
  Completion c;
  c.wr_id = w.wr_id;
  c.status = static_cast<WcStatus>(w.status);
  c.opcode = static_cast<WcOpcode>(w.opcode);
  c.byte_len = w.byte_len;
  c.imm_data = w.imm_data;
  c.qp_num = w.qp_num;
  c.src_qp = w.src_qp;
  c.flags = w.wc_flags;
  return c;
}

void set(int* err, int value) {
  if (err) *err = value;
}

}  // namespace

// --- Device ------------------------------------------------------------------

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Device::~Device() = default;

std::unique_ptr<Device> Device::open(const DeviceConfig& dc, const Config& config,
                                     std::string* error) {
  std::string why;
  auto dev = verbs::Device::open(dc, config, &why);
  if (!dev) {
    if (error) *error = why;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->dev = std::move(dev);
  impl->ctx = std::make_unique<verbs::Context>(*impl->dev, nullptr);
  return std::unique_ptr<Device>(new Device(std::move(impl)));
}

std::unique_ptr<Device> Device::open(const std::string& name, std::string* error) {
  ConfigResult r = load_config();
  if (!r.config) {
    if (error) *error = r.error;
    return nullptr;
  }
  for (const DeviceConfig& dc : r.config->devices)
    if (dc.name == name) return open(dc, *r.config, error);
  if (error) *error = "no device '" + name + "' in the configuration";
  return nullptr;
}

const std::string& Device::name() const { return impl_->dev->name(); }

PortInfo Device::port() const {
  const verbs::PortAttr p = impl_->dev->port_attr();
  PortInfo info;
  info.active = p.state == verbs::PortState::kActive;
  info.active_mtu = wire::mtu_bytes(p.active_mtu);
  for (const wire::IpAddr& g : impl_->dev->gids()) info.gids.push_back(Gid{g.bytes});
  info.node_guid = impl_->dev->attr().node_guid;
  return info;
}

std::unique_ptr<ProtectionDomain> Device::alloc_pd() {
  auto impl = std::make_unique<ProtectionDomain::Impl>();
  impl->pd = verbs::Pd::create(*impl_->ctx);
  return std::unique_ptr<ProtectionDomain>(new ProtectionDomain(std::move(impl)));
}

std::unique_ptr<CompletionQueue> Device::create_cq(std::uint32_t depth, int* err) {
  auto impl = std::make_unique<CompletionQueue::Impl>();
  if (int rc = verbs::Cq::create(*impl_->ctx, depth, nullptr, 0, &impl->cq); rc != 0) {
    set(err, rc);
    return nullptr;
  }
  return std::unique_ptr<CompletionQueue>(new CompletionQueue(std::move(impl)));
}

void Device::poll() { impl_->dev->poll(); }

std::vector<Counter> Device::counters() const {
  // The device's own counters, as uroce-stat shows them; each QP's are
  // QueuePair::counters().
  std::vector<Counter> out;
  impl_->dev->for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
    if (scope == "engine" || scope == "pfc") {
      out.emplace_back(std::string(name), v);
    } else if (scope == "drop") {
      out.emplace_back("drop_" + std::string(name), v);
    } else if (scope.starts_with("lcore:")) {
      // A device on several lcores: each one's engine counters, as
      // "lcore1_rx_frames" (the ones above are their sums).
      out.emplace_back("lcore" + std::string(scope.substr(6)) + "_" + std::string(name), v);
    }
  });
  return out;
}

// --- CompletionQueue --------------------------------------------------------

CompletionQueue::CompletionQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompletionQueue::~CompletionQueue() = default;

std::size_t CompletionQueue::poll(std::span<Completion> out) {
  // Drives the engine when it finds nothing.
  std::size_t got = 0;
  const auto max = static_cast<std::uint32_t>(std::min<std::size_t>(out.size(), UINT32_MAX));
  impl_->cq->poll_each(max, [&](const verbs::Wc* w, std::uint32_t k) {
    for (std::uint32_t i = 0; i < k; ++i) out[got++] = from_wc(w[i]);
  });
  return got;
}

std::optional<Completion> CompletionQueue::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  Completion c;
  for (;;) {
    if (poll({&c, 1}) == 1) return c;
    if (std::chrono::steady_clock::now() > end) return std::nullopt;
  }
}

// --- MemoryRegion -----------------------------------------------------------

MemoryRegion::MemoryRegion(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MemoryRegion::~MemoryRegion() { verbs::Mr::destroy(impl_->mr); }
std::uint32_t MemoryRegion::lkey() const { return impl_->mr->lkey(); }
std::uint32_t MemoryRegion::rkey() const { return impl_->mr->rkey(); }
void* MemoryRegion::addr() const { return impl_->mr->addr(); }
std::size_t MemoryRegion::length() const { return impl_->mr->length(); }

// --- SharedReceiveQueue, AddressHandle ---------------------------------------

SharedReceiveQueue::SharedReceiveQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharedReceiveQueue::~SharedReceiveQueue() = default;

int SharedReceiveQueue::post_recv(const RecvWr& wr) {
  verbs::RecvWr r;
  r.wr_id = wr.wr_id;
  if (int rc = copy_sges(wr.sges, verbs::kMaxSge, r.sg_list.data(), &r.num_sge); rc != 0) return rc;
  return impl_->srq->post_recv(r);
}

AddressHandle::AddressHandle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AddressHandle::~AddressHandle() = default;

// --- ProtectionDomain --------------------------------------------------------

ProtectionDomain::ProtectionDomain(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProtectionDomain::~ProtectionDomain() = default;

std::unique_ptr<MemoryRegion> ProtectionDomain::reg_mr(void* addr, std::size_t length, unsigned acc,
                                                       int* err) {
  auto impl = std::make_unique<MemoryRegion::Impl>();
  if (acc & ~access::kAll) {
    set(err, EINVAL);
    return nullptr;
  }
  const auto iova = reinterpret_cast<std::uint64_t>(addr);
  if (int rc = verbs::Mr::reg(*impl_->pd, addr, length, iova, acc, &impl->mr); rc != 0) {
    set(err, rc);
    return nullptr;
  }
  return std::unique_ptr<MemoryRegion>(new MemoryRegion(std::move(impl)));
}

std::unique_ptr<QueuePair> ProtectionDomain::create_qp(const QpInit& init, int* err) {
  if (!init.send_cq || !init.recv_cq) {
    set(err, EINVAL);
    return nullptr;
  }
  verbs::QpCaps caps;
  caps.type = static_cast<verbs::QpType>(init.type);
  caps.max_send_wr = init.max_send_wr;
  caps.max_recv_wr = init.max_recv_wr;
  caps.max_send_sge = init.max_send_sge;
  caps.max_recv_sge = init.max_recv_sge;
  caps.max_inline_data = init.max_inline_data;
  caps.sq_sig_all = init.sq_sig_all;
  auto impl = std::make_unique<QueuePair::Impl>();
  impl->psn = verbs::QueuePair::random_psn();
  if (int rc = verbs::QueuePair::create(*impl_->pd, caps, *init.send_cq->impl_->cq,
                                        *init.recv_cq->impl_->cq,
                                        init.srq ? init.srq->impl_->srq.get() : nullptr, &impl->qp);
      rc != 0) {
    set(err, rc);
    return nullptr;
  }
  return std::unique_ptr<QueuePair>(new QueuePair(std::move(impl)));
}

std::unique_ptr<SharedReceiveQueue> ProtectionDomain::create_srq(std::uint32_t max_wr,
                                                                 std::uint32_t max_sge, int* err) {
  auto impl = std::make_unique<SharedReceiveQueue::Impl>();
  if (int rc = verbs::Srq::create(*impl_->pd, max_wr, max_sge, 0, &impl->srq); rc != 0) {
    set(err, rc);
    return nullptr;
  }
  return std::unique_ptr<SharedReceiveQueue>(new SharedReceiveQueue(std::move(impl)));
}

std::unique_ptr<AddressHandle> ProtectionDomain::create_ah(const Gid& dgid, std::uint8_t sgid_index,
                                                           int* err) {
  verbs::AddressVector av;
  av.sgid_index = sgid_index;
  av.dgid = dgid.raw;
  auto impl = std::make_unique<AddressHandle::Impl>();
  if (int rc = verbs::Ah::create(*impl_->pd, av, &impl->ah); rc != 0) {
    set(err, rc);
    return nullptr;
  }
  return std::unique_ptr<AddressHandle>(new AddressHandle(std::move(impl)));
}

// --- QueuePair -----------------------------------------------------------------

QueuePair::QueuePair(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QueuePair::~QueuePair() = default;
std::uint32_t QueuePair::qpn() const { return impl_->qp->qpn(); }
std::uint32_t QueuePair::psn() const { return impl_->psn; }
QpState QueuePair::state() const { return static_cast<QpState>(impl_->qp->state()); }

int QueuePair::connect(const Remote& peer, const ConnectOptions& o) {
  using namespace verbs::attr_mask;
  verbs::QueuePair& q = *impl_->qp;
  const verbs::QpType type = q.type();
  wire::Mtu mtu = q.context().device().port_attr().active_mtu;
  if (o.path_mtu != 0) {
    const auto code = std::countr_zero(o.path_mtu) - 7;  // 256 -> 1 ... 4096 -> 5
    if (std::popcount(o.path_mtu) != 1 || !wire::mtu_from_code(static_cast<unsigned>(code)))
      return EINVAL;
    mtu = static_cast<wire::Mtu>(code);
  }
  verbs::QpModify m;
  verbs::QpAttr& a = m.attr;
  a.qp_state = verbs::QpState::kInit;
  a.qp_access_flags = o.access;
  a.qkey = o.qkey;
  if (type == verbs::QpType::kUd) {
    if (int rc = q.modify(m, kState | kPkeyIndex | kPort | kQkey); rc != 0) return rc;
    a.qp_state = verbs::QpState::kRtr;
    if (int rc = q.modify(m, kState); rc != 0) return rc;
    a.qp_state = verbs::QpState::kRts;
    a.sq_psn = impl_->psn;
    return q.modify(m, kState | kSqPsn);
  }
  const bool rc_qp = type == verbs::QpType::kRc;
  if (int rc = q.modify(m, kState | kPkeyIndex | kPort | kAccessFlags); rc != 0) return rc;
  m.av.sgid_index = o.sgid_index;
  m.av.dgid = peer.gid.raw;
  a.qp_state = verbs::QpState::kRtr;
  a.path_mtu = mtu;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = o.max_dest_rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  if (int rc = q.modify(m, kState | kAv | kPathMtu | kDestQpn | kRqPsn |
                               (rc_qp ? kMaxDestRdAtomic | kMinRnrTimer : 0));
      rc != 0)
    return rc;
  a.qp_state = verbs::QpState::kRts;
  a.sq_psn = impl_->psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = o.max_rd_atomic;
  return q.modify(
      m, kState | kSqPsn | (rc_qp ? kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic : 0));
}

int QueuePair::post_send(const SendWr& wr) {
  verbs::SendWr w;
  w.wr_id = wr.wr_id;
  w.opcode = static_cast<verbs::WrOpcode>(wr.opcode);
  w.send_flags = wr.flags;
  if (int rc = copy_sges(wr.sges, verbs::kMaxSge, w.sg_list.data(), &w.num_sge); rc != 0) return rc;
  w.imm_data = wr.imm_data;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  if (wr.ah) {
    if (int rc =
            impl_->qp->set_ud_destination(*wr.ah->impl_->ah, wr.remote_qpn, wr.remote_qkey, &w);
        rc != 0)
      return rc;
  }
  const int rc = impl_->qp->post_send(w);
  impl_->qp->doorbell();  // let it out now if the engine is free
  return rc;
}

int QueuePair::post_recv(const RecvWr& wr) {
  verbs::RecvWr r;
  r.wr_id = wr.wr_id;
  if (int rc = copy_sges(wr.sges, verbs::kMaxSge, r.sg_list.data(), &r.num_sge); rc != 0) return rc;
  return impl_->qp->post_recv(r);
}

int QueuePair::attach_mcast(const Gid& group) { return impl_->qp->attach_mcast(group.raw, 0); }
int QueuePair::detach_mcast(const Gid& group) { return impl_->qp->detach_mcast(group.raw, 0); }

std::vector<Counter> QueuePair::counters() const {
  std::vector<Counter> out;
  impl_->qp->for_each_counter(
      [&](std::string_view name, std::uint64_t v) { out.emplace_back(std::string(name), v); });
  return out;
}

}  // namespace uroce
