/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The ucma ABI's structs (<rdma/rdma_user_cm.h>, <rdma/ib_user_verbs.h>,
// <rdma/ib_user_sa.h>) to and from lib/cm's: socket addresses, path
// records as QUERY_ROUTE and QUERY(PATH) report them, QP attributes as
// INIT_QP_ATTR does, connection parameters and events. Byte orders as
// the kernel's ib_copy_*_to_user leave them.

#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_cm.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "cm/cma.h"
#include "wire/ip.h"

namespace uroce::rdmacm {

/// AF_IB, as <sys/socket.h> numbers it.
inline constexpr int kAfIb = 27;

/// struct sockaddr_ib (the kernel's rdma/ib.h, which librdmacm's ib.h
/// repeats): QUERY(GID) answers with one for each end.
struct SockaddrIb {
  std::uint16_t sib_family;
  std::uint16_t sib_pkey;      ///< network order
  std::uint32_t sib_flowinfo;  ///< network order
  std::uint8_t sib_addr[16];
  std::uint64_t sib_sid;       ///< network order
  std::uint64_t sib_sid_mask;  ///< network order
  std::uint64_t sib_scope_id;
};
static_assert(sizeof(SockaddrIb) == 48);

/// An IP socket address (AF_INET or AF_INET6) of at most `size` bytes.
struct SockAddr {
  wire::IpAddr ip;
  std::uint16_t port = 0;
};
/// Nullopt for another family or a size too small for the family.
std::optional<SockAddr> from_sockaddr(const void* sa, std::size_t size);
/// sockaddr_in for IPv4, sockaddr_in6 for IPv6, into `out` (room for a
/// sockaddr_in6 at least); returns its size.
std::size_t to_sockaddr(const wire::IpAddr& ip, std::uint16_t port, void* out);

/// ib_copy_path_rec_to_user of the kernel's RoCE path record.
void to_user_path(const cm::PathRecord& p, ib_user_path_rec* out);
/// The path as QUERY(PATH) gives it: flags and the packed SA PathRecord
/// (IBA 15.2.5.16, ib_sa_pack_path), `service_id` in it.
void to_path_data(const cm::PathRecord& p, std::uint64_t service_id, ib_path_rec_data* out);

void to_uverbs_ah(const cm::AhAttr& a, ib_uverbs_ah_attr* out);
/// ib_copy_qp_attr_to_user.
void to_uverbs_qp_attr(const cm::QpAttr& a, unsigned mask, ib_uverbs_qp_attr* out);

/// ucma_copy_conn_param: what the program's rdma_conn_param asks for.
/// The span points into `in`.
cm::ConnParam to_conn_param(const rdma_ucm_conn_param& in);

/// ucma_copy_conn_event / ucma_copy_ud_event, the event's number and status.
void to_event_resp(const cm::CmaEvent& e, bool ud, rdma_ucm_event_resp* out);

/// Copies a command struct from the caller: `len` bytes of it, the rest
/// zero (a shorter struct from an older librdmacm, or a newer one's tail
/// left out).
template <typename T>
T command_struct(const void* in, std::size_t len) {
  T t{};
  std::memcpy(&t, in, len < sizeof(T) ? len : sizeof(T));
  return t;
}

}  // namespace uroce::rdmacm
