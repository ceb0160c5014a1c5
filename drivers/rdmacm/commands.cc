/* SPDX-License-Identifier: BSD-3-Clause */
// The ucma commands but GET_EVENT (channel.cc), each as ucma.c's handler
// checks and answers it, over the CM's calls. Errors are the kernel's:
// ENOSPC for a response too small, ENOENT for an id that does not exist,
// EINVAL for one of another descriptor, ENOSYS for what is not there.

#include <endian.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "rdmacm/abi.h"
#include "rdmacm/ucma.h"

namespace uroce::rdmacm {

namespace {

// The response pointer of a command, in the caller's memory.
template <typename T>
void respond(std::uint64_t response, const T& value, std::size_t len = sizeof(T)) {
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(response)), &value, len);
}

sa_family_t family_of(const void* sa, std::size_t size) {
  sa_family_t f = AF_UNSPEC;
  if (size >= sizeof(f)) std::memcpy(&f, sa, sizeof(f));
  return f;
}

}  // namespace

int Ucma::command(File& f, std::uint32_t cmd, const void* in, std::size_t in_len,
                  std::size_t out_len) {
  switch (cmd) {
    case RDMA_USER_CM_CMD_CREATE_ID:
      return create_id(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_DESTROY_ID:
      return destroy_id(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_BIND_IP: {
      const auto c = command_struct<rdma_ucm_bind_ip>(in, in_len);
      return bind(f, c.id, &c.addr, sizeof(c.addr));
    }
    case RDMA_USER_CM_CMD_BIND: {
      const auto c = command_struct<rdma_ucm_bind>(in, in_len);
      // AF_IB: librdmacm's probe (ucma_set_af_ib_support) learns from this
      // that it is to use the IP commands.
      if (family_of(&c.addr, c.addr_size) == AF_IB) return EAFNOSUPPORT;
      if (c.reserved || c.addr_size == 0 || c.addr_size > sizeof(c.addr)) return EINVAL;
      return bind(f, c.id, &c.addr, c.addr_size);
    }
    case RDMA_USER_CM_CMD_RESOLVE_IP: {
      const auto c = command_struct<rdma_ucm_resolve_ip>(in, in_len);
      return resolve(f, c.id, &c.src_addr, sizeof(c.src_addr), &c.dst_addr, sizeof(c.dst_addr),
                     c.timeout_ms);
    }
    case RDMA_USER_CM_CMD_RESOLVE_ADDR: {
      const auto c = command_struct<rdma_ucm_resolve_addr>(in, in_len);
      if (c.reserved || c.dst_size == 0 || c.src_size > sizeof(c.src_addr) ||
          c.dst_size > sizeof(c.dst_addr))
        return EINVAL;
      return resolve(f, c.id, &c.src_addr, c.src_size, &c.dst_addr, c.dst_size, c.timeout_ms);
    }
    case RDMA_USER_CM_CMD_RESOLVE_ROUTE: {
      const auto c = command_struct<rdma_ucm_resolve_route>(in, in_len);
      return with_ctx(f, c.id,
                      [](Ctx& x, cm::Cma& cma, cm::Nanos) { return cma.resolve_route(x.cma); });
    }
    case RDMA_USER_CM_CMD_QUERY_ROUTE:
      return query_route(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_QUERY:
      return query(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_CONNECT:
      return connect(f, in, in_len);
    case RDMA_USER_CM_CMD_LISTEN: {
      const auto c = command_struct<rdma_ucm_listen>(in, in_len);
      return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
        return cma.listen(x.cma, static_cast<int>(std::min<std::uint32_t>(c.backlog, 1u << 30)));
      });
    }
    case RDMA_USER_CM_CMD_ACCEPT:
      return accept(f, in, in_len);
    case RDMA_USER_CM_CMD_REJECT:
      return reject(f, in, in_len);
    case RDMA_USER_CM_CMD_DISCONNECT: {
      const auto c = command_struct<rdma_ucm_disconnect>(in, in_len);
      return with_ctx(
          f, c.id, [](Ctx& x, cm::Cma& cma, cm::Nanos now) { return cma.disconnect(x.cma, now); });
    }
    case RDMA_USER_CM_CMD_INIT_QP_ATTR:
      return init_qp_attr(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_GET_EVENT:
      return get_event(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_SET_OPTION:
      return set_option(f, in, in_len);
    case RDMA_USER_CM_CMD_NOTIFY: {
      const auto c = command_struct<rdma_ucm_notify>(in, in_len);
      return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos now) {
        // ib_cm_notify: a QP's first receive stands for the RTU; uroce
        // has no alternate path to migrate to.
        return c.event == IBV_EVENT_COMM_EST ? cma.establish(x.cma, now) : EINVAL;
      });
    }
    case RDMA_USER_CM_CMD_MIGRATE_ID:
      return migrate_id(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_JOIN_IP_MCAST:
      return join_ip_mcast(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_JOIN_MCAST:
      return join_mcast(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_LEAVE_MCAST:
      return leave_mcast(f, in, in_len, out_len);
    case RDMA_USER_CM_CMD_GET_OPTION:
      // The kernel never had it.
      return ENOSYS;
    default:
      return EINVAL;
  }
}

int Ucma::create_id(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_create_id_resp)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_create_id>(in, in_len);
  rdma_ucm_create_id_resp resp{};
  // ucma_get_qp_type.
  cm::QpType type;
  switch (c.ps) {
    case RDMA_PS_TCP:
      type = cm::QpType::kRc;
      break;
    case RDMA_PS_UDP:
      type = cm::QpType::kUd;
      break;
    case RDMA_PS_IB:
    case RDMA_PS_IPOIB: {
      // Port spaces of InfiniBand addressing: the id exists and can only
      // be destroyed; what needs an address fails.
      resp.id = alloc_handle();
      {
        std::lock_guard lock(stubs_mu_);
        stubs_[resp.id] = &f;
      }
      respond(c.response, resp);
      return 0;
    }
    default:
      return EINVAL;
  }
  verbs::Gsi* g = gsi();
  if (!g) return ENODEV;
  const bool ok = g->run([&](cm::Cma& cma, cm::Nanos) {
    const std::uint32_t id = cma.create_id(f.channel, static_cast<cm::PortSpace>(c.ps), type);
    if (id) resp.id = add_ctx(f, id, c.uid, type);
    return id != 0;
  });
  if (!ok) return EINVAL;
  respond(c.response, resp);
  return 0;
}

int Ucma::destroy_id(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_destroy_id_resp)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_destroy_id>(in, in_len);
  rdma_ucm_destroy_id_resp resp{};
  {
    std::unique_lock lock(stubs_mu_);
    if (const auto it = stubs_.find(c.id); it != stubs_.end()) {
      if (it->second != &f) return EINVAL;
      stubs_.erase(it);
      lock.unlock();
      free_handle(c.id);
      respond(c.response, resp);
      return 0;
    }
  }
  const int err = with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos now) {
    // ucma_destroy_id: the id, its events not taken, and for a listener
    // the connections nobody took; what it reported, for librdmacm to
    // wait until the program acknowledged as many.
    resp.events_reported = x.events_reported;
    cma.destroy_id(x.cma, now);
    erase_ctx(x.handle);
    return 0;
  });
  if (err != 0) return err;
  respond(c.response, resp);
  return 0;
}

int Ucma::bind(File& f, std::uint32_t handle, const void* addr, std::size_t size) {
  const auto a = from_sockaddr(addr, size);
  if (!a) return family_of(addr, size) == AF_IB ? EAFNOSUPPORT : EINVAL;
  return with_ctx(f, handle,
                  [&](Ctx& x, cm::Cma& cma, cm::Nanos) { return cma.bind(x.cma, a->ip, a->port); });
}

int Ucma::resolve(File& f, std::uint32_t handle, const void* src, std::size_t src_size,
                  const void* dst, std::size_t dst_size, std::uint32_t timeout_ms) {
  std::optional<SockAddr> from;
  if (src_size != 0 && family_of(src, src_size) != AF_UNSPEC) {
    from = from_sockaddr(src, src_size);
    if (!from) return family_of(src, src_size) == AF_IB ? EAFNOSUPPORT : EINVAL;
  }
  const auto to = from_sockaddr(dst, dst_size);
  if (!to) return family_of(dst, dst_size) == AF_IB ? EAFNOSUPPORT : EINVAL;
  verbs::Gsi* g = gsi();
  if (!g) return ENODEV;
  std::uint32_t id = 0;
  std::optional<wire::IpAddr> source;
  const int err = with_ctx(f, handle, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    const int ret = cma.resolve_addr(
        x.cma, from ? std::optional<wire::IpAddr>(from->ip) : std::nullopt, to->ip, to->port);
    if (ret != 0) return ret;
    // The source the id is bound to, if it is one of the device's
    // addresses; else the resolver picks the device's address toward
    // the destination.
    const auto info = cma.query(x.cma);
    if (info && cma.is_device_ip(info->src_ip)) source = info->src_ip;
    id = x.cma;
    return 0;
  });
  if (err != 0) return err;
  // rdma_resolve_ip: ARP or ND off the caller's thread; ADDR_RESOLVED or
  // ADDR_ERROR follows.
  g->resolve_addr(id, source, to->ip, std::chrono::milliseconds(timeout_ms));
  return 0;
}

