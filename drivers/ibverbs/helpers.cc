/* SPDX-License-Identifier: BSD-3-Clause */
// The entry points of libibverbs that touch no device: the names of its
// enums, the rate conversions, fork support, the kernel ABI copies and
// the sysfs readers. A program that loads this library in place of
// libibverbs (NCCL looks every entry point up with dlvsym on the handle
// of the library it opened) finds them all here. Where the real
// libibverbs is loaded as well, each call goes to it, so that a program
// sees exactly the strings and conversions of the libibverbs it was
// built for; otherwise the definitions here, which are libibverbs 44's.

#include <fcntl.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "ibverbs/forward.h"

// libibverbs declares these in infiniband/marshall.h and
// infiniband/driver.h, which Debian does not install.
extern "C" {
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src);
void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src);
void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src);
int ibv_dontfork_range(void* base, size_t size);
int ibv_dofork_range(void* base, size_t size);
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
}

/// Returns the real libibverbs's `fn`@`ver` applied to the arguments when
/// that library is loaded; falls through to the code after it when not.
#define UROCE_REAL_FIRST(fn, ver, ...)                                           \
  do {                                                                           \
    static const auto real = ::uroce::ibverbs::real_fn<decltype(&fn)>(#fn, ver); \
    if (real != nullptr) return real(__VA_ARGS__);                               \
  } while (0)

namespace {

// The name of `v` in a table indexed by the enum, or "unknown" (as
// libibverbs says for a value past its table or a gap in it).
template <std::size_t N>
const char* name_in(const char* const (&table)[N], int v) {
  if (v < 0 || static_cast<std::size_t>(v) >= N || table[v] == nullptr) return "unknown";
  return table[v];
}

struct RateRow {
  ibv_rate rate;
  int mult;  ///< of 2.5 Gb/s; -1 where the rate is none of its multiples
  int mbps;
};

// IBA's static rates (the PortInfo and path record encoding): each as a
// multiple of the 2.5 Gb/s 1x SDR link where it is one, and in Mb/s of
// data (FDR and EDR rates with their 64b/66b coding).
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};

}  // namespace

// --- the names of enums ------------------------------------------------------------

const char* ibv_node_type_str(ibv_node_type t) {
  UROCE_REAL_FIRST(ibv_node_type_str, "IBVERBS_1.1", t);
  static const char* const names[] = {
      nullptr,  // 0 is no node type
      "InfiniBand channel adapter",
      "InfiniBand switch",
      "InfiniBand router",
      "iWARP NIC",
      "usNIC",
      "usNIC UDP",
      "unspecified",
  };
  return name_in(names, t);
}

const char* ibv_port_state_str(ibv_port_state s) {
  UROCE_REAL_FIRST(ibv_port_state_str, "IBVERBS_1.1", s);
  static const char* const names[] = {
      "no state change (NOP)", "down", "init", "armed", "active", "active defer",
  };
  return name_in(names, s);
}

const char* ibv_event_type_str(ibv_event_type e) {
  UROCE_REAL_FIRST(ibv_event_type_str, "IBVERBS_1.1", e);
  static const char* const names[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  return name_in(names, e);
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  UROCE_REAL_FIRST(ibv_wc_status_str, "IBVERBS_1.1", s);
  static const char* const names[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM software rendezvous",
  };
  return name_in(names, s);
}

// --- rates -------------------------------------------------------------------------

int ibv_rate_to_mult(ibv_rate rate) {
  UROCE_REAL_FIRST(ibv_rate_to_mult, "IBVERBS_1.0", rate);
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  UROCE_REAL_FIRST(mult_to_ibv_rate, "IBVERBS_1.0", mult);
  for (const RateRow& r : kRates)
    if (r.mult == mult && mult > 0) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  UROCE_REAL_FIRST(ibv_rate_to_mbps, "IBVERBS_1.1", rate);
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  UROCE_REAL_FIRST(mbps_to_ibv_rate, "IBVERBS_1.1", mbps);
  for (const RateRow& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// --- fork --------------------------------------------------------------------------
// uroce pins nothing: a registered region is the process's own memory,
// which the engine reads and writes as the process does, so after fork()
// copy-on-write gives each process its own pages and RDMA keeps landing
// in the parent's. Fork support is not needed; the real libibverbs still
// sets it up for the real devices it serves.

int ibv_fork_init(void) {
  UROCE_REAL_FIRST(ibv_fork_init, "IBVERBS_1.1");
  return 0;
}

ibv_fork_status ibv_is_fork_initialized(void) {
  UROCE_REAL_FIRST(ibv_is_fork_initialized, "IBVERBS_1.13");
  return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void* base, size_t size) {
  UROCE_REAL_FIRST(ibv_dontfork_range, "IBVERBS_1.1", base, size);
  return 0;
}

int ibv_dofork_range(void* base, size_t size) {
  UROCE_REAL_FIRST(ibv_dofork_range, "IBVERBS_1.1", base, size);
  return 0;
}

// --- the kernel ABI's structs (librdmacm's path records and QP attributes) ---------

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  UROCE_REAL_FIRST(ibv_copy_ah_attr_from_kern, "IBVERBS_1.1", dst, src);
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  UROCE_REAL_FIRST(ibv_copy_qp_attr_from_kern, "IBVERBS_1.0", dst, src);
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

namespace {

// A path record's fields, the same in both layouts but for the GIDs.
template <typename To, typename From>
void copy_path_fields(To* dst, const From* src) {
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
  dst->packet_life_time_selector = src->packet_life_time_selector;
}

}  // namespace

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  UROCE_REAL_FIRST(ibv_copy_path_rec_from_kern, "IBVERBS_1.0", dst, src);
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  copy_path_fields(dst, src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  UROCE_REAL_FIRST(ibv_copy_path_rec_to_kern, "IBVERBS_1.0", dst, src);
  std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
  copy_path_fields(dst, src);
}

// --- sysfs -------------------------------------------------------------------------

const char* ibv_get_sysfs_path(void) {
  UROCE_REAL_FIRST(ibv_get_sysfs_path, "IBVERBS_1.0");
  // SYSFS_PATH, without trailing slashes, unless the program runs setuid.
  static const std::string path = [] {
    const char* env = getuid() == geteuid() ? std::getenv("SYSFS_PATH") : nullptr;
    std::string p = env ? env : "/sys";
    while (!p.empty() && p.back() == '/') p.pop_back();
    return p;
  }();
  return path.c_str();
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  UROCE_REAL_FIRST(ibv_read_sysfs_file, "IBVERBS_1.0", dir, file, buf, size);
  // The file's contents without their final newline, NUL-terminated; -1
  // when it cannot be read or does not fit.
  const std::string path = std::string(dir) + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = read(fd, buf, size);
  close(fd);
  if (len > 0) {
    if (buf[len - 1] == '\n') {
      buf[--len] = '\0';
    } else if (static_cast<size_t>(len) < size) {
      buf[len] = '\0';
    } else {
      return -1;
    }
  }
  return static_cast<int>(len);
}
