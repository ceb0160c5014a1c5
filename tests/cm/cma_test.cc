/* SPDX-License-Identifier: BSD-3-Clause */
// The rdma_cm layer's own rules: ports and binding, listeners and their
// backlog, the QP attributes rdma_init_qp_attr gives (research/rdma-cm.md
// 1.4), the route, options and channels.

#include "cm/cma.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <set>
#include <vector>

#include "cm/cm_net.h"
#include "cm/cma_peers.h"

namespace uroce::test {
namespace {

using namespace uroce::cm;
using wire::IpAddr;

constexpr std::uint16_t kServicePort = 7174;

class CmaBind : public ::testing::Test {
 protected:
  CmaBind() : net_(1), host_(net_.add_host("10.77.0.1", device())) {}
  static CmaDevice device() {
    CmaDevice d;
    d.gids.push_back(*IpAddr::parse("10.77.1.1"));
    d.gids.push_back(*IpAddr::parse("fd77::1"));
    return d;
  }
  Cma& cma() { return host_.cma(); }
  std::uint32_t id(PortSpace ps = PortSpace::kTcp) {
    return cma().create_id(0, ps, ps == PortSpace::kUdp ? QpType::kUd : QpType::kRc);
  }
  CmNet net_;
  CmHost& host_;
  const IpAddr a_ = *IpAddr::parse("10.77.0.1");
  const IpAddr b_ = *IpAddr::parse("10.77.1.1");
  const IpAddr any4_ = IpAddr::from_v4(0);
  const IpAddr any6_{};
};

TEST_F(CmaBind, OnlyTcpAndUdpPortSpaces) {
  EXPECT_EQ(cma().create_id(0, PortSpace::kIb, QpType::kRc), 0u);
  EXPECT_EQ(cma().create_id(0, PortSpace::kIpoib, QpType::kUd), 0u);
  EXPECT_NE(id(), 0u);
}

TEST_F(CmaBind, AnExplicitPortIsOneAddressesOwnUnlessAllReuseIt) {
  const std::uint32_t x = id(), y = id(), z = id(), w = id();
  ASSERT_EQ(cma().bind(x, a_, kServicePort), 0);
  // Expect: the same address and port again: EADDRINUSE; another address
  // of the host: fine; the any address over a bound one: EADDRNOTAVAIL.
  EXPECT_EQ(cma().bind(y, a_, kServicePort), EADDRINUSE);
  EXPECT_EQ(cma().bind(y, b_, kServicePort), 0);
  EXPECT_EQ(cma().bind(z, any4_, kServicePort), EADDRNOTAVAIL);
  // Expect: the same port in the other port space is another port.
  const std::uint32_t u = id(PortSpace::kUdp);
  EXPECT_EQ(cma().bind(u, a_, kServicePort), 0);
  // Expect: an address the device does not have: EADDRNOTAVAIL.
  EXPECT_EQ(cma().bind(w, *IpAddr::parse("10.99.0.1"), 1), EADDRNOTAVAIL);
  // Expect: a failed bind leaves the id IDLE, so it can bind elsewhere.
  EXPECT_EQ(cma().query(z)->state, CmaState::kIdle);
  EXPECT_EQ(cma().bind(z, a_, kServicePort + 1), 0);
  // Expect: destroying the owner frees the port.
  cma().destroy_id(x, 0);
  EXPECT_EQ(cma().bind(w, a_, kServicePort), 0);
}

TEST_F(CmaBind, ReuseaddrSharesAPortButNotWithAListener) {
  const std::uint32_t x = id(), y = id(), l = id();
  ASSERT_EQ(cma().set_reuseaddr(x, true), 0);
  ASSERT_EQ(cma().set_reuseaddr(y, true), 0);
  ASSERT_EQ(cma().set_reuseaddr(l, true), 0);
  ASSERT_EQ(cma().bind(x, a_, kServicePort), 0);
  EXPECT_EQ(cma().bind(y, a_, kServicePort), 0);
  EXPECT_EQ(cma().bind(l, a_, kServicePort), 0);
  // Expect: a listener must be alone on its address (rdma_listen checks
  // the port again without REUSEADDR).
  EXPECT_EQ(cma().listen(l, 8), EADDRINUSE);
  cma().destroy_id(x, 0);
  cma().destroy_id(y, 0);
  EXPECT_EQ(cma().listen(l, 8), 0);
  // Expect: a listener may not take REUSEADDR again.
  EXPECT_EQ(cma().set_reuseaddr(l, true), EINVAL);
  EXPECT_EQ(cma().set_reuseaddr(l, false), EINVAL);  // not IDLE either
}

TEST_F(CmaBind, Ipv4AndIpv6AnyAddressesAndAfOnly) {
  const std::uint32_t v4 = id(), v6 = id(), v6b = id();
  ASSERT_EQ(cma().bind(v4, any4_, kServicePort), 0);
  // Expect: IPv6 any (not AF-only by default) collides with IPv4 any.
  EXPECT_EQ(cma().bind(v6, any6_, kServicePort), EADDRNOTAVAIL);
  // Expect: AF-only on both sides, the families do not meet.
  ASSERT_EQ(cma().set_afonly(v6b, true), 0);
  EXPECT_EQ(cma().bind(v6b, any6_, kServicePort), 0);
}

TEST_F(CmaBind, EphemeralPortsComeFromTheRangeAndDiffer) {
  std::set<std::uint16_t> ports;
  for (int i = 0; i < 50; ++i) {
    const std::uint32_t x = id();
    ASSERT_EQ(cma().bind(x, a_, 0), 0);
    const std::uint16_t p = cma().query(x)->src_port;
    EXPECT_GE(p, 32768);
    EXPECT_LE(p, 60999);
    ports.insert(p);
  }
  EXPECT_EQ(ports.size(), 50u);
}

TEST_F(CmaBind, AnEphemeralPortIsSharedByConnectionsToDifferentPeers) {
  // Expect: with a two-port range, connections from one address share a
  // port when their destinations differ (cma_port_is_unique), and run
  // out of ports when every port already has one to the same peer.
  CmaDevice d = device();
  d.ephemeral_low = 40000;
  d.ephemeral_high = 40001;
  CmNet net(2);
  CmHost& h = net.add_host("10.77.0.1", d);
  auto connect_to = [&](const char* dst) {
    const std::uint32_t x = h.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
    const int ret = h.cma().resolve_addr(x, a_, *IpAddr::parse(dst), kServicePort);
    return ret ? -ret : static_cast<int>(h.cma().query(x)->src_port);
  };
  const int p1 = connect_to("10.77.0.2");
  const int p2 = connect_to("10.77.0.3");
  const int p3 = connect_to("10.77.0.4");
  EXPECT_TRUE(p1 == 40000 || p1 == 40001);
  EXPECT_TRUE(p2 == 40000 || p2 == 40001);
  EXPECT_NE(p1, p2);  // the port given out last is skipped
  EXPECT_TRUE(p3 == 40000 || p3 == 40001);
  // Expect: to the first peer again: not the port of the first connection.
  const int p4 = connect_to("10.77.0.2");
  EXPECT_TRUE(p4 == 40000 || p4 == 40001);
  EXPECT_NE(p4, p1);
  EXPECT_EQ(connect_to("10.77.0.2"), -EADDRNOTAVAIL);
}

// The host's port spaces as the daemon keeps them, seen by one program:
// the ports other programs hold, and this program's bindings.
class OtherPrograms : public HostPorts {
 public:
  int bind(std::uint32_t id, const Binding& b) override {
    asked.push_back(b);
    if (held.count(b.service_id)) return b.any ? EADDRNOTAVAIL : EADDRINUSE;
    mine[id] = b;
    return 0;
  }
  void unbind(std::uint32_t id) override { mine.erase(id); }
  std::set<std::uint64_t> held;
  std::map<std::uint32_t, Binding> mine;
  std::vector<Binding> asked;
};

TEST_F(CmaBind, OnASharedDeviceAPortIsTakenOnlyIfTheHostHasIt) {
  OtherPrograms host;
  cma().set_host_ports(&host);
  host.held.insert(service_id(PortSpace::kTcp, kServicePort));
  const std::uint32_t x = id(), y = id();
  // Expect: the host's refusal is rdma_bind_addr's, and the id stays IDLE.
  EXPECT_EQ(cma().bind(x, a_, kServicePort), EADDRINUSE);
  EXPECT_EQ(cma().query(x)->state, CmaState::kIdle);
  EXPECT_TRUE(host.mine.empty());
  // Expect: a port the host has is bound there too, on the id's terms.
  ASSERT_EQ(cma().bind(x, a_, kServicePort + 1), 0);
  ASSERT_EQ(host.mine.count(x), 1u);
  EXPECT_EQ(host.mine[x].service_id, service_id(PortSpace::kTcp, kServicePort + 1));
  EXPECT_EQ(host.mine[x].ip, a_);
  EXPECT_FALSE(host.mine[x].any);
  EXPECT_TRUE(host.mine[x].afonly);
  EXPECT_FALSE(host.mine[x].ephemeral);
  // Expect: the host is not asked for a port the Cma's own ids refuse.
  host.asked.clear();
  EXPECT_EQ(cma().bind(y, a_, kServicePort + 1), EADDRINUSE);
  EXPECT_TRUE(host.asked.empty());
  // Expect: the ephemeral ports other programs hold are passed over.
  for (unsigned p = 32768; p <= 60999; ++p)
    if (p != 40000) host.held.insert(service_id(PortSpace::kTcp, static_cast<std::uint16_t>(p)));
  ASSERT_EQ(cma().bind(y, any4_, 0), 0);
  EXPECT_EQ(cma().query(y)->src_port, 40000);
  EXPECT_TRUE(host.mine[y].ephemeral);
  EXPECT_TRUE(host.mine[y].any);
  // Expect: REUSEADDR taken by a bound id reaches the host, and a listen
  // asks the host again without it (a listener is alone on its port).
  ASSERT_EQ(cma().set_reuseaddr(x, true), 0);
  EXPECT_TRUE(host.mine[x].reuseaddr);
  ASSERT_EQ(cma().listen(x, 8), 0);
  EXPECT_FALSE(host.mine[x].reuseaddr);
  // Expect: new terms of a picked port are no new pick (the host may let
  // others share it now); AF-only changed and a source address resolved
  // reach the host as the kernel's bind list would hold them.
  ASSERT_EQ(cma().set_reuseaddr(y, true), 0);
  EXPECT_FALSE(host.mine[y].ephemeral);
  EXPECT_TRUE(host.mine[y].reuseaddr);
  ASSERT_EQ(cma().set_afonly(y, false), 0);
  EXPECT_FALSE(host.mine[y].afonly);
  ASSERT_EQ(cma().resolve_addr(y, std::nullopt, *IpAddr::parse("10.77.0.9"), 5000), 0);
  ResolvedAddr r;
  r.src_ip = a_;
  ASSERT_EQ(cma().addr_resolved(y, r), 0);
  EXPECT_EQ(host.mine[y].ip, a_);
  EXPECT_FALSE(host.mine[y].any);
  // Expect: an id destroyed gives its port back to the host.
  cma().destroy_id(x, 0);
  cma().destroy_id(y, 0);
  EXPECT_TRUE(host.mine.empty());
}

TEST_F(CmaBind, AnEmptyGidEntryIsNoAddressOfTheDevice) {
  // Expect: an address removed from a netdev device's interface leaves a
  // zero entry, which equals IPv6's wildcard: neither is the device's, and
  // a new table replaces the old.
  cma().set_gids({*IpAddr::parse("fe80::1"), IpAddr{}, *IpAddr::parse("fd77::1")});
  EXPECT_FALSE(cma().is_device_ip(any6_));
  EXPECT_TRUE(cma().is_device_ip(*IpAddr::parse("fd77::1")));
  EXPECT_FALSE(cma().is_device_ip(b_));
  cma().set_gids({*IpAddr::parse("fe80::1"), b_});
  EXPECT_TRUE(cma().is_device_ip(b_));
  EXPECT_FALSE(cma().is_device_ip(*IpAddr::parse("fd77::1")));
}

TEST_F(CmaBind, ListenWithoutBindTakesTheIpv4AnyAddressAndAnEphemeralPort) {
  const std::uint32_t l = id();
  ASSERT_EQ(cma().listen(l, 0), 0);
  const auto q = cma().query(l);
  EXPECT_EQ(q->state, CmaState::kListen);
  EXPECT_EQ(q->src_ip, any4_);
  EXPECT_GE(q->src_port, 32768);
}

TEST_F(CmaBind, AddressAndRouteResolutionTakeWhatTheCallerResolved) {
  const std::uint32_t x = id();
  const IpAddr peer = *IpAddr::parse("10.77.0.2");
  ASSERT_EQ(cma().set_tos(x, 0x68), 0);
  ASSERT_EQ(cma().resolve_addr(x, std::nullopt, peer, kServicePort), 0);
  EXPECT_EQ(cma().query(x)->state, CmaState::kAddrQuery);
  EXPECT_EQ(cma().resolve_route(x), EINVAL);  // not resolved yet
  ResolvedAddr r;
  r.src_ip = a_;
  r.dst_mac = wire::MacAddr{{2, 0, 0, 0, 0, 9}};
  r.hop_limit = 61;
  ASSERT_EQ(cma().addr_resolved(x, r), 0);
  CmaEvent e;
  ASSERT_TRUE(cma().get_event(0, e));
  EXPECT_EQ(e.event, CmaEventType::kAddrResolved);
  ASSERT_EQ(cma().resolve_route(x), 0);
  ASSERT_TRUE(cma().get_event(0, e));
  EXPECT_EQ(e.event, CmaEventType::kRouteResolved);
  // Expect: the route of cma_resolve_iboe_route: GIDs from the addresses,
  // P_Key 0xFFFF, MTU 1024 for a 1500-byte link, packet lifetime 18, the
  // ToS as traffic class, the flow label hashed from the ports.
  const auto q = cma().query(x);
  ASSERT_TRUE(q->route);
  const PathRecord& p = *q->route;
  EXPECT_EQ(p.sgid, a_);
  EXPECT_EQ(p.dgid, peer);
  EXPECT_EQ(p.pkey, 0xFFFF);
  EXPECT_EQ(p.mtu, wire::Mtu::k1024);
  EXPECT_EQ(p.packet_life_time, 18);
  EXPECT_EQ(p.traffic_class, 0x68);
  EXPECT_EQ(p.hop_limit, 61);
  EXPECT_EQ(p.flow_label, (std::uint32_t{q->src_port} * 31 + kServicePort) & 0xFFFFF);
  EXPECT_EQ(p.dmac, r.dst_mac);

  // Expect: a failed resolution: ADDR_ERROR with its status, back to bound.
  const std::uint32_t y = id();
  ASSERT_EQ(cma().resolve_addr(y, std::nullopt, peer, kServicePort), 0);
  ASSERT_EQ(cma().addr_error(y, -EHOSTUNREACH), 0);
  ASSERT_TRUE(cma().get_event(0, e));
  EXPECT_EQ(e.event, CmaEventType::kAddrError);
  EXPECT_EQ(e.status, -EHOSTUNREACH);
  EXPECT_EQ(cma().query(y)->state, CmaState::kAddrBound);
  // Expect: an IPv6 destination for an IPv4-bound id: EINVAL.
  const std::uint32_t z = id();
  ASSERT_EQ(cma().bind(z, a_, 0), 0);
  EXPECT_EQ(cma().resolve_addr(z, std::nullopt, *IpAddr::parse("fd77::2"), kServicePort), EINVAL);
}

TEST_F(CmaBind, A9000ByteLinkGivesPathMtu4096AndAnAckTimeoutSetsThePacketLifetime) {
  CmaDevice d = device();
  d.link_mtu = 9000;
  CmNet net(3);
  CmHost& h = net.add_host("10.77.0.1", d);
  const std::uint32_t x = h.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
  ASSERT_EQ(h.cma().set_ack_timeout(x, 14), 0);
  ASSERT_EQ(h.cma().resolve_addr(x, std::nullopt, *IpAddr::parse("10.77.0.2"), kServicePort), 0);
  ASSERT_EQ(h.cma().addr_resolved(x, {a_, std::nullopt, 64}), 0);
  ASSERT_EQ(h.cma().resolve_route(x), 0);
  EXPECT_EQ(h.cma().query(x)->route->mtu, wire::Mtu::k4096);
  EXPECT_EQ(h.cma().query(x)->route->packet_life_time, 13);
  const std::uint32_t u = h.cma().create_id(0, PortSpace::kUdp, QpType::kUd);
  EXPECT_EQ(h.cma().set_ack_timeout(u, 14), EINVAL);    // RC only
  EXPECT_EQ(h.cma().set_min_rnr_timer(x, 32), EINVAL);  // 5 bits
}

// --- QP attributes, both sides (research/rdma-cm.md 1.4) ------------------------

// Multicast joins (cma_multicast.cc): local on RoCE, the event at once.
class CmaMulticast : public CmaBind {};

TEST_F(CmaMulticast, AJoinGivesTheGroupsAddressVectorAtOnce) {
  const std::uint32_t ud = id(PortSpace::kUdp);
  const IpAddr group = *IpAddr::parse("239.1.2.3");
  EXPECT_EQ(cma().join_multicast(ud, group, McJoinState::kFullMember, 5), EINVAL) << "not bound";
  ASSERT_EQ(cma().bind(ud, a_, 0), 0);
  ASSERT_EQ(cma().join_multicast(ud, group, McJoinState::kFullMember, 5), 0);
  CmaEvent e;
  ASSERT_TRUE(cma().get_event(0, e));
  EXPECT_EQ(e.event, CmaEventType::kMulticastJoin);
  EXPECT_EQ(e.id, ud);
  EXPECT_EQ(e.mc, 5u);
  EXPECT_EQ(e.status, 0);
  // Expect: cma_make_mc_event's: the IPv4-mapped MGID, a GRH with hop
  // limit 64 and the id's source GID, QPN 0xFFFFFF, RDMA_UDP_QKEY.
  EXPECT_EQ(e.ud.ah_attr.grh.dgid, group);
  EXPECT_EQ(e.ud.ah_attr.is_global, 1);
  EXPECT_EQ(e.ud.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(e.ud.ah_attr.dlid, 0);
  EXPECT_EQ(e.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(e.ud.qkey, kUdpQkey);
  const wire::MacAddr mac{{0x01, 0x00, 0x5E, 0x01, 0x02, 0x03}};
  EXPECT_EQ(e.ud.ah_attr.dmac, mac);
  EXPECT_FALSE(cma().get_event(0, e));
  EXPECT_EQ(cma().leave_multicast(ud, 5), 0);
  EXPECT_EQ(cma().leave_multicast(ud, 5), EINVAL) << "left already";
}

TEST_F(CmaMulticast, OnlyUdIdsWithADeviceAndIpv4GroupsJoin) {
  const std::uint32_t rc = id(PortSpace::kTcp);
  ASSERT_EQ(cma().bind(rc, a_, 0), 0);
  EXPECT_EQ(cma().join_multicast(rc, *IpAddr::parse("239.1.2.3"), McJoinState::kFullMember, 1),
            EINVAL)
      << "a TCP id";
  const std::uint32_t any = id(PortSpace::kUdp);
  ASSERT_EQ(cma().bind(any, any4_, 0), 0);
  EXPECT_EQ(cma().join_multicast(any, *IpAddr::parse("239.1.2.3"), McJoinState::kFullMember, 1),
            EINVAL)
      << "bound to no device address";
  const std::uint32_t ud = id(PortSpace::kUdp);
  ASSERT_EQ(cma().bind(ud, a_, 0), 0);
  EXPECT_EQ(cma().join_multicast(ud, any4_, McJoinState::kFullMember, 1), EINVAL) << "zero";
  EXPECT_EQ(cma().join_multicast(ud, *IpAddr::parse("ff0e::1"), McJoinState::kFullMember, 1),
            EOPNOTSUPP)
      << "cma.c refuses IPv6 groups on RoCEv2";
  CmaEvent e;
  EXPECT_FALSE(cma().get_event(0, e));
}

TEST_F(CmaMulticast, LeavingDropsTheJoinsEventsNobodyTook) {
  const std::uint32_t ud = id(PortSpace::kUdp);
  ASSERT_EQ(cma().bind(ud, a_, 0), 0);
  ASSERT_EQ(cma().join_multicast(ud, *IpAddr::parse("239.1.2.3"), McJoinState::kFullMember, 1), 0);
  ASSERT_EQ(
      cma().join_multicast(ud, *IpAddr::parse("239.1.2.4"), McJoinState::kSendOnlyFullMember, 2),
      0);
  EXPECT_EQ(cma().pending_events(0), 2u);
  EXPECT_EQ(cma().leave_multicast(ud, 1), 0);
  CmaEvent e;
  ASSERT_TRUE(cma().get_event(0, e));
  EXPECT_EQ(e.mc, 2u) << "the other join's event stays";
  EXPECT_FALSE(cma().get_event(0, e));
}

struct Conn {
  explicit Conn(std::uint64_t seed)
      : net(seed),
        a(net.add_host("10.77.0.2")),
        b(net.add_host("10.77.0.1")),
        pa(net, a),
        pb(net, b) {}
  CmNet net;
  CmHost& a;
  CmHost& b;
  Peer pa;
  Peer pb;
};

TEST(CmaQpAttr, RcBeforeAConnectionHasOnlyTheInitAttributes) {
  Conn c(4);
  const std::uint32_t x = c.a.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
  QpAttr attr;
  unsigned mask = 0;
  using namespace qp_attr_mask;
  // Expect: no IB CM id yet: STATE|PKEY_INDEX|PORT|ACCESS_FLAGS, access 0,
  // P_Key index 0 (0xFFFF on RoCE), port 1, whatever the state asked.
  for (QpState s : {QpState::kInit, QpState::kRtr}) {
    ASSERT_EQ(c.a.cma().init_qp_attr(x, s, attr, mask), 0);
    EXPECT_EQ(mask, kState | kPkeyIndex | kPort | kAccessFlags);
    EXPECT_EQ(attr.qp_access_flags, 0u);
    EXPECT_EQ(attr.pkey_index, 0);
    EXPECT_EQ(attr.port_num, 1);
  }
}

TEST(CmaQpAttr, RcOnBothSidesAsTheKernelGivesThem) {
  Conn c(5);
  c.pa.attach_qps = c.pb.attach_qps = false;  // librdmacm moves the QPs itself
  c.pa.param.responder_resources = 3;
  c.pa.param.initiator_depth = 2;
  c.pa.param.retry_count = 6;
  c.pa.param.rnr_retry_count = 9;  // clamped to 7
  c.pb.param.responder_resources = 2;
  c.pb.param.initiator_depth = 3;
  c.pb.param.rnr_retry_count = 5;
  c.pb.listen(PortSpace::kTcp, kServicePort);
  // The active side stops at CONNECT_RESPONSE to look at its attributes.
  const std::uint32_t a = c.a.cma().create_id(0, PortSpace::kTcp, QpType::kRc, 0x22);
  ASSERT_EQ(c.a.cma().set_min_rnr_timer(a, 12), 0);
  ASSERT_EQ(c.a.cma().resolve_addr(a, std::nullopt, c.b.ip(), kServicePort), 0);
  ASSERT_EQ(c.a.cma().addr_resolved(a, {c.a.ip(), std::nullopt, 64}), 0);
  ASSERT_EQ(c.a.cma().resolve_route(a), 0);
  c.a.app = nullptr;  // no automatic reactions on this side
  CmaEvent e;
  while (c.a.cma().get_event(0, e)) {
  }
  ConnParam p = c.pa.param;
  p.qp_num = 0xA0A0;
  ASSERT_EQ(c.a.cma().connect(a, p, c.net.now()), 0);
  ASSERT_TRUE(c.net.run_until([&] { return c.a.cma().pending_events(0) > 0; }, 10 * kSec));
  ASSERT_TRUE(c.a.cma().get_event(0, e));
  ASSERT_EQ(e.event, CmaEventType::kConnectResponse);
  const std::uint32_t b = c.pb.first_request();
  ASSERT_NE(b, 0u);

  using namespace qp_attr_mask;
  QpAttr at;
  unsigned m = 0;
  // Passive, after its REP.
  ASSERT_EQ(c.b.cma().init_qp_attr(b, QpState::kInit, at, m), 0);
  EXPECT_EQ(m, kState | kAccessFlags | kPkeyIndex | kPort);
  EXPECT_EQ(at.qp_access_flags,
            qp_access::kRemoteWrite | qp_access::kRemoteRead | qp_access::kRemoteAtomic);
  QpAttr brtr;
  ASSERT_EQ(c.b.cma().init_qp_attr(b, QpState::kRtr, brtr, m), 0);
  EXPECT_EQ(m, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer);
  EXPECT_EQ(brtr.dest_qp_num, 0xA0A0u);
  EXPECT_EQ(brtr.max_dest_rd_atomic, 2);  // the REP's ResponderResources it sent
  EXPECT_EQ(brtr.min_rnr_timer, 0);       // 655 ms unless set
  EXPECT_EQ(brtr.ah_attr.grh.dgid, c.a.ip());
  EXPECT_EQ(brtr.ah_attr.grh.sgid_index, 0);
  EXPECT_EQ(brtr.ah_attr.port_num, 1);
  EXPECT_EQ(brtr.ah_attr.dmac, c.a.mac());
  QpAttr brts;
  ASSERT_EQ(c.b.cma().init_qp_attr(b, QpState::kRts, brts, m), 0);
  EXPECT_EQ(m, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic);
  EXPECT_EQ(brts.max_rd_atomic, 3);  // its REP's InitiatorDepth
  EXPECT_EQ(brts.retry_cnt, 6);      // the REQ's RetryCount
  EXPECT_EQ(brts.rnr_retry, 7);      // the REQ's RNRRetryCount, clamped
  EXPECT_EQ(brts.timeout, 19);       // the REQ's LocalACKTimeout

  // Active, after the REP.
  QpAttr artr;
  ASSERT_EQ(c.a.cma().init_qp_attr(a, QpState::kRtr, artr, m), 0);
  EXPECT_EQ(artr.dest_qp_num, 0x211u);    // the QPN the passive side accepted with
  EXPECT_EQ(artr.max_dest_rd_atomic, 3);  // the REP's InitiatorDepth
  EXPECT_EQ(artr.min_rnr_timer, 12);      // rdma_set_min_rnr_timer
  QpAttr arts;
  ASSERT_EQ(c.a.cma().init_qp_attr(a, QpState::kRts, arts, m), 0);
  EXPECT_EQ(arts.max_rd_atomic, 2);  // the REP's ResponderResources
  EXPECT_EQ(arts.retry_cnt, 6);
  EXPECT_EQ(arts.rnr_retry, 5);  // the REP's RNRRetryCount
  EXPECT_EQ(arts.timeout, cm_ack_timeout(15, 18));
  // Expect: each side receives at the PSN the other sends from: the RTR
  // rq_psn is the id's own random 24-bit number.
  EXPECT_EQ(artr.rq_psn, brts.sq_psn);
  EXPECT_EQ(brtr.rq_psn, arts.sq_psn);
  EXPECT_LE(artr.rq_psn, 0xFFFFFFu);
  EXPECT_NE(artr.rq_psn, brtr.rq_psn);
}

TEST(CmaQpAttr, UdGivesTheInitAttributesWithTheUdpQkeyInEveryState) {
  Conn c(6);
  const std::uint32_t u = c.a.cma().create_id(0, PortSpace::kUdp, QpType::kUd);
  using namespace qp_attr_mask;
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    QpAttr attr;
    unsigned mask = 0;
    ASSERT_EQ(c.a.cma().init_qp_attr(u, s, attr, mask), 0);
    EXPECT_EQ(mask, kState | kPkeyIndex | kPort | kQkey);
    EXPECT_EQ(attr.qkey, 0x01234567u);
    EXPECT_EQ(attr.qp_state, s);
  }
}

TEST(CmaQpAttr, PassiveSideNeverTakesAPathMtuItsLinkCannotCarry) {
  CmNet net(7);
  CmaDevice big;
  big.link_mtu = 9000;
  CmHost& a = net.add_host("10.77.0.2", big);
  CmHost& b = net.add_host("10.77.0.1");  // 1500
  Peer pa(net, a), pb(net, b);
  pb.listen(PortSpace::kTcp, kServicePort);
  const std::uint32_t x = pa.connect(PortSpace::kTcp, b.ip(), kServicePort);
  ASSERT_TRUE(net.run_until([&] { return pa.count(x, CmaEventType::kEstablished) > 0; }, kSec));
  // Expect: the REQ said 4096; the passive QP gets 1024.
  EXPECT_EQ(pa.qp(x)->steps()[2].attr.path_mtu, wire::Mtu::k4096);
  EXPECT_EQ(pb.qp(pb.first_request())->steps()[2].attr.path_mtu, wire::Mtu::k1024);
}

// --- listeners ----------------------------------------------------------------------

TEST(CmaListen, ABacklogFullDropsTheReqUntilARequestIsTaken) {
  Conn c(8);
  c.b.app = nullptr;  // the passive application takes its events itself
  const std::uint32_t l = c.b.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
  ASSERT_EQ(c.b.cma().bind(l, IpAddr::from_v4(0), kServicePort), 0);
  ASSERT_EQ(c.b.cma().listen(l, 1), 0);
  const std::uint32_t x = c.pa.connect(PortSpace::kTcp, c.b.ip(), kServicePort);
  const std::uint32_t y = c.pa.connect(PortSpace::kTcp, c.b.ip(), kServicePort);
  c.net.run_for(100 * kMs);
  // Expect: one request queued, the other REQ dropped without a REJ.
  EXPECT_EQ(c.b.cma().pending_events(0), 1u);
  EXPECT_EQ(c.b.cma().ib().counters().rx_dropped.get(CmDrop::kBacklogFull), 1u);
  EXPECT_EQ(c.b.cma().ib().counters().tx_msgs.get(CmAttr::kRej), 0u);
  CmaEvent e;
  ASSERT_TRUE(c.b.cma().get_event(0, e));
  ASSERT_EQ(e.event, CmaEventType::kConnectRequest);
  // Expect: taking it frees the slot: the resend of the other REQ, 6144 ms
  // on, is a request.
  c.net.run_for(6200 * kMs);
  EXPECT_EQ(c.b.cma().pending_events(0), 1u);
  (void)x;
  (void)y;
}

TEST(CmaListen, DestroyingAListenerRejectsTheRequestsNobodyTook) {
  Conn c(9);
  c.b.app = nullptr;
  const std::uint32_t l = c.b.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
  ASSERT_EQ(c.b.cma().listen(l, 4), 0);
  const std::uint16_t port = c.b.cma().query(l)->src_port;
  const std::uint32_t x = c.pa.connect(PortSpace::kTcp, c.b.ip(), port);
  c.net.run_for(100 * kMs);
  ASSERT_EQ(c.b.cma().pending_events(0), 1u);
  c.b.cma().destroy_id(l, c.net.now());
  EXPECT_EQ(c.b.cma().pending_events(0), 0u);
  ASSERT_TRUE(c.net.run_until([&] { return c.pa.count(x, CmaEventType::kRejected) > 0; }, kSec));
  EXPECT_EQ(c.pa.events(x).back().status, 28);
}

TEST(CmaListen, AListenerOnOneAddressTakesRequestsForItOnly) {
  CmNet net(10);
  CmaDevice d;
  d.gids.push_back(*IpAddr::parse("10.77.5.1"));
  CmHost& a = net.add_host("10.77.0.2");
  CmHost& b = net.add_host("10.77.0.1", d);
  Peer pa(net, a), pb(net, b);
  ASSERT_NE(pb.listen(PortSpace::kTcp, kServicePort, 4, *IpAddr::parse("10.77.5.1")), 0u);
  const std::uint32_t x = pa.connect(PortSpace::kTcp, b.ip(), kServicePort);
  ASSERT_TRUE(net.run_until(
      [&] { return !pa.events(x).empty() && pa.events(x).back().event == CmaEventType::kRejected; },
      kSec));
  // Expect: the IB CM has a listener for the port, the rdma_cm none for
  // that address: REJ CONSUMER_DEFINED, as cm_destroy_id sends it.
  EXPECT_EQ(pa.events(x).back().status, 28);
  EXPECT_EQ(pb.first_request(), 0u);
}

TEST(CmaListen, AnIpv6AnyListenerTakesIpv4RequestsUnlessAfOnly) {
  for (bool afonly : {false, true}) {
    CmNet net(11);
    CmHost& a = net.add_host("10.77.0.2");
    CmHost& b = net.add_host("10.77.0.1");
    Peer pa(net, a), pb(net, b);
    const std::uint32_t l = b.cma().create_id(0, PortSpace::kTcp, QpType::kRc);
    ASSERT_EQ(b.cma().set_afonly(l, afonly), 0);
    ASSERT_EQ(b.cma().bind(l, IpAddr{}, kServicePort), 0);
    ASSERT_EQ(b.cma().listen(l, 4), 0);
    const std::uint32_t x = pa.connect(PortSpace::kTcp, b.ip(), kServicePort);
    ASSERT_TRUE(net.run_until([&] { return pa.events(x).size() > 2; }, kSec));
    EXPECT_EQ(pa.events(x).back().event,
              afonly ? CmaEventType::kRejected : CmaEventType::kEstablished);
  }
}

TEST(CmaListen, TwoListenersOnOnePortShareTheIbCmListener) {
  CmNet net(12);
  CmaDevice d;
  d.gids.push_back(*IpAddr::parse("10.77.5.1"));
  CmHost& a = net.add_host("10.77.0.2");
  CmHost& b = net.add_host("10.77.0.1", d);
  Peer pa(net, a), pb(net, b);
  const std::uint32_t l1 = pb.listen(PortSpace::kTcp, kServicePort, 4, *IpAddr::parse("10.77.0.1"));
  const std::uint32_t l2 = pb.listen(PortSpace::kTcp, kServicePort, 4, *IpAddr::parse("10.77.5.1"));
  ASSERT_NE(l1, 0u);
  ASSERT_NE(l2, 0u);
  const std::uint32_t x = pa.connect(PortSpace::kTcp, *IpAddr::parse("10.77.5.1"), kServicePort);
  ASSERT_TRUE(net.run_until([&] { return pa.count(x, CmaEventType::kEstablished) > 0; }, kSec));
  EXPECT_EQ(pb.events(pb.first_request())[0].listen_id, l2);
  // Expect: with one gone the other still listens.
  b.cma().destroy_id(l2, net.now());
  const std::uint32_t y = pa.connect(PortSpace::kTcp, b.ip(), kServicePort);
  ASSERT_TRUE(net.run_until([&] { return pa.count(y, CmaEventType::kEstablished) > 0; }, kSec));
}

// --- channels ----------------------------------------------------------------------------

TEST(CmaChannels, EventsGoToTheIdsChannelAndFollowAMigration) {
  CmNet net(13);
  CmHost& h = net.add_host("10.77.0.1");
  Cma& cma = h.cma();
  const std::uint32_t x = cma.create_id(3, PortSpace::kTcp, QpType::kRc, 0xC0FFEE);
  ASSERT_EQ(cma.resolve_addr(x, std::nullopt, *IpAddr::parse("10.77.0.2"), kServicePort), 0);
  ASSERT_EQ(cma.addr_resolved(x, {h.ip(), std::nullopt, 64}), 0);
  EXPECT_EQ(cma.pending_events(0), 0u);
  EXPECT_EQ(cma.pending_events(3), 1u);
  ASSERT_EQ(cma.migrate_id(x, 5), 0);
  EXPECT_EQ(cma.pending_events(3), 0u);
  CmaEvent e;
  ASSERT_TRUE(cma.get_event(5, e));
  EXPECT_EQ(e.event, CmaEventType::kAddrResolved);
  EXPECT_EQ(e.context, 0xC0FFEEu);
  ASSERT_EQ(cma.resolve_route(x), 0);
  EXPECT_EQ(cma.pending_events(5), 1u);
  // Expect: destroying an id drops its queued events.
  cma.destroy_id(x, 0);
  EXPECT_EQ(cma.pending_events(5), 0u);
}

TEST(CmaNames, EventNamesAreRdmaEventStrs) {
  EXPECT_EQ(static_cast<int>(CmaEventType::kConnectRequest), 4);
  EXPECT_EQ(static_cast<int>(CmaEventType::kRejected), 8);
  EXPECT_EQ(static_cast<int>(CmaEventType::kTimewaitExit), 15);
  for (int i = 0; i <= 15; ++i)
    EXPECT_TRUE(name(static_cast<CmaEventType>(i)).starts_with("RDMA_CM_EVENT_"));
}

}  // namespace
}  // namespace uroce::test
