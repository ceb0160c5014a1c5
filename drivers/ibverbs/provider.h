/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The libibverbs objects of uroce devices. Each wraps the public struct
// the program sees (ibv_context, ibv_pd, ibv_cq, ...) as its first member,
// so the pointer the program holds converts back to ours, and carries the
// lib/verbs object that does the work. Every object starts with its
// context, and a context is ours when its device is one of ours: that is
// how each entry point tells our objects from a real device's.

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/cq.h"
#include "transport/recv_queue.h"
#include "uroce/config.h"
#include "verbs/completion_channel.h"
#include "verbs/device.h"
#include "verbs/device_memory.h"
#include "verbs/queue_pair.h"

namespace uroce::ibverbs {

/// A uroce device as ibv_get_device_list lists it. Opened on the first
/// ibv_open_device, closed with the last ibv_close_device.
struct UPd;
struct UMr;
struct UDm;

struct UDevice {
  ibv_device ibv{};
  DeviceConfig cfg;
  Config config;
  std::mutex mu;
  std::unique_ptr<verbs::Device> dev;
  int opens = 0;
  /// PD numbers: per device, since every context of the device shares its
  /// memory region table, which checks them.
  std::atomic<std::uint32_t> next_pd{1};
  /// The device's PDs, MRs and DMs by handle, for ibv_import_pd/mr/dm
  /// from another context of it (import.cc). Under handles_mu.
  std::mutex handles_mu;
  std::unordered_map<std::uint32_t, UPd*> pds;
  std::unordered_map<std::uint32_t, UMr*> mrs;
  std::unordered_map<std::uint32_t, UDm*> dms;
};

/// The process's uroce devices (from the configuration, read once).
/// Never freed: programs may keep device pointers to the end.
const std::vector<UDevice*>& devices();
UDevice* our_device(ibv_device* d);

struct UContext;

/// Turns the transport's asynchronous events on a context's objects into
/// ibv_async_event records for ibv_get_async_event (async.cc).
struct ContextEvents : transport::EventSink {
  explicit ContextEvents(UContext* c) : ctx(c) {}
  void cq_overflow(transport::Cq& cq) override;
  void qp_fatal(transport::Qp& qp) override;
  void srq_limit_reached(transport::RecvQueue& srq) override;
  UContext* ctx;
};

struct UContext {
  verbs_context vctx{};  // first: the program's ibv_context is its last member
  UDevice* udev = nullptr;
  verbs::Device* dev = nullptr;
  std::atomic<int> objects{0};  ///< live PDs, CQs, channels: close waits for none
  std::mutex async_mu;
  std::deque<ibv_async_event> async_events;               ///< one count on async_fd each
  std::unordered_map<const transport::Qp*, ibv_qp*> qps;  ///< under async_mu
  ContextEvents events{this};
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

struct UTd {
  ibv_td ibv{};
  std::atomic<std::uint32_t> users{0};  ///< parent domains using it: EBUSY on destroy
};

/// A protection domain, or a parent domain (ibv_alloc_parent_domain): a
/// PD of its own for the program, with the protection of `parent`, whose
/// objects it may reach and whose id it carries.
struct UPd {
  ibv_pd ibv{};
  std::atomic<std::uint32_t> users{0};  ///< objects using it: EBUSY on destroy
  verbs::PdId id = 0;
  UPd* parent = nullptr;    ///< set for a parent domain
  UTd* td = nullptr;        ///< a parent domain's thread domain, if any
  UPd* imported = nullptr;  ///< set for ibv_import_pd's: the PD it stands for
};

/// Device memory (ibv_alloc_dm). The program copies through the ibv_dm's
/// memcpy_to_dm / memcpy_from_dm pointers, which verbs.h calls directly.
struct UDm {
  ibv_dm ibv{};
  std::shared_ptr<verbs::DeviceMemory> mem;  ///< shared with ibv_import_dm's
  std::atomic<std::uint32_t> users{0};       ///< memory regions on it: EBUSY on free
};

struct UMr {
  ibv_mr ibv{};
  UPd* pd = nullptr;
  UDm* dm = nullptr;      ///< the device memory it covers (ibv_reg_dm_mr), or null
  bool imported = false;  ///< ibv_import_mr's: ibv_unimport_mr frees it
};

// The handle registry (import.cc): objects are entered when made and
// removed when destroyed.
void remember(UDevice* d, UPd* pd);
void remember(UDevice* d, UMr* mr);
void remember(UDevice* d, UDm* dm);
void forget(UDevice* d, UPd* pd);
void forget(UDevice* d, UMr* mr);
void forget(UDevice* d, UDm* dm);
/// A context's command descriptor, for ibv_import_device.
void remember_context_fd(int fd, UDevice* d);
void forget_context_fd(int fd);

/// A memory window: a slot of the device's MR table (memory_window.cc).
struct UMw {
  ibv_mw ibv{};
  UPd* pd = nullptr;
  std::uint32_t index = 0;  ///< its slot
  std::uint32_t id = 0;     ///< tells it from a later window in the slot
};

struct UChannel {
  ibv_comp_channel ibv{};
  std::atomic<std::uint32_t> users{0};  ///< objects using it: EBUSY on destroy
  verbs::CompletionChannel channel;
};

/// A CQ ring that knows the ibv_cq it belongs to (completion channels
/// hand back the ring).
struct CqRing : transport::Cq {
  using transport::Cq::Cq;
  ibv_cq* owner = nullptr;
};

struct UCq {
  // An extended CQ is an ibv_cq_ex, whose leading fields are ibv_cq's
  // (libibverbs' ibv_cq_ex_to_cq casts one to the other).
  union {
    ibv_cq ibv;
    ibv_cq_ex ibvx;
  };
  std::mutex poll_mu;  ///< the ring has one consumer; programs may poll from several threads
  std::atomic<std::uint32_t> users{0};  ///< objects using it: EBUSY on destroy
  std::unique_ptr<CqRing> ring;
  UChannel* channel = nullptr;
  ibv_wc current{};  ///< an extended CQ's completion between start_poll and end_poll
};

/// A shared receive queue that knows the ibv_srq it belongs to (limit
/// events hand back the queue).
struct SrqRing : transport::RecvQueue {
  using transport::RecvQueue::RecvQueue;
  ibv_srq* owner = nullptr;
};

struct USrq {
  ibv_srq ibv{};
  std::atomic<std::uint32_t> users{0};  ///< objects using it: EBUSY on destroy
  std::unique_ptr<SrqRing> rq;
  std::mutex post_mu;  ///< the ring has one producer; programs may post from several threads
  UPd* pd = nullptr;
  std::uint32_t max_wr = 0;
  std::uint32_t max_sge = 0;
};

struct UQp {
  ibv_qp_ex ibvx{};  // ibv_qp is its first member
  std::unique_ptr<verbs::QueuePair> qp;
  UPd* pd = nullptr;
  UCq* send_cq = nullptr;
  UCq* recv_cq = nullptr;
  USrq* srq = nullptr;
  verbs::AddressVector av;  ///< as the last modify_qp gave it, for query_qp
  ibv_ah_attr ah_attr{};
  std::mutex post_mu;  ///< posting sends may come from several program threads
  std::mutex recv_mu;  ///< ... and receives, independently of sends
  // ibv_wr_* (the extended post-send API) builds one WR at a time here and
  // keeps the batch until ibv_wr_complete posts it (ibv_wr_abort drops it).
  struct BatchedWr {
    transport::SendWr wr;
    std::vector<std::uint8_t> inline_data;  ///< copied when set: the program may reuse its buffer
    bool inline_set = false;                ///< wr_set_inline_data(_list) gave it
  };
  transport::SendWr wr_building;
  std::vector<std::uint8_t> wr_inline;  ///< the inline data of the WR being built
  bool wr_inline_set = false;
  std::vector<BatchedWr> wr_batch;
  int wr_error = 0;
  std::uint32_t wr_count = 0;
};

struct UAh {
  ibv_ah ibv{};
  UPd* pd = nullptr;
  wire::RoceRoute route;
};

/// Our object of a public one: the public struct is its first member.
/// (Objects in use cannot be destroyed: they count their users and
/// destroying one still used fails with EBUSY, as with the kernel.)
template <typename U, typename T>
U* to_u(T* ibv) {
  return reinterpret_cast<U*>(ibv);
}

// The context's operations (context.cc, memory.cc, device_memory.cc, cq.cc, qp.cc).
int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len);
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t len);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
/// A CQ of `cqe` entries, checked as ibv_create_cq checks (errno set on
/// failure); cq.cc.
UCq* make_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
             int comp_vector);
void to_ibv_wc(const transport::Wc& w, ibv_wc* out);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
// Thread and parent domains (domain.cc).
ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr);
int dealloc_td(ibv_td* td);
ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr);
ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
// Device memory (device_memory.cc, memory.cc).
ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr);
int free_dm(ibv_dm* dm);
ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access);

// Memory windows (memory_window.cc).
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
/// The bind of `mw` for a WR on `qp`: to have key `rkey` and cover what
/// `info` names. EINVAL for a window or region of another context or PD,
/// or access bits a window cannot have.
int to_mw_bind(ibv_qp* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               transport::MwBind* out);

/// Sets up the ibv_qp_ex wr_* operations of a new QP (qp_ex.cc).
void init_qp_ex(UQp* q);

}  // namespace uroce::ibverbs
