/* SPDX-License-Identifier: BSD-3-Clause */
// The multicast commands, as ucma.c's ucma_join_ip_multicast,
// ucma_join_multicast, ucma_process_join and ucma_leave_multicast check
// and answer them: a join has its own id (the response's), its events
// carry the uid the command gave, and LEAVE_MCAST tells how many events
// the join reported. The join itself is the CM's (Cma::join_multicast);
// librdmacm attaches the program's QP to the group when the
// MULTICAST_JOIN event arrives.

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "rdmacm/abi.h"
#include "rdmacm/ucma.h"

namespace uroce::rdmacm {

namespace {

// rdma_addr_size: the size of the family's socket address, 0 for a
// family the rdma_cm does not know.
std::size_t addr_size(const void* sa) {
  sa_family_t f;
  std::memcpy(&f, sa, sizeof(f));
  switch (f) {
    case AF_INET:
      return sizeof(sockaddr_in);
    case AF_INET6:
      return sizeof(sockaddr_in6);
    case AF_IB:
      return sizeof(SockaddrIb);
    default:
      return 0;
  }
}

}  // namespace

int Ucma::join_ip_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  const auto c = command_struct<rdma_ucm_join_ip_mcast>(in, in_len);
  // rdma_addr_size_in6: an address that fits a sockaddr_in6.
  const std::size_t size = addr_size(&c.addr);
  if (size == 0 || size > sizeof(c.addr)) return EINVAL;
  return join(f, c.id, c.uid, &c.addr, size, RDMA_MC_JOIN_FLAG_FULLMEMBER, c.response, out_len);
}

int Ucma::join_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  const auto c = command_struct<rdma_ucm_join_mcast>(in, in_len);
  // rdma_addr_size_kss, then ucma_process_join's size check.
  const std::size_t size = addr_size(&c.addr);
  if (size == 0 || c.addr_size != size) return EINVAL;
  return join(f, c.id, c.uid, &c.addr, size, c.join_flags, c.response, out_len);
}

int Ucma::join(File& f, std::uint32_t handle, std::uint64_t uid, const void* addr,
               std::size_t size, std::uint16_t join_flags, std::uint64_t response,
               std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_create_id_resp)) return ENOSPC;
  cm::McJoinState state;
  switch (join_flags) {
    case RDMA_MC_JOIN_FLAG_FULLMEMBER:
      state = cm::McJoinState::kFullMember;
      break;
    case RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER:
      state = cm::McJoinState::kSendOnlyFullMember;
      break;
    default:
      return EINVAL;
  }
  const auto group = from_sockaddr(addr, size);
  if (!group) return EAFNOSUPPORT;  // AF_IB: uroce keeps to IP addresses
  rdma_ucm_create_id_resp resp{};
  const int err = with_ctx(f, handle, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    Mc m;
    m.id = next_mc_++;
    m.ctx = x.handle;
    m.uid = uid;
    m.group = group->ip;
    const int rc = cma.join_multicast(x.cma, m.group, state, m.id);
    if (rc != 0) return rc;
    resp.id = m.id;
    mcs_[m.id] = m;
    return 0;
  });
  if (err != 0) return err;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(response)), &resp, sizeof(resp));
  return 0;
}

int Ucma::leave_mcast(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_destroy_id_resp)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_destroy_id>(in, in_len);
  verbs::Gsi* g = gsi();
  if (!g) return ENODEV;
  rdma_ucm_destroy_id_resp resp{};
  const int err = g->run([&](cm::Cma& cma, cm::Nanos) {
    const auto it = mcs_.find(c.id);
    if (it == mcs_.end()) return ENOENT;
    const auto ctx = ctxs_.find(it->second.ctx);
    if (ctx == ctxs_.end()) return ENOENT;
    if (ctx->second.file != &f) return EINVAL;
    cma.leave_multicast(ctx->second.cma, it->second.id);
    resp.events_reported = it->second.events_reported;
    mcs_.erase(it);
    return 0;
  });
  if (err != 0) return err;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(c.response)), &resp,
              sizeof(resp));
  return 0;
}

}  // namespace uroce::rdmacm
