/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/rdma_endpoint.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "dpdk/eal.h"
#include "transport/random.h"

namespace uroce::test {

using namespace std::chrono_literals;

namespace {

// key=value lines, written atomically (rename) so the reader never sees
// half a file.
void publish(const std::string& path, const Info& kv) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    for (const auto& [k, v] : kv) f << k << "=" << v << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

Info await(const std::string& path, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream f(path);
    if (f) {
      Info kv;
      for (std::string line; std::getline(f, line);) {
        const auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = std::stoull(line.substr(eq + 1));
      }
      return kv;
    }
    std::this_thread::sleep_for(10ms);
  }
  fail("timed out waiting for " + path);
}

}  // namespace

void fail(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::exit(1);
}

Endpoint::Endpoint(const EndpointOptions& o) : o_(o) {
  dpdk::EalOptions eal;
  eal.devices = {o.device};
  eal.hugepages = o.hugepages;
  eal.memory_mb = o.hugepages ? 256 : 512;
  if (auto err = dpdk::eal_init(eal); !err.empty()) fail(err);
  std::string err;
  port_ = dpdk::DpdkPort::open(o.device, {}, &err);
  if (!port_) fail(err);
  const auto ip = wire::IpAddr::parse(o.ip);
  if (!ip || !wire::IpAddr::parse(o.peer)) fail("bad address");
  engine_ = std::make_unique<engine::Engine>(*port_, engine::EngineConfig{{*ip}, o.fault});
  poller_ = std::make_unique<engine::PollThread>(*engine_);
  transport::QpInit init;
  init.qpn = transport::secure_random_qpn();
  init.max_send_wr = 256;
  init.max_recv_wr = 256;
  init.send_cq = &scq_;
  init.recv_cq = &rcq_;
  init.memory = &mem_;
  qp_ = std::make_unique<transport::Qp>(init);
  psn_ = transport::secure_random_psn();
}

Endpoint::~Endpoint() {
  poller_.reset();
  engine_->detach(qp_->qpn());
}

Info Endpoint::connect(const Info& extra) {
  Info mine = extra;
  mine["qpn"] = qp_->qpn();
  mine["psn"] = psn_;
  const std::string me = o_.dir + "/" + o_.role;
  const std::string them = o_.dir + "/" + (o_.role == "a" ? "b" : "a");
  publish(me + ".info", mine);
  Info peer = await(them + ".info", 30s);

  const auto route =
      engine_->route_to(*wire::IpAddr::parse(o_.ip), *wire::IpAddr::parse(o_.peer), 5000ms);
  if (!route) fail("cannot resolve the peer with ARP");
  engine_->attach(*qp_);
  // modify_qp belongs to the engine thread: run it holding the engine.
  engine_->locked([&] {
    using namespace transport::attr_mask;
    transport::Qp& qp = *qp_;
    transport::QpAttr at;
    at.qp_state = transport::QpState::kInit;
    at.qp_access_flags = kAllAccess;
    if (qp.modify(at, kState | kPkeyIndex | kPort | kAccessFlags, 0)) fail("INIT");
    at.qp_state = transport::QpState::kRtr;
    at.route = *route;
    at.route.udp_sport = wire::roce_udp_sport(qp.qpn(), static_cast<std::uint32_t>(peer["qpn"]));
    at.path_mtu = *wire::mtu_for_link(port_->mtu());
    at.dest_qp_num = static_cast<std::uint32_t>(peer["qpn"]);
    at.rq_psn = static_cast<std::uint32_t>(peer["psn"]);
    at.max_dest_rd_atomic = 16;
    at.min_rnr_timer = 12;
    if (qp.modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  0))
      fail("RTR");
    at.qp_state = transport::QpState::kRts;
    at.sq_psn = psn_;
    at.timeout = 14;  // 67 ms
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 16;
    if (qp.modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic, 0))
      fail("RTS");
  });
  return peer;
}

void Endpoint::sync(const std::string& name, std::chrono::seconds limit) {
  publish(o_.dir + "/" + o_.role + "." + name, {{"ok", 1}});
  await(o_.dir + "/" + (o_.role == "a" ? "b" : "a") + "." + name, limit);
  // What the peer wrote into our memory before it got here is ordered
  // before what we read next: taking the engine orders us behind the
  // poll thread that wrote it.
  engine_->poll(engine::now_ns());
}

void Endpoint::post(const transport::SendWr& wr) {
  while (qp_->post_send(wr) == ENOMEM) poller_->drive();
}

transport::Wc Endpoint::wait(transport::Cq& cq, std::chrono::seconds limit) {
  transport::Wc wc;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (cq.poll(&wc, 1) == 0) {
    if (std::chrono::steady_clock::now() > end) fail("no completion in time");
    // The waiter drives the engine itself; the poll thread steps back.
    poller_->drive();
  }
  return wc;
}

void Endpoint::print_stats() {
  const auto& c = qp_->counters();
  for (std::size_t i = 0; i < transport::kCounterNames.size(); ++i) {
    std::printf("stat %s %llu\n", std::string(transport::kCounterNames[i]).c_str(),
                static_cast<unsigned long long>(c.get(static_cast<transport::Counter>(i))));
  }
  for (std::size_t i = 0; i < engine::kEngineCounterNames.size(); ++i) {
    std::printf("stat %s %llu\n", std::string(engine::kEngineCounterNames[i]).c_str(),
                static_cast<unsigned long long>(
                    engine_->counters().get(static_cast<engine::EngineCounter>(i))));
  }
  std::fflush(stdout);
}

}  // namespace uroce::test
