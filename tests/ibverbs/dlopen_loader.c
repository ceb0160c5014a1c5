/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that loads its verbs library by hand, as NCCL does: dlopen
 * of the library it is told, then dlvsym of each entry point with its
 * libibverbs version, and every call through those pointers (the inline
 * helpers of verbs.h go through the context's ops, as always). It is
 * linked to no verbs library.
 *
 *   dlopen_loader LIBRARY DEVICE
 *     opens DEVICE, connects two RC QPs of it to each other, SENDs 4 KiB
 *     from one to the other and checks every byte; prints "ok".
 *   dlopen_loader LIBRARY --names
 *     prints the library's names of every enum value it names, one per
 *     line, for comparing with another library's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* lib;

static void* sym(const char* name, const char* version) {
  void* p = dlvsym(lib, name, version);
  if (!p) {
    fprintf(stderr, "dlopen_loader: no %s@%s\n", name, version);
    exit(2);
  }
  return p;
}

#define LOAD(var, name, version) __typeof__(&name) var = (__typeof__(&name))sym(#name, version)

static void die(const char* what) {
  fprintf(stderr, "dlopen_loader: %s\n", what);
  exit(1);
}

static int names(void) {
  LOAD(node_str, ibv_node_type_str, "IBVERBS_1.1");
  LOAD(port_str, ibv_port_state_str, "IBVERBS_1.1");
  LOAD(event_str, ibv_event_type_str, "IBVERBS_1.1");
  LOAD(wc_str, ibv_wc_status_str, "IBVERBS_1.1");
  LOAD(to_mult, ibv_rate_to_mult, "IBVERBS_1.0");
  LOAD(from_mult, mult_to_ibv_rate, "IBVERBS_1.0");
  LOAD(to_mbps, ibv_rate_to_mbps, "IBVERBS_1.1");
  LOAD(from_mbps, mbps_to_ibv_rate, "IBVERBS_1.1");
  for (int v = -2; v < 12; ++v) printf("node %d %s\n", v, node_str((enum ibv_node_type)v));
  for (int v = -1; v < 10; ++v) printf("port %d %s\n", v, port_str((enum ibv_port_state)v));
  for (int v = -1; v < 24; ++v) printf("event %d %s\n", v, event_str((enum ibv_event_type)v));
  for (int v = -1; v < 28; ++v) printf("wc %d %s\n", v, wc_str((enum ibv_wc_status)v));
  for (int v = -1; v < 24; ++v) {
    const int mult = to_mult((enum ibv_rate)v), mbps = to_mbps((enum ibv_rate)v);
    printf("rate %d mult %d back %d mbps %d back %d\n", v, mult, (int)from_mult(mult), mbps,
           (int)from_mbps(mbps));
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: dlopen_loader LIBRARY DEVICE|--names\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen_loader: %s\n", dlerror());
    return 2;
  }
  if (strcmp(argv[2], "--names") == 0) return names();

  /* NCCL's set (its ibvwrap), with the versions it asks for. */
  LOAD(fork_init, ibv_fork_init, "IBVERBS_1.1");
  LOAD(get_device_list, ibv_get_device_list, "IBVERBS_1.1");
  LOAD(free_device_list, ibv_free_device_list, "IBVERBS_1.1");
  LOAD(get_device_name, ibv_get_device_name, "IBVERBS_1.1");
  LOAD(open_device, ibv_open_device, "IBVERBS_1.1");
  LOAD(close_device, ibv_close_device, "IBVERBS_1.1");
  LOAD(query_device, ibv_query_device, "IBVERBS_1.1");
  /* verbs.h makes ibv_query_port a macro over the compat declaration;
   * the entry point takes a struct ibv_port_attr, as NCCL declares it. */
  int (*query_port)(struct ibv_context*, uint8_t, struct ibv_port_attr*) = (int (*)(
      struct ibv_context*, uint8_t, struct ibv_port_attr*))sym("ibv_query_port", "IBVERBS_1.1");
  LOAD(query_gid, ibv_query_gid, "IBVERBS_1.1");
  LOAD(query_qp, ibv_query_qp, "IBVERBS_1.1");
  LOAD(alloc_pd, ibv_alloc_pd, "IBVERBS_1.1");
  LOAD(dealloc_pd, ibv_dealloc_pd, "IBVERBS_1.1");
  LOAD(reg_mr, ibv_reg_mr, "IBVERBS_1.1");
  LOAD(reg_mr_iova2, ibv_reg_mr_iova2, "IBVERBS_1.8");
  LOAD(dereg_mr, ibv_dereg_mr, "IBVERBS_1.1");
  LOAD(create_comp_channel, ibv_create_comp_channel, "IBVERBS_1.0");
  LOAD(destroy_comp_channel, ibv_destroy_comp_channel, "IBVERBS_1.0");
  LOAD(create_cq, ibv_create_cq, "IBVERBS_1.1");
  LOAD(destroy_cq, ibv_destroy_cq, "IBVERBS_1.1");
  LOAD(create_qp, ibv_create_qp, "IBVERBS_1.1");
  LOAD(modify_qp, ibv_modify_qp, "IBVERBS_1.1");
  LOAD(destroy_qp, ibv_destroy_qp, "IBVERBS_1.1");
  LOAD(event_type_str, ibv_event_type_str, "IBVERBS_1.1");
  LOAD(wc_status_str, ibv_wc_status_str, "IBVERBS_1.1");
  LOAD(query_ece, ibv_query_ece, "IBVERBS_1.10");
  (void)query_ece;
  (void)event_type_str;

  if (fork_init() != 0) die("ibv_fork_init failed");
  int n = 0;
  struct ibv_device** list = get_device_list(&n);
  if (!list) die("no device list");
  struct ibv_device* dev = NULL;
  for (int i = 0; i < n; ++i)
    if (strcmp(get_device_name(list[i]), argv[2]) == 0) dev = list[i];
  if (!dev) die("the device is not listed");
  struct ibv_context* ctx = open_device(dev);
  free_device_list(list);
  if (!ctx) die("ibv_open_device failed");
  struct ibv_device_attr dattr;
  struct ibv_port_attr pattr;
  if (query_device(ctx, &dattr) != 0 || query_port(ctx, 1, &pattr) != 0) die("query failed");
  if (pattr.state != IBV_PORT_ACTIVE) die("port 1 is not active");
  union ibv_gid gid;
  if (query_gid(ctx, 1, 1, &gid) != 0) die("no GID 1");

  struct ibv_pd* pd = alloc_pd(ctx);
  struct ibv_comp_channel* ch = create_comp_channel(ctx);
  struct ibv_cq* cq = pd && ch ? create_cq(ctx, 16, NULL, ch, 0) : NULL;
  if (!cq) die("no PD, channel or CQ");
  enum { kLen = 4096 };
  uint8_t* src = malloc(kLen);
  uint8_t* dst = calloc(1, kLen);
  for (int i = 0; i < kLen; ++i) src[i] = (uint8_t)(i * 7 + 3);
  const int access = IBV_ACCESS_LOCAL_WRITE;
  struct ibv_mr* smr = reg_mr(pd, src, kLen, access);
  struct ibv_mr* dmr = reg_mr_iova2(pd, dst, kLen, (uintptr_t)dst, (unsigned)access);
  if (!smr || !dmr) die("ibv_reg_mr failed");

  struct ibv_qp* qp[2];
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC};
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    qp[i] = create_qp(pd, &ia);
    if (!qp[i]) die("ibv_create_qp failed");
  }
  /* Each QP faces the other at the device's own GID: the engine delivers
   * frames to its own addresses inside the device. */
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    if (modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      die("to INIT failed");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp[1 - i]->qp_num;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (modify_qp(qp[i], &a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      die("to RTR failed");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 100;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (modify_qp(qp[i], &a,
                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
      die("to RTS failed");
  }
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qia;
  if (query_qp(qp[0], &qa, IBV_QP_STATE, &qia) != 0 || qa.qp_state != IBV_QPS_RTS)
    die("ibv_query_qp does not say RTS");

  struct ibv_sge rs = {.addr = (uintptr_t)dst, .length = kLen, .lkey = dmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *rbad;
  struct ibv_sge ss = {.addr = (uintptr_t)src, .length = kLen, .lkey = smr->lkey};
  struct ibv_send_wr swr = {.wr_id = 1,
                            .sg_list = &ss,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED},
                     *sbad;
  if (ibv_post_recv(qp[1], &rwr, &rbad) || ibv_post_send(qp[0], &swr, &sbad)) die("post failed");
  int got = 0;
  for (long spins = 0; got < 2 && spins < 200000000L; ++spins) {
    struct ibv_wc wc;
    const int k = ibv_poll_cq(cq, 1, &wc);
    if (k < 0) die("ibv_poll_cq failed");
    if (k == 0) continue;
    if (wc.status != IBV_WC_SUCCESS) {
      fprintf(stderr, "dlopen_loader: completion %s\n", wc_status_str(wc.status));
      return 1;
    }
    ++got;
  }
  if (got < 2) die("no completions");
  if (memcmp(src, dst, kLen) != 0) die("the bytes differ");

  for (int i = 0; i < 2; ++i) destroy_qp(qp[i]);
  dereg_mr(smr);
  dereg_mr(dmr);
  destroy_cq(cq);
  destroy_comp_channel(ch);
  dealloc_pd(pd);
  close_device(ctx);
  free(src);
  free(dst);
  printf("ok\n");
  return 0;
}
