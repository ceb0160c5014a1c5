/* SPDX-License-Identifier: BSD-3-Clause */
// QP 1 and the connection manager of a device (verbs/gsi.h): two devices
// joined by ports in memory, whole (engines, poll threads, ARP, QP 1),
// their CMs driven as the rdma_cm channel drives them: from the test's
// thread through run() and wait(), while the engines hand them MADs and
// the poll threads run their timers. Under the sanitizer builds this is
// where the locking between the engine and the CM is checked.

#include "verbs/gsi.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "support/pipe_port.h"
#include "verbs/device.h"

namespace uroce::verbs {
namespace {

using namespace std::chrono_literals;
using cm::CmaEvent;
using cm::CmaEventType;

constexpr std::uint32_t kChannel = 7;

class GsiPair : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pa = std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x7a, 1}});
    auto pb = std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x7a, 2}});
    test::PipePort::join(*pa, *pb);
    a_ = open("uroce-ga", "10.79.1.1", std::move(pa));
    b_ = open("uroce-gb", "10.79.1.2", std::move(pb));
    ASSERT_TRUE(a_ && b_);
  }

  static std::unique_ptr<Device> open(const std::string& name, const std::string& ip,
                                      std::unique_ptr<test::PipePort> port) {
    DeviceConfig dc;
    dc.name = name;
    dc.port = "pipe:" + name;
    dc.ip = {IpPrefix{ip, 24}};
    std::string err;
    auto d = Device::open(dc, Config{}, std::move(port), &err);
    EXPECT_TRUE(d) << err;
    return d;
  }

  // The next event of the channel, waiting for it as GET_EVENT does.
  static CmaEvent next_event(Gsi& g) {
    CmaEvent e;
    const bool got =
        g.wait_for([&](cm::Cma& cma, cm::Nanos) { return cma.get_event(kChannel, e); }, 10s);
    EXPECT_TRUE(got) << "no event within 10 s";
    return e;
  }

  static std::map<std::string, std::uint64_t> counters(Device& d) {
    std::map<std::string, std::uint64_t> out;
    d.for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
      if (scope == "cm") out[std::string(name)] = v;
    });
    return out;
  }

  // An id of `g`'s CM bound to `ip`:`port` and listening.
  static std::uint32_t listen(Gsi& g, const char* ip, std::uint16_t port) {
    return g.run([&](cm::Cma& cma, cm::Nanos) {
      const std::uint32_t id = cma.create_id(kChannel, cm::PortSpace::kTcp, cm::QpType::kRc);
      EXPECT_EQ(cma.bind(id, *wire::IpAddr::parse(ip), port), 0);
      EXPECT_EQ(cma.listen(id, 8), 0);
      return id;
    });
  }

  // An active id of `g`'s CM with its address and route resolved to
  // `ip`:`port`.
  static std::uint32_t resolved(Gsi& g, const char* ip, std::uint16_t port) {
    const wire::IpAddr dst = *wire::IpAddr::parse(ip);
    const std::uint32_t id = g.run([&](cm::Cma& cma, cm::Nanos) {
      const std::uint32_t n = cma.create_id(kChannel, cm::PortSpace::kTcp, cm::QpType::kRc);
      EXPECT_EQ(cma.resolve_addr(n, std::nullopt, dst, port), 0);
      return n;
    });
    // Expect: ARP off this thread, then ADDR_RESOLVED from the device's
    // address on the destination's subnet.
    g.resolve_addr(id, std::nullopt, dst, 2000ms);
    EXPECT_EQ(next_event(g).event, CmaEventType::kAddrResolved);
    const auto info = g.run([&](cm::Cma& cma, cm::Nanos) { return cma.query(id); });
    EXPECT_EQ(info->src_ip, *wire::IpAddr::parse("10.79.1.1"));
    EXPECT_EQ(g.run([&](cm::Cma& cma, cm::Nanos) { return cma.resolve_route(id); }), 0);
    EXPECT_EQ(next_event(g).event, CmaEventType::kRouteResolved);
    return id;
  }

  std::unique_ptr<Device> a_, b_;
};