int Ucma::query_route(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_query_route_resp)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_query>(in, in_len);
  rdma_ucm_query_route_resp resp{};
  const int err = with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    const auto info = cma.query(x.cma);
    if (!info) return EINVAL;
    if (info->state != cm::CmaState::kIdle) {
      to_sockaddr(info->src_ip, info->src_port, &resp.src_addr);
      to_sockaddr(info->dst_ip, info->dst_port, &resp.dst_addr);
    }
    // An id bound to one of the device's addresses has the device: its
    // GUID, which librdmacm matches against ibv_get_device_guid, and no
    // kernel index (-1: match by GUID alone).
    resp.ibdev_index = static_cast<std::uint32_t>(-1);
    if (!cma.is_device_ip(info->src_ip)) return 0;
    resp.node_guid = device_guid_;
    resp.port_num = cma.device().port_num;
    if (info->route) {
      resp.num_paths = 1;
      to_user_path(*info->route, &resp.ib_route[0]);
    } else {
      // ucma_copy_iboe_route without a path: the GIDs of the addresses.
      std::memcpy(resp.ib_route[0].dgid, info->dst_ip.bytes.data(), 16);
      std::memcpy(resp.ib_route[0].sgid, info->src_ip.bytes.data(), 16);
      resp.ib_route[0].pkey = htobe16(wire::kDefaultPkey);
    }
    return 0;
  });
  if (err != 0) return err;
  respond(c.response, resp);
  return 0;
}

