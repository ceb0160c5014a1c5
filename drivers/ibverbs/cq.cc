/* SPDX-License-Identifier: BSD-3-Clause */
// Completion queues and completion channels (verbs/cq.h,
// verbs/completion_channel.h): ibv_wc from the transport's completions.

#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"

namespace uroce::ibverbs {

namespace {

static_assert(static_cast<int>(verbs::WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);
static_assert(static_cast<int>(verbs::WcOpcode::kRecvRdmaWithImm) == IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(verbs::wc_flags::kGrh == IBV_WC_GRH);
static_assert(verbs::wc_flags::kWithImm == IBV_WC_WITH_IMM);
static_assert(verbs::wc_flags::kWithInv == IBV_WC_WITH_INV);
static_assert(uroce::verbs::kNumCompVectors == 1, "ibv_context.num_comp_vectors says so");

}  // namespace

void to_ibv_wc(const verbs::Wc& w, ibv_wc* out) {
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
  if (n < 0) return -1;
  ibv_wc* next = wc;
  return static_cast<int>(
      cq_of(cq).poll_each(static_cast<std::uint32_t>(n), [&](const verbs::Wc* w, std::uint32_t k) {
        for (std::uint32_t i = 0; i < k; ++i) to_ibv_wc(w[i], next++);
      }));
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  cq_of(cq).req_notify(solicited_only != 0);
  return 0;
}

UCq* make_cq(ibv_context* context, std::int64_t cqe, void* cq_context, ibv_comp_channel* channel,
             int comp_vector) {
  verbs::CompletionChannel* ch = nullptr;
  if (channel) {
    if (!ours(channel->context)) {
      errno = EINVAL;
      return nullptr;
    }
    ch = to_u<UChannel>(channel)->channel.get();
  }
  std::unique_ptr<verbs::Cq> cq;
  if (int rc = verbs::Cq::create(ctx_of(context), cqe, ch, comp_vector, &cq); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* q = new UCq();
  q->cq = std::move(cq);
  q->cq->handle = &q->ibv;
  q->ibv.context = context;
  q->ibv.channel = channel;
  q->ibv.cq_context = cq_context;
  q->ibv.cqe = static_cast<int>(cqe);
  pthread_mutex_init(&q->ibv.mutex, nullptr);
  pthread_cond_init(&q->ibv.cond, nullptr);
  return q;
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (!ours(context)) UROCE_FORWARD(ibv_create_comp_channel, "IBVERBS_1.0", nullptr, context);
  std::unique_ptr<uroce::verbs::CompletionChannel> channel;
  if (int rc = uroce::verbs::CompletionChannel::create(ctx_of(context), &channel); rc != 0) {
    errno = rc;
    return nullptr;
  }
  auto* ch = new UChannel();
  ch->channel = std::move(channel);
  ch->ibv.context = context;
  ch->ibv.fd = ch->channel->fd();
  ch->ibv.refcnt = 0;
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel || !ours(channel->context))
    UROCE_FORWARD(ibv_destroy_comp_channel, "IBVERBS_1.0", ENOSYS, channel);
  UChannel* ch = to_u<UChannel>(channel);
  if (int rc = uroce::verbs::CompletionChannel::destroy(ch->channel); rc != 0) return rc;
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  if (!ours(context))
    UROCE_FORWARD(ibv_create_cq, "IBVERBS_1.1", nullptr, context, cqe, cq_context, channel,
                  comp_vector);
  UCq* q = make_cq(context, cqe, cq_context, channel, comp_vector);
  return q ? &q->ibv : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq || !ours(cq->context)) UROCE_FORWARD(ibv_destroy_cq, "IBVERBS_1.1", ENOSYS, cq);
  UCq* q = to_u<UCq>(cq);
  if (int rc = uroce::verbs::Cq::destroy(q->cq); rc != 0) return rc;
  forget_async_events(ours(cq->context), cq);
  pthread_mutex_destroy(&q->ibv.mutex);
  pthread_cond_destroy(&q->ibv.cond);
  delete q;
  return 0;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq || !ours(cq->context)) UROCE_FORWARD(ibv_resize_cq, "IBVERBS_1.1", ENOSYS, cq, cqe);
  if (int rc = cq_of(cq).resize(cqe); rc != 0) return rc;
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
  auto& dev = *ours(channel->context)->dev;
  dev.begin_wait();
  uroce::verbs::Cq* q = to_u<UChannel>(channel)->channel->get_cq_event();
  dev.end_wait();
  if (!q) return -1;
  auto* owner = static_cast<ibv_cq*>(q->handle);
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