TEST_F(GsiPair, AConnectionIsMadeAndTornDownThroughQp1) {
  Gsi& ga = a_->gsi();
  Gsi& gb = b_->gsi();
  listen(gb, "10.79.1.2", 5000);
  const std::uint32_t active = resolved(ga, "10.79.1.2", 5000);
  // Expect: the REQ reaches b's CM as a CONNECT_REQUEST on a new id.
  cm::ConnParam param;
  param.qp_num = 0x1234;
  param.responder_resources = param.initiator_depth = 1;
  ASSERT_EQ(ga.run([&](cm::Cma& cma, cm::Nanos now) { return cma.connect(active, param, now); }),
            0);
  const CmaEvent req = next_event(gb);
  ASSERT_EQ(req.event, CmaEventType::kConnectRequest);
  EXPECT_EQ(req.conn.qp_num, 0x1234u);
  cm::ConnParam reply;
  reply.qp_num = 0x5678;
  reply.responder_resources = reply.initiator_depth = 1;
  ASSERT_EQ(gb.run([&](cm::Cma& cma, cm::Nanos now) { return cma.accept(req.id, reply, now); }), 0);
  // Expect: the REP is a CONNECT_RESPONSE; accepting it sends the RTU,
  // which is b's ESTABLISHED.
  const CmaEvent rep = next_event(ga);
  ASSERT_EQ(rep.event, CmaEventType::kConnectResponse);
  EXPECT_EQ(rep.conn.qp_num, 0x5678u);
  ASSERT_EQ(
      ga.run([&](cm::Cma& cma, cm::Nanos now) { return cma.accept(active, std::nullopt, now); }),
      0);
  EXPECT_EQ(next_event(gb).event, CmaEventType::kEstablished);
  // Expect: DREQ and DREP, DISCONNECTED on both sides.
  ASSERT_EQ(ga.run([&](cm::Cma& cma, cm::Nanos now) { return cma.disconnect(active, now); }), 0);
  EXPECT_EQ(next_event(gb).event, CmaEventType::kDisconnected);
  ASSERT_EQ(gb.run([&](cm::Cma& cma, cm::Nanos now) { return cma.disconnect(req.id, now); }), 0);
  EXPECT_EQ(next_event(ga).event, CmaEventType::kDisconnected);

  const auto ca = counters(*a_);
  const auto cb = counters(*b_);
  EXPECT_EQ(ca.at("cm_tx_msgs/req"), 1u);
  EXPECT_EQ(ca.at("cm_rx_msgs/rep"), 1u);
  EXPECT_EQ(ca.at("cm_tx_msgs/rtu"), 1u);
  EXPECT_EQ(ca.at("cm_tx_msgs/dreq"), 1u);
  EXPECT_EQ(cb.at("cm_rx_msgs/req"), 1u);
  EXPECT_EQ(cb.at("cm_tx_msgs/drep"), 1u);
  EXPECT_EQ(cb.at("listeners"), 1u);
  EXPECT_EQ(ca.at("gsi_tx_mads"), cb.at("gsi_rx_mads"));
  EXPECT_EQ(cb.at("gsi_tx_mads"), ca.at("gsi_rx_mads"));
  EXPECT_EQ(ca.at("gsi_tx_unresolved") + ca.at("gsi_tx_no_route"), 0u);
}

TEST_F(GsiPair, AReqToAPortNobodyListensOnIsRejected) {
  Gsi& ga = a_->gsi();
  b_->gsi();
  const std::uint32_t active = resolved(ga, "10.79.1.2", 5001);
  cm::ConnParam param;
  param.qp_num = 0x1234;
  ASSERT_EQ(ga.run([&](cm::Cma& cma, cm::Nanos now) { return cma.connect(active, param, now); }),
            0);
  // Expect: REJ INVALID_SERVICE_ID at once.
  const auto start = std::chrono::steady_clock::now();
  const CmaEvent e = next_event(ga);
  EXPECT_EQ(e.event, CmaEventType::kRejected);
  EXPECT_EQ(e.status, static_cast<int>(cm::RejReason::kInvalidServiceId));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(counters(*b_).at("cm_tx_msgs/rej"), 1u);
}

TEST_F(GsiPair, AnAddressNobodyAnswersIsAnAddressError) {
  Gsi& ga = a_->gsi();
  const wire::IpAddr nobody = *wire::IpAddr::parse("10.79.1.9");
  const std::uint32_t id = ga.run([&](cm::Cma& cma, cm::Nanos) {
    const std::uint32_t n = cma.create_id(kChannel, cm::PortSpace::kTcp, cm::QpType::kRc);
    EXPECT_EQ(cma.resolve_addr(n, std::nullopt, nobody, 5000), 0);
    return n;
  });
  ga.resolve_addr(id, std::nullopt, nobody, 300ms);
  const CmaEvent e = next_event(ga);
  EXPECT_EQ(e.event, CmaEventType::kAddrError);
  EXPECT_EQ(e.status, -ETIMEDOUT);
}

TEST_F(GsiPair, TheCmsTimersRunWithoutTheProgram) {
  Gsi& ga = a_->gsi();
  listen(b_->gsi(), "10.79.1.2", 5002);
  const std::uint32_t active = resolved(ga, "10.79.1.2", 5002);
  cm::ConnParam param;
  param.qp_num = 0x1234;
  ASSERT_EQ(ga.run([&](cm::Cma& cma, cm::Nanos now) { return cma.connect(active, param, now); }),
            0);
  // Nobody on b takes the CONNECT_REQUEST: b's CM sits in REQ_RCVD; a's
  // resends its REQ after 2 x 2^(18-8) + 2^(20-8) ms, from the poll
  // thread's housekeeping, while this thread only looks.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (counters(*a_).at("cm_tx_retries/req") == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(counters(*a_).at("cm_tx_retries/req"), 1u);
  EXPECT_EQ(counters(*b_).at("cm_rx_duplicates/req"), 1u);
}

}  // namespace
}  // namespace uroce::verbs