int Ucma::query(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  const auto c = command_struct<rdma_ucm_query>(in, in_len);
  if (c.option == RDMA_USER_CM_QUERY_PATH) {
    if (out_len < sizeof(rdma_ucm_query_path_resp)) return ENOSPC;
    // rdma_ucm_query_path_resp and its one path (the struct ends in a
    // flexible array).
    std::uint32_t num_paths = 0;
    ib_path_rec_data path{};
    const int err = with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
      const auto info = cma.query(x.cma);
      if (!info) return EINVAL;
      if (info->route && out_len - sizeof(rdma_ucm_query_path_resp) >= sizeof(path)) {
        num_paths = 1;
        to_path_data(*info->route, cm::service_id(info->ps, info->dst_port), &path);
      }
      return 0;
    });
    if (err != 0) return err;
    auto* out = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(c.response));
    const rdma_ucm_query_path_resp head{num_paths, 0};
    std::memcpy(out, &head, sizeof(head));
    if (num_paths) std::memcpy(out + sizeof(head), &path, sizeof(path));
    return 0;
  }
  if (c.option != RDMA_USER_CM_QUERY_ADDR && c.option != RDMA_USER_CM_QUERY_GID) return ENOSYS;
  if (out_len < sizeof(rdma_ucm_query_addr_resp)) return ENOSPC;
  rdma_ucm_query_addr_resp resp{};
  const int err = with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    const auto info = cma.query(x.cma);
    if (!info) return EINVAL;
    resp.ibdev_index = static_cast<std::uint32_t>(-1);
    if (cma.is_device_ip(info->src_ip)) {
      resp.node_guid = device_guid_;
      resp.port_num = cma.device().port_num;
      resp.pkey = htobe16(wire::kDefaultPkey);
    }
    if (c.option == RDMA_USER_CM_QUERY_ADDR) {
      resp.src_size =
          static_cast<std::uint16_t>(to_sockaddr(info->src_ip, info->src_port, &resp.src_addr));
      resp.dst_size =
          static_cast<std::uint16_t>(to_sockaddr(info->dst_ip, info->dst_port, &resp.dst_addr));
      return 0;
    }
    // ucma_query_gid: each end as an AF_IB address, its GID and the
    // ServiceID of its port.
    auto gid = [&](const wire::IpAddr& ip, std::uint16_t port, void* out) {
      SockaddrIb sib{};
      sib.sib_family = AF_IB;
      sib.sib_pkey = resp.pkey;
      std::memcpy(sib.sib_addr, ip.bytes.data(), 16);
      sib.sib_sid = htobe64(cm::service_id(info->ps, port));
      std::memcpy(out, &sib, sizeof(sib));
    };
    gid(info->src_ip, info->src_port, &resp.src_addr);
    gid(info->dst_ip, info->dst_port, &resp.dst_addr);
    resp.src_size = resp.dst_size = sizeof(SockaddrIb);
    return 0;
  });
  if (err != 0) return err;
  respond(c.response, resp);
  return 0;
}

