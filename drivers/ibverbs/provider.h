/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The libibverbs objects of uroce devices. Each wraps the public struct
// the program sees (ibv_context, ibv_pd, ibv_cq, ...) as its first member,
// so the pointer the program holds converts back to ours, and carries the
// lib/verbs object that does the work and keeps the rules: the binding
// translates structs and calls, as rdma-core's providers translate to the
// kernel's commands. Every object starts with its context, and a context
// is ours when its device is one of ours: that is how each entry point
// tells our objects from a real device's.

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "uroce/config.h"
#include "verbs/ah.h"
#include "verbs/completion_channel.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/dm.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"
#include "verbs/srq.h"
#include "verbs/types.h"

namespace uroce::ibverbs {

/// A uroce device as ibv_get_device_list lists it. Opened on the first
/// ibv_open_device; it stays open until the process ends.
struct UDevice {
  ibv_device ibv{};
  DeviceConfig cfg;
  Config config;
  std::mutex mu;
  std::unique_ptr<verbs::Device> dev;
  int opens = 0;
  /// In a child of fork(): `dev` is the parent's in-process device, whose
  /// port, engine and poll thread stay the parent's. The child cannot use
  /// it (its locks may be held by threads the child does not have).
  bool parents = false;
};

/// The process's uroce devices (from the configuration, read once).
/// Never freed: programs may keep device pointers to the end.
const std::vector<UDevice*>& devices();
/// The MAC of the port `dc` names, when its driver can tell it before
/// the port opens.
std::optional<wire::MacAddr> mac_before_open(const DeviceConfig& dc);
/// Port 1's attributes as ibv_query_port reports them.
void fill_port_attr(const verbs::Device& dev, ibv_port_attr* a);
UDevice* our_device(ibv_device* d);
/// The device behind `u`, opened (port, engine, poll thread) on first
/// use; null, with the reason on stderr, when it cannot be. It stays open
/// until the process ends.
verbs::Device* open_device(UDevice* u);

struct UContext;

/// Turns the asynchronous events of a context's objects into
/// ibv_async_event records for ibv_get_async_event (async.cc).
struct ContextEvents : verbs::AsyncEvents {
  explicit ContextEvents(UContext* c) : ctx(c) {}
  void cq_overflow(verbs::Cq& cq) override;
  void qp_error(verbs::QueuePair& qp, transport::QpError why) override;
  void sq_drained(verbs::QueuePair& qp) override;
  void srq_limit_reached(verbs::Srq& srq) override;
  UContext* ctx;
};

struct UContext {
  verbs_context vctx{};  // first: the program's ibv_context is its last member
  UDevice* udev = nullptr;
  verbs::Device* dev = nullptr;
  ContextEvents events{this};
  std::unique_ptr<verbs::Context> ctx;
  std::mutex async_mu;
  std::deque<ibv_async_event> async_events;  ///< one count on async_fd each
  int link_listener = 0;
};

/// The name of the memfd that stands for a context's command descriptor.
inline constexpr char kContextFdName[] = "uroce-context";

inline UContext* to_uctx(ibv_context* c) {
  return reinterpret_cast<UContext*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}

/// The uroce context of `c`, or null when `c` belongs to another device.
inline UContext* ours(ibv_context* c) {
  if (c == nullptr || our_device(c->device) == nullptr) return nullptr;
  return to_uctx(c);
}

/// Queues an asynchronous event for ibv_get_async_event (async.cc).
void post_async_event(UContext* c, const ibv_async_event& e);
/// Drops the queued events naming `object` (a CQ, QP or SRQ being
/// destroyed), so ibv_get_async_event never hands out a freed pointer.
void forget_async_events(UContext* c, const void* object);

/// A context's command descriptor, for ibv_import_device (import.cc).
void remember_context_fd(int fd, UDevice* d);
void forget_context_fd(int fd);

struct UTd {
  ibv_td ibv{};
  std::unique_ptr<verbs::Td> td;
};

/// A protection domain, a parent domain or an imported PD.
struct UPd {
  ibv_pd ibv{};
  std::unique_ptr<verbs::Pd> pd;
};

/// Device memory (ibv_alloc_dm). The program copies through the ibv_dm's
/// memcpy_to_dm / memcpy_from_dm pointers, which verbs.h calls directly.
struct UDm {
  ibv_dm ibv{};
  std::unique_ptr<verbs::Dm> dm;
};

struct UMr {
  ibv_mr ibv{};
  std::unique_ptr<verbs::Mr> mr;
};

struct UMw {
  ibv_mw ibv{};
  std::unique_ptr<verbs::Mw> mw;
};

struct UChannel {
  ibv_comp_channel ibv{};
  std::unique_ptr<verbs::CompletionChannel> channel;
};

struct UCq {
  // An extended CQ is an ibv_cq_ex, whose leading fields are ibv_cq's
  // (libibverbs' ibv_cq_ex_to_cq casts one to the other).
  union {
    ibv_cq ibv;
    ibv_cq_ex ibvx;
  };
  std::unique_ptr<verbs::Cq> cq;
  ibv_wc current{};  ///< an extended CQ's completion between start_poll and end_poll
};

struct USrq {
  ibv_srq ibv{};
  std::unique_ptr<verbs::Srq> srq;
};

/// An XRC domain opening (ibv_open_xrcd): each opening has its handle,
/// the domain is the device's (shared by file).
struct UXrcd {
  ibv_xrcd ibv{};
  verbs::Xrcd* xrcd = nullptr;
};

struct UQp {
  ibv_qp_ex ibvx{};  // ibv_qp is its first member
  // Shared: an XRC target QP has a handle for each ibv_open_qp of it, and
  // goes with the last.
  std::shared_ptr<verbs::QueuePair> qp;
  ibv_ah_attr ah_attr{};  ///< as the last modify_qp gave it, for query_qp
  // ibv_wr_* (the extended post-send API) builds one WR at a time here and
  // keeps the batch until ibv_wr_complete posts it (ibv_wr_abort drops it).
  struct BatchedWr {
    verbs::SendWr wr;
    std::vector<std::uint8_t> inline_data;  ///< copied when set: the program may reuse its buffer
    bool inline_set = false;                ///< wr_set_inline_data(_list) gave it
  };
  verbs::SendWr wr_building;
  std::vector<std::uint8_t> wr_inline;  ///< the inline data of the WR being built
  bool wr_inline_set = false;
  std::vector<BatchedWr> wr_batch;
  int wr_error = 0;
  std::uint32_t wr_count = 0;
};

struct UAh {
  ibv_ah ibv{};
  std::unique_ptr<verbs::Ah> ah;
};

/// Our object of a public one: the public struct is its first member.
template <typename U, typename T>
U* to_u(T* ibv) {
  return reinterpret_cast<U*>(ibv);
}

// The lib/verbs objects behind public ones.
inline verbs::Context& ctx_of(ibv_context* c) { return *to_uctx(c)->ctx; }
inline verbs::Pd& pd_of(ibv_pd* pd) { return *to_u<UPd>(pd)->pd; }
inline verbs::Cq& cq_of(ibv_cq* cq) { return *to_u<UCq>(cq)->cq; }
inline verbs::QueuePair& qp_of(ibv_qp* qp) { return *to_u<UQp>(qp)->qp; }
inline verbs::Xrcd& xrcd_of(ibv_xrcd* x) { return *to_u<UXrcd>(x)->xrcd; }

/// An ibv_ah_attr as the verbs layer's address vector.
verbs::AddressVector to_av(const ibv_ah_attr& ah);

// The context's operations (context.cc, memory.cc, device_memory.cc, cq.cc, qp.cc).
int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len);
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t len);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
/// A CQ of `cqe` entries, checked as ibv_create_cq checks (errno set on
/// failure); cq.cc.
UCq* make_cq(ibv_context* context, std::int64_t cqe, void* cq_context, ibv_comp_channel* channel,
             int comp_vector);
