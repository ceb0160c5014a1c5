/* SPDX-License-Identifier: BSD-3-Clause */
// Completion queues and completion channels. Polling an empty CQ drives
// the engine from the program's thread (DESIGN.md, progress), so a program
// spinning in ibv_poll_cq gets its completions without waiting for the
// poll thread.

#include <cerrno>
#include <cstring>

#include "drivers/ibverbs/forward.h"
#include "drivers/ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

static_assert(static_cast<int>(transport::WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);
static_assert(static_cast<int>(transport::WcOpcode::kRecvRdmaWithImm) == IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(transport::wc_flags::kGrh == IBV_WC_GRH);
static_assert(transport::wc_flags::kWithImm == IBV_WC_WITH_IMM);
static_assert(transport::wc_flags::kWithInv == IBV_WC_WITH_INV);

int poll_ring(CqRing& ring, int n, ibv_wc* wc) {
  transport::Wc buf[32];
  int got = 0;
  while (got < n) {
    const auto want = static_cast<std::uint32_t>(std::min(n - got, 32));
    const std::uint32_t k = ring.poll(buf, want);
    for (std::uint32_t i = 0; i < k; ++i) to_ibv_wc(buf[i], &wc[got + static_cast<int>(i)]);
    got += static_cast<int>(k);
    if (k < want) break;
  }
  return got;
}

}  // namespace

void to_ibv_wc(const transport::Wc& w, ibv_wc* out) {
  out->wr_id = w.wr_id;
  out->status = static_cast<ibv_wc_status>(w.status);
  out->opcode = static_cast<ibv_wc_opcode>(w.opcode);
  out->vendor_err = w.vendor_err;
  out->byte_len = w.byte_len;
  out->imm_data = w.imm_data;
  out->qp_num = w.qp_num;
  out->src_qp = w.src_qp;
  out->wc_flags = w.wc_flags;
  out->pkey_index = w.pkey_index;
  out->slid = w.slid;
  out->sl = w.sl;
  out->dlid_path_bits = w.dlid_path_bits;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  UCq* q = to_u<UCq>(cq);
  if (n < 0) return -1;
  std::lock_guard lock(q->poll_mu);  // uncontended unless the program polls from several threads
  int got = poll_ring(*q->ring, n, wc);
  if (got == 0 && n > 0) {
    // Nothing yet: move the engine ourselves, then look again.
    to_uctx(cq->context)->dev->progress().drive();
    got = poll_ring(*q->ring, n, wc);
  }
  return got;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  UCq* q = to_u<UCq>(cq);
  // Without a channel there is nowhere to deliver the event; arming such
  // a CQ succeeds and does nothing, as with the kernel's providers.
  if (q->channel) q->ring->arm(solicited_only != 0);
  return 0;
}

UCq* make_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
             int comp_vector) {
  UContext* c = ours(context);
  if (cqe <= 0 || static_cast<std::uint32_t>(cqe) > c->dev->attr().max_cqe || comp_vector < 0 ||
      comp_vector >= context->num_comp_vectors || (channel && !ours(channel->context))) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new UCq();
  q->ring = std::make_unique<CqRing>(static_cast<std::uint32_t>(cqe));
  q->ring->owner = &q->ibv;
  q->ring->set_events(&c->events);
  q->ibv.context = context;
  q->ibv.channel = channel;
  q->ibv.cq_context = cq_context;
  q->ibv.cqe = cqe;
  pthread_mutex_init(&q->ibv.mutex, nullptr);
  pthread_cond_init(&q->ibv.cond, nullptr);
  if (channel) {
    q->channel = to_u<UChannel>(channel);
    q->channel->users.fetch_add(1);
    q->ring->set_notifier(&q->channel->channel);
  }
  c->objects.fetch_add(1);
  return q;
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (!ours(context)) UROCE_FORWARD(ibv_create_comp_channel, "IBVERBS_1.0", nullptr, context);
  auto* ch = new UChannel();
  if (ch->channel.fd() < 0) {
    delete ch;
    errno = EMFILE;
    return nullptr;
  }
  ch->ibv.context = context;
  ch->ibv.fd = ch->channel.fd();
  ch->ibv.refcnt = 0;
  ours(context)->objects.fetch_add(1);
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel || !ours(channel->context))
    UROCE_FORWARD(ibv_destroy_comp_channel, "IBVERBS_1.0", ENOSYS, channel);
  UChannel* ch = to_u<UChannel>(channel);
  if (ch->users.load() != 0) return EBUSY;
  ours(channel->context)->objects.fetch_sub(1);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  UContext* c = ours(context);
  if (!c)
    UROCE_FORWARD(ibv_create_cq, "IBVERBS_1.1", nullptr, context, cqe, cq_context, channel,
                  comp_vector);
  UCq* q = make_cq(context, cqe, cq_context, channel, comp_vector);
  return q ? &q->ibv : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq || !ours(cq->context)) UROCE_FORWARD(ibv_destroy_cq, "IBVERBS_1.1", ENOSYS, cq);
  UCq* q = to_u<UCq>(cq);
  if (q->users.load() != 0) return EBUSY;
  UContext* c = ours(cq->context);
  forget_async_events(c, cq);
  c->objects.fetch_sub(1);
  if (q->channel) {
    q->channel->channel.forget(*q->ring);
    q->channel->users.fetch_sub(1);
  }
  pthread_mutex_destroy(&q->ibv.mutex);
  pthread_cond_destroy(&q->ibv.cond);
  delete q;
  return 0;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq || !ours(cq->context)) UROCE_FORWARD(ibv_resize_cq, "IBVERBS_1.1", ENOSYS, cq, cqe);
  UCq* q = to_u<UCq>(cq);
  UContext* c = ours(cq->context);
  if (cqe <= 0 || static_cast<std::uint32_t>(cqe) > c->dev->attr().max_cqe) return EINVAL;
  // Let the engine finish what is in hand (a NIC would have written those
  // completions already): the check below is against what the CQ holds.
  for (int i = 0; i < 16; ++i) {
    std::uint32_t work = 0;
    if (!c->dev->engine().try_poll(uroce::engine::now_ns(), &work) || work == 0) break;
  }
  std::lock_guard lock(q->poll_mu);
  bool ok = false;
  c->dev->engine().locked([&] { ok = q->ring->resize(static_cast<std::uint32_t>(cqe)); });
  if (!ok) return EINVAL;  // more completions wait than the new size holds
  cq->cqe = cqe;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !ours(channel->context))
    UROCE_FORWARD(ibv_get_cq_event, "IBVERBS_1.1", -1, channel, cq, cq_context);
  if (!cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  // While the program sleeps here, its events come from the poll thread.
  auto& progress = ours(channel->context)->dev->progress();
  progress.begin_wait();
  uroce::transport::Cq* ring = to_u<UChannel>(channel)->channel.get_event();
  progress.end_wait();
  if (!ring) return -1;
  ibv_cq* owner = static_cast<CqRing*>(ring)->owner;
  *cq = owner;
  *cq_context = owner->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq || !ours(cq->context)) {
    static const auto real =
        real_fn<decltype(&ibv_ack_cq_events)>("ibv_ack_cq_events", "IBVERBS_1.1");
    if (real) real(cq, nevents);
    return;
  }
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