int Ucma::connect(File& f, const void* in, std::size_t in_len) {
  const auto c = command_struct<rdma_ucm_connect>(in, in_len);
  if (!c.conn_param.valid) return EINVAL;
  return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos now) {
    return cma.connect(x.cma, to_conn_param(c.conn_param), now);
  });
}

int Ucma::accept(File& f, const void* in, std::size_t in_len) {
  const auto c = command_struct<rdma_ucm_accept>(in, in_len);
  return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos now) {
    if (!c.conn_param.valid) return cma.accept(x.cma, std::nullopt, now);  // the active side's RTU
    const int ret = cma.accept(x.cma, to_conn_param(c.conn_param), now);
    // From now on the new connection's events reach the program.
    if (ret == 0) x.uid = c.uid;
    return ret;
  });
}

int Ucma::reject(File& f, const void* in, std::size_t in_len) {
  const auto c = command_struct<rdma_ucm_reject>(in, in_len);
  // ucma_reject: the consumer's reason (0 for it), or rdma_reject_ece's.
  const auto reason = static_cast<cm::RejReason>(c.reason ? c.reason : 28);
  if (reason != cm::RejReason::kConsumerDefined &&
      reason != cm::RejReason::kVendorOptionNotSupported)
    return EINVAL;
  const std::span<const std::uint8_t> pd(
      c.private_data, std::min<std::size_t>(c.private_data_len, sizeof(c.private_data)));
  return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos now) {
    return cma.reject(x.cma, pd, now, reason);
  });
}

int Ucma::init_qp_attr(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(ib_uverbs_qp_attr)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_init_qp_attr>(in, in_len);
  if (c.qp_state > static_cast<std::uint32_t>(cm::QpState::kErr)) return EINVAL;
  ib_uverbs_qp_attr resp{};
  const int err = with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    cm::QpAttr attr;
    unsigned mask = 0;
    const int ret = cma.init_qp_attr(x.cma, static_cast<cm::QpState>(c.qp_state), attr, mask);
    if (ret == 0) to_uverbs_qp_attr(attr, mask, &resp);
    return ret;
  });
  if (err != 0) return err;
  respond(c.response, resp);
  return 0;
}

int Ucma::set_option(File& f, const void* in, std::size_t in_len) {
  const auto c = command_struct<rdma_ucm_set_option>(in, in_len);
  const auto* val = reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(c.optval));
  return with_ctx(f, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    auto as_int = [&] {
      int v;
      std::memcpy(&v, val, sizeof(v));
      return v;
    };
    if (c.level == RDMA_OPTION_IB) {
      // A path from the SA or ibacm: a RoCE route is computed, not given.
      return c.optname == RDMA_OPTION_IB_PATH ? EINVAL : ENOSYS;
    }
    if (c.level != RDMA_OPTION_ID) return ENOSYS;
    switch (c.optname) {
      case RDMA_OPTION_ID_TOS:
        return c.optlen != sizeof(std::uint8_t) ? EINVAL : cma.set_tos(x.cma, val[0]);
      case RDMA_OPTION_ID_REUSEADDR:
        return c.optlen != sizeof(int) ? EINVAL : cma.set_reuseaddr(x.cma, as_int() != 0);
      case RDMA_OPTION_ID_AFONLY:
        return c.optlen != sizeof(int) ? EINVAL : cma.set_afonly(x.cma, as_int() != 0);
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        return c.optlen != sizeof(std::uint8_t) ? EINVAL : cma.set_ack_timeout(x.cma, val[0]);
      default:
        return ENOSYS;
    }
  });
}

int Ucma::migrate_id(File& f, const void* in, std::size_t in_len, std::size_t out_len) {
  if (out_len < sizeof(rdma_ucm_migrate_resp)) return ENOSPC;
  const auto c = command_struct<rdma_ucm_migrate_id>(in, in_len);
  // The id's current descriptor names it; the one written to takes it.
  const FilePtr from = file(static_cast<int>(c.fd));
  if (!from) return ENOENT;
  rdma_ucm_migrate_resp resp{};
  const int err = with_ctx(*from, c.id, [&](Ctx& x, cm::Cma& cma, cm::Nanos) {
    if (x.file != &f) {
      // ucma_migrate_id: the id and its waiting events, in order.
      const int ret = cma.migrate_id(x.cma, f.channel);
      if (ret != 0) return ret;
      x.file = &f;
    }
    resp.events_reported = x.events_reported;
    return 0;
  });
  if (err != 0) return err;
  respond(c.response, resp);
  return 0;
}

}  // namespace uroce::rdmacm