void to_ibv_wc(const verbs::Wc& w, ibv_wc* out);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
// Thread and parent domains (domain.cc).
ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr);
int dealloc_td(ibv_td* td);
ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr);
ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int get_srq_num(ibv_srq* srq, uint32_t* srq_num);
// XRC domains and target QPs (xrc.cc).
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* xrcd);
ibv_qp* open_qp(ibv_context* ctx, ibv_qp_open_attr* attr);
/// The new handle of an XRC target QP (create_qp_ex, open_qp).
ibv_qp* xrc_target_handle(ibv_context* ctx, std::shared_ptr<verbs::QueuePair> qp, void* qp_context);
/// Before an XRC target QP's handle is freed: no event names it after.
void forget_xrc_target_handle(ibv_qp* handle);
/// Queues `type` for every handle of the XRC target QP `qp`, each in its
/// own context, as the kernel delivers a shared QP's events to each
/// opener; false if `qp` has no handle (it is no XRC target).
bool post_xrc_target_event(const verbs::QueuePair& qp, ibv_event_type type);
// Device memory (device_memory.cc, memory.cc).
ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr);
int free_dm(ibv_dm* dm);
ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access);
/// An ibv_mr in `pd` standing for `orig` (ibv_import_mr; memory.cc).
ibv_mr* import_mr(ibv_pd* pd, verbs::Mr& orig);
/// The ibv_dm of `dm` (device_memory.cc).
ibv_dm* publish_dm(ibv_context* ctx, std::unique_ptr<verbs::Dm> dm);

// Memory windows (memory_window.cc).
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
/// The bind of `mw` for a WR on `qp`: to have key `rkey` and cover what
/// `info` names (verbs::Mw::bind_request's checks).
int to_mw_bind(ibv_qp* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               verbs::MwBind* out);

/// Sets up the ibv_qp_ex wr_* operations of a new QP (qp_ex.cc).
void init_qp_ex(UQp* q);

}  // namespace uroce::ibverbs
