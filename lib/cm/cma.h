/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The rdma_cm layer (the kernel's drivers/infiniband/core/cma.c) over the
// IB CM, for RoCE: ids in the TCP and UDP port spaces, bind with ports
// (explicit, ephemeral, REUSEADDR), listen with a backlog, address and
// route resolution from what the caller resolved, connect, accept,
// reject, disconnect, init_qp_attr, and rdma_cm events with the kernel's
// meaning, numbering and fixed private-data lengths. The ucma command
// channel (drivers/rdmacm) and uroce's own API sit on top of this.
//
// I/O is the IbCm's: MADs in through receive(), out through the
// MadSender; on_timer() at next_deadline(). Events queue per channel (an
// opaque number the caller gives each id, as ucma gives each id a file)
// and are taken with get_event().
//
// A QP is the caller's. By default the caller moves it itself with
// init_qp_attr(), as librdmacm does for user space: the active side then
// gets CONNECT_RESPONSE on the REP and completes with accept(id) (no
// parameters), which sends the RTU. An id with a QP attached through
// attach_qp() behaves like a kernel consumer's id with rdma_create_qp():
// the CM moves the QP through INIT, RTR and RTS itself (before the REP
// it sends, before the RTU it sends), to ERR on reject and disconnect,
// and the active side gets ESTABLISHED straight from the REP.
//
// Files: cma.cc (ids, bind, listen, resolve, connect, accept, ...),
// cma_ports.cc (port allocation), cma_events.cc (IB CM events into
// rdma_cm events; QP attributes).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cm/ib_cm.h"
#include "cm/mad.h"
#include "cm/types.h"

namespace uroce::cm {

/// enum rdma_cm_event_type, with rdma_cma.h's values.
enum class CmaEventType : std::uint8_t {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};

/// The event's name as rdma_event_str() spells it.
constexpr std::string_view name(CmaEventType e) {
  switch (e) {
    case CmaEventType::kAddrResolved:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case CmaEventType::kAddrError:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case CmaEventType::kRouteResolved:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case CmaEventType::kRouteError:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case CmaEventType::kConnectRequest:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case CmaEventType::kConnectResponse:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case CmaEventType::kConnectError:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case CmaEventType::kUnreachable:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case CmaEventType::kRejected:
      return "RDMA_CM_EVENT_REJECTED";
    case CmaEventType::kEstablished:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case CmaEventType::kDisconnected:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case CmaEventType::kDeviceRemoval:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case CmaEventType::kMulticastJoin:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case CmaEventType::kMulticastError:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case CmaEventType::kAddrChange:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case CmaEventType::kTimewaitExit:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return {};
}

/// The kernel's rdma_cm_state (cma_priv.h).
enum class CmaState : std::uint8_t {
  kIdle,
  kAddrQuery,
  kAddrResolved,
  kRouteQuery,
  kRouteResolved,
  kConnect,
  kDisconnect,
  kAddrBound,
  kListen,
};

constexpr std::string_view name(CmaState s) {
  switch (s) {
    case CmaState::kIdle:
      return "IDLE";
    case CmaState::kAddrQuery:
      return "ADDR_QUERY";
    case CmaState::kAddrResolved:
      return "ADDR_RESOLVED";
    case CmaState::kRouteQuery:
      return "ROUTE_QUERY";
    case CmaState::kRouteResolved:
      return "ROUTE_RESOLVED";
    case CmaState::kConnect:
      return "CONNECT";
    case CmaState::kDisconnect:
      return "DISCONNECT";
    case CmaState::kAddrBound:
      return "ADDR_BOUND";
    case CmaState::kListen:
      return "LISTEN";
  }
  return {};
}

// The private data lengths the kernel reports, whatever the sender sent
// (cma.c cma_set_req_event_data, cma_set_rep_event_data, cma_ib_handler):
// the whole private-data field of the message, less the IP CM header.
inline constexpr std::uint8_t kConnectRequestPrivateLen = 92 - IpCmHdr::kSize;     // 56
inline constexpr std::uint8_t kUdConnectRequestPrivateLen = 216 - IpCmHdr::kSize;  // 180
inline constexpr std::uint8_t kRepPrivateLen = 196;
inline constexpr std::uint8_t kRejPrivateLen = 148;
inline constexpr std::uint8_t kSidrRepPrivateLen = 136;

inline constexpr std::uint8_t kCmaCmResponseTimeout = 20;           ///< CMA_CM_RESPONSE_TIMEOUT
inline constexpr std::uint8_t kCmaMaxCmRetries = 15;                ///< CMA_MAX_CM_RETRIES
inline constexpr std::uint8_t kCmaMraSetting = kMraFlagDelay | 24;  ///< CMA_CM_MRA_SETTING
inline constexpr std::uint8_t kCmaIboePacketLifetime = 18;          ///< CMA_IBOE_PACKET_LIFETIME

/// struct rdma_conn_param (UD uses qkey and private data only).
struct ConnParam {
  std::span<const std::uint8_t> private_data;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t flow_control = 0;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
  std::uint8_t srq = 0;
  std::uint32_t qp_num = 0;  ///< the QP, when none is attached
  std::uint32_t qkey = 0;    ///< UD accept: 0 for RDMA_UDP_QKEY
};

/// One rdma_cm event (struct rdma_cm_event): `conn` for connected QPs,
/// `ud` for UD; the private data is a copy of `private_data_len` bytes.
struct CmaEvent {
  CmaEventType event = CmaEventType::kAddrResolved;
  std::uint32_t id = 0;         ///< the id it is for; a new id for CONNECT_REQUEST
  std::uint32_t listen_id = 0;  ///< CONNECT_REQUEST: the listener
  std::uint64_t context = 0;    ///< the id's context (a new id inherits its listener's)
  int status = 0;               ///< errno (negative) or REJ reason / SIDR status
  std::array<std::uint8_t, 224> private_data{};
  std::uint8_t private_data_len = 0;
  struct Conn {
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t flow_control = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry_count = 0;
    std::uint8_t srq = 0;
    std::uint32_t qp_num = 0;
  } conn;
  struct Ud {
    AhAttr ah_attr;
    std::uint32_t qp_num = 0;
    std::uint32_t qkey = 0;
  } ud;
  /// MULTICAST_JOIN and MULTICAST_ERROR: the join's handle, the caller's
  /// (cma.c hands the join's context back in the event).
  std::uint64_t mc = 0;
};

/// rdma_join_multicast's join states (the kernel's FULLMEMBER_JOIN and
/// SENDONLY_FULLMEMBER_JOIN): a send-only member sends to the group and
/// attaches no QP to it.
enum class McJoinState : std::uint8_t { kFullMember, kSendOnlyFullMember };

/// What the device supplies to the rdma_cm: its addresses, link and CA.
struct CmaDevice {
  std::uint64_t node_guid = 0;
  std::vector<wire::IpAddr> gids;  ///< its IP addresses, the GID table (index = sgid_index)
  std::uint32_t link_mtu = 1500;   ///< the Ethernet MTU; the path MTU follows (1500 -> 1024)
  std::uint8_t ca_ack_delay = 15;
  std::uint8_t rate = 0;         ///< IB static rate of the port, for REQs
  std::uint8_t default_tos = 0;  ///< default_roce_tos
  std::uint8_t port_num = 1;
  std::uint32_t hi_tid = 1;
  std::uint16_t ephemeral_low = 32768;  ///< ip_local_port_range
  std::uint16_t ephemeral_high = 60999;
};

/// What address resolution found (rdma_resolve_ip's answer): the source
/// address to use when the id had none, the peer's MAC and hop limit.
struct ResolvedAddr {
  std::optional<wire::IpAddr> src_ip;
  std::optional<wire::MacAddr> dst_mac;
  std::uint8_t hop_limit = 64;
};

/// The host's port spaces, where other programs bind ports on the same
/// device (one the device daemon shares): the kernel keeps one bind list
/// per port for every process, so a port the Cma takes, once its own ids
/// agree, must also be free of the other programs' bindings. A device a
/// process has alone has no HostPorts: its ports are all its Cma's.
class HostPorts {
 public:
  /// A binding's terms, for cma_check_port across programs.
  struct Binding {
    std::uint64_t service_id = 0;  ///< the port space and port
    wire::IpAddr ip;               ///< the bound address, or its family's any address
    bool any = false;              ///< the address is the any (or a loopback) one
    bool reuseaddr = false;
    bool afonly = false;
    bool ephemeral = false;  ///< a port the Cma picked, which nobody else may hold
  };
  virtual ~HostPorts() = default;
  /// Binds id `id` on the host (again, with new terms, if it holds the
  /// port already): 0, or EADDRINUSE / EADDRNOTAVAIL (EACCES for a port
  /// below 1024 the program's user may not bind).
  virtual int bind(std::uint32_t id, const Binding& b) = 0;
  virtual void unbind(std::uint32_t id) = 0;
};

/// How the CM moves an attached QP (the kernel's ib_modify_qp on id->qp).
class QpControl {
 public:
  virtual ~QpControl() = default;
  /// Returns 0 or an errno value.
  virtual int modify_qp(std::uint32_t qpn, const QpAttr& attr, unsigned mask) = 0;
};

/// What an id is now, for the ucma QUERY commands and for tests.
struct CmaIdInfo {
  std::uint32_t id = 0;
  std::uint32_t channel = 0;
  std::uint64_t context = 0;
  PortSpace ps = PortSpace::kTcp;
  QpType qp_type = QpType::kRc;
  CmaState state = CmaState::kIdle;
  wire::IpAddr src_ip;
  std::uint16_t src_port = 0;
  wire::IpAddr dst_ip;
  std::uint16_t dst_port = 0;
  std::optional<PathRecord> route;
  std::optional<wire::MacAddr> dst_mac;
  std::uint32_t qp_num = 0;
  std::uint32_t ib_id = 0;      ///< the IB CM id (local comm ID), 0 if none
  std::uint32_t listen_id = 0;  ///< an id made by a CONNECT_REQUEST: its listener
};

class Cma {
 public:
  Cma(const CmaDevice& device, MadSender& sender, RandomSource& random);
  Cma(const Cma&) = delete;
  Cma& operator=(const Cma&) = delete;

  // --- ids ----------------------------------------------------------------------
  /// rdma_create_id: 0 for a port space other than TCP and UDP (RC/UC for
  /// TCP, UD for UDP).
  std::uint32_t create_id(std::uint32_t channel, PortSpace ps, QpType qp_type,
                          std::uint64_t context = 0);
  /// rdma_destroy_id; its queued events go too, and for a listener the
  /// new ids of the CONNECT_REQUESTs nobody took (ucma_destroy_id).
  void destroy_id(std::uint32_t id, Nanos now);
  /// rdma_migrate_id: the id's events, queued and future, go to `channel`.
  int migrate_id(std::uint32_t id, std::uint32_t channel);
  std::optional<CmaIdInfo> query(std::uint32_t id) const;

  // --- options (rdma_set_option) --------------------------------------------------
  int set_tos(std::uint32_t id, std::uint8_t tos);
  int set_reuseaddr(std::uint32_t id, bool reuse);
  int set_afonly(std::uint32_t id, bool afonly);
  int set_ack_timeout(std::uint32_t id, std::uint8_t timeout);
  int set_min_rnr_timer(std::uint32_t id, std::uint8_t min_rnr_timer);

  // --- addresses --------------------------------------------------------------------
  /// rdma_bind_addr: an address of the device or the any address (0.0.0.0,
  /// ::), port 0 for an ephemeral one. EADDRINUSE / EADDRNOTAVAIL as the
  /// kernel's cma_check_port decides.
  int bind(std::uint32_t id, const wire::IpAddr& addr, std::uint16_t port);
  /// rdma_listen (binding to 0.0.0.0 and an ephemeral port if unbound).
  int listen(std::uint32_t id, int backlog);
  /// rdma_resolve_addr: binds if needed and waits for addr_resolved() or
  /// addr_error(), which the caller gives once it resolved `dst`.
  int resolve_addr(std::uint32_t id, std::optional<wire::IpAddr> src, const wire::IpAddr& dst,
                   std::uint16_t dst_port);
  int addr_resolved(std::uint32_t id, const ResolvedAddr& result);
  int addr_error(std::uint32_t id, int status);
  /// rdma_resolve_route: the RoCE route from the device and the resolved
  /// address (cma_resolve_iboe_route); ROUTE_RESOLVED at once.
  int resolve_route(std::uint32_t id);

  // --- connections ------------------------------------------------------------------
  /// rdma_create_qp for an id: the CM drives `qpn` through `control` from
  /// now on (INIT now; UD on to RTS).
  int attach_qp(std::uint32_t id, std::uint32_t qpn, bool srq, QpControl& control);
  void detach_qp(std::uint32_t id);
  int connect(std::uint32_t id, const ConnParam& param, Nanos now);
  /// rdma_accept: a CONNECT_REQUEST with `param`; on the active side, a
  /// CONNECT_RESPONSE without (sends the RTU).
  int accept(std::uint32_t id, const std::optional<ConnParam>& param, Nanos now);
  int reject(std::uint32_t id, std::span<const std::uint8_t> private_data, Nanos now,
             RejReason reason = RejReason::kConsumerDefined);
  int disconnect(std::uint32_t id, Nanos now);
  /// rdma_notify(IB_EVENT_COMM_EST).
  int establish(std::uint32_t id, Nanos now);
  // --- multicast (cma_multicast.cc) -------------------------------------------------
  /// rdma_join_multicast on RoCE (cma_iboe_join_multicast): no MADs, the
  /// group's MGID is the address (IPv4-mapped for IPv4) and
  /// MULTICAST_JOIN follows at once, carrying `mc`, with the address
  /// vector to send to the group, QPN 0xFFFFFF and the id's Q_Key.
  /// EINVAL for an id that is not UD, not bound to one of the device's
  /// addresses (ADDR_BOUND or ADDR_RESOLVED), or a zero address;
  /// EOPNOTSUPP for an IPv6 group, which cma.c refuses on RoCEv2. A
  /// group joined twice is two joins, as in cma.c.
  int join_multicast(std::uint32_t id, const wire::IpAddr& group, McJoinState state,
                     std::uint64_t mc);
  /// rdma_leave_multicast of the join `mc`: it and its events not yet
  /// taken go. EINVAL for a join the id does not have.
  int leave_multicast(std::uint32_t id, std::uint64_t mc);

  /// rdma_init_qp_attr.
  int init_qp_attr(std::uint32_t id, QpState state, QpAttr& attr, unsigned& mask) const;

  // --- I/O --------------------------------------------------------------------------
  void receive(wire::ConstBytes mad, const GsiAddress& from, Nanos now);
  void on_timer(Nanos now);
  Nanos next_deadline() const { return ib_.next_deadline(); }
  /// Takes the oldest event of `channel`. Taking a CONNECT_REQUEST frees
  /// its slot in the listener's backlog (as ucma_get_event does).
  bool get_event(std::uint32_t channel, CmaEvent& event);
  std::size_t pending_events(std::uint32_t channel) const;

  /// The ServiceIDs the CM listens on (every rdma_cm listener of a port
  /// shares its port's one).
  std::size_t listening() const { return ib_listeners_.size(); }
  /// Those ServiceIDs, in order.
  std::vector<std::uint64_t> listening_services() const {
    std::vector<std::uint64_t> out;
    out.reserve(ib_listeners_.size());
    for (const auto& [sid, l] : ib_listeners_) out.push_back(sid);
    return out;
  }

  IbCm& ib() { return ib_; }
  const IbCm& ib() const { return ib_; }
  const CmaDevice& device() const { return device_; }
  /// The host's port spaces from now on (null: the device's alone).
  void set_host_ports(HostPorts* host) { host_ports_ = host; }
  /// Whether `a` is in the device's GID table. An empty entry (the zero
  /// GID) is no address, though it equals IPv6's wildcard.
  bool is_device_ip(const wire::IpAddr& a) const;
  /// The device's GID table changed (an address came or went): binds,
  /// routes and requests see the new one; connections made keep theirs.
  void set_gids(const std::vector<wire::IpAddr>& gids) {
    device_.gids = gids;
    ib_.set_gids(gids);
  }

 private:
  struct Endpoint {
    wire::IpAddr ip;
    std::uint16_t port = 0;
  };

  struct Id {
    std::uint32_t id = 0;
    std::uint32_t channel = 0;
    std::uint64_t context = 0;
    PortSpace ps = PortSpace::kTcp;
    QpType qp_type = QpType::kRc;
    CmaState state = CmaState::kIdle;
    bool v6 = false;  ///< the address family, once bound
    Endpoint src;
    Endpoint dst;
    bool reuseaddr = false;
    bool afonly = false;
    bool afonly_set = false;
    std::uint8_t tos = 0;
    bool tos_set = false;
    std::uint8_t timeout = 0;
    bool timeout_set = false;
    std::uint8_t min_rnr_timer = 0;
    bool min_rnr_timer_set = false;
    std::uint32_t seq_num = 0;       ///< the PSN this side receives from, random
    mutable std::uint32_t qkey = 0;  ///< set on first use, as cma_set_qkey does
    std::uint32_t qp_num = 0;
    bool srq = false;
    QpControl* qp = nullptr;
    std::uint32_t ib_id = 0;  ///< IB CM id, 0 when none
    bool bound = false;       ///< holds a port in bind_lists_
    std::optional<wire::MacAddr> dst_mac;
    std::uint8_t hop_limit = 64;
    std::optional<PathRecord> route;
    // Listeners.
    int backlog = 0;
    int pending = 0;  ///< CONNECT_REQUESTs not yet taken
    std::uint64_t ib_service_id = 0;
    std::uint32_t listener = 0;  ///< a new id: the listener it came from
    // Multicast groups joined (cma.c's mc_list).
    struct McJoin {
      wire::IpAddr group;
      McJoinState state = McJoinState::kFullMember;
      std::uint64_t mc = 0;
    };
    std::vector<McJoin> mc_list;
  };

  struct IbListener {
    std::uint32_t ib_id = 0;
    int users = 0;
  };

  // cma.cc
  static bool is_any(const wire::IpAddr& a);
  Id* find(std::uint32_t id);
  const Id* find(std::uint32_t id) const;
  // cma_ports.cc
  int get_port(Id& id);
  int alloc_any_port(Id& id);
  int use_port(Id& id);
  int check_port(const Id& id, bool reuseaddr) const;
  bool port_is_unique(const Id& id, std::uint16_t port) const;
  void bind_port(Id& id, std::uint16_t port);
  /// Asks the host's port spaces for `port` on the id's terms: 0 when
  /// there are none.
  int host_bind(const Id& id, std::uint16_t port, bool reuseaddr, bool ephemeral);
  /// The id's terms changed (REUSEADDR, AF-only, the source address
  /// resolved): the host's bind list holds the new ones.
  void host_rebind(const Id& id);
  void release_port(Id& id);
  std::vector<std::uint8_t> with_ip_cm_hdr(const Id& id, std::span<const std::uint8_t> user) const;
  int set_qkey(Id& id, std::uint32_t qkey);
  std::uint8_t path_mtu_code() const;
  void queue(const Id& id, CmaEvent event);

  // cma_events.cc
  void process_ib_events(Nanos now);
  void on_ib_event(const CmEvent& e, Nanos now);
  void on_req(const CmEvent& e, Nanos now);
  void on_sidr_req(const CmEvent& e, Nanos now);
  void on_sidr_rep(Id& id, const CmEvent& e);
  Id* listener_for(std::uint64_t service_id, const IpCmHdr& hdr, std::optional<QpType> type);
  Id* new_conn_id(const Id& listener, QpType type, const IpCmHdr& hdr, std::uint64_t sid,
                  std::uint32_t ib_id);
  std::uint8_t sgid_index(const wire::IpAddr& gid) const;
  int modify_qp(Id& id, QpState state, const std::optional<ConnParam>& param);
  int modify_qp_rtr(Id& id, const std::optional<ConnParam>& param);
  int modify_qp_rts(Id& id, const std::optional<ConnParam>& param);
  void modify_qp_err(Id& id);
  int rep_recv(Id& id, Nanos now);
  int ib_init_qp_attr(const Id& id, QpAttr& attr, unsigned& mask) const;

  CmaDevice device_;
  RandomSource& random_;
  HostPorts* host_ports_ = nullptr;
  IbCm ib_;
  std::uint32_t next_id_ = 1;
  std::unordered_map<std::uint32_t, Id> ids_;
  std::unordered_map<std::uint32_t, std::uint32_t> by_ib_id_;  ///< IB CM id -> id
  std::map<std::pair<PortSpace, std::uint16_t>, std::vector<std::uint32_t>> bind_lists_;
  std::map<std::uint64_t, IbListener> ib_listeners_;  ///< by ServiceID
  std::uint16_t last_used_port_ = 0;
  std::map<std::uint32_t, std::deque<CmaEvent>> channels_;
};

}  // namespace uroce::cm
