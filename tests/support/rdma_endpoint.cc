/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/rdma_endpoint.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

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
  DeviceConfig dc;
  dc.name = "uroce0";
  dc.port = o.device;
  dc.ip = {IpPrefix{o.ip, 24}};
  dc.hugepages = o.hugepages;
  dc.mtu = o.mtu;
  Config c;
  c.eal_memory_mb = o.hugepages ? 256 : 512;
  c.fault = {o.fault.rx.drop,    o.fault.rx.duplicate, o.fault.rx.reorder,
             o.fault.rx.corrupt, o.fault.tx.drop,      o.fault.tx.duplicate,
             o.fault.tx.reorder, o.fault.tx.corrupt,   o.fault.seed};
  std::string err;
  dev_ = verbs::Device::open(dc, c, &err);
  if (!dev_) fail(err);
  memory_ = std::make_unique<verbs::PdMemory>(dev_->mrs(), kPd);
  transport::QpInit init;
  init.qpn = dev_->alloc_qpn();
  init.max_send_wr = 256;
  init.max_recv_wr = 256;
  init.send_cq = &scq_;
  init.recv_cq = &rcq_;
  init.memory = memory_.get();
  if (o.srq) init.srq = &srq_;
  qp_ = std::make_unique<transport::Qp>(init);
  psn_ = transport::secure_random_psn();

  transport::QpInit ud = init;
  ud.type = transport::QpType::kUd;
  ud.qpn = dev_->alloc_qpn();
  ud.srq = nullptr;
  ud.send_cq = &ud_scq_;
  ud.recv_cq = &ud_rcq_;
  ud_ = std::make_unique<transport::Qp>(ud);
}

Endpoint::~Endpoint() {
  dev_->engine().detach(qp_->qpn());
  dev_->engine().detach(ud_->qpn());
  dev_.reset();
}

std::uint32_t Endpoint::reg(const void* p, std::size_t n) {
  verbs::MrInfo mr;
  if (dev_->mrs().reg(kPd, const_cast<void*>(p), n, reinterpret_cast<std::uint64_t>(p), kAllAccess,
                      &mr) != 0)
    fail("memory registration failed");
  return mr.lkey;
}

Info Endpoint::connect(const Info& extra) {
  Info mine = extra;
  mine["qpn"] = qp_->qpn();
  mine["psn"] = psn_;
  mine["udqpn"] = ud_->qpn();
  const std::string me = o_.dir + "/" + o_.role;
  const std::string them = o_.dir + "/" + (o_.role == "a" ? "b" : "a");
  publish(me + ".info", mine);
  Info peer = await(them + ".info", 30s);

  dev_->engine().attach(*qp_);
  using namespace transport::attr_mask;
  transport::QpAttr at;
  at.qp_state = transport::QpState::kInit;
  at.qp_access_flags = kAllAccess;
  if (dev_->modify_qp(*qp_, at, nullptr, kState | kPkeyIndex | kPort | kAccessFlags)) fail("INIT");
  // The peer's GID is its IPv4 address, IPv4-mapped; ours is GID 1.
  verbs::AddressVector av;
  av.sgid_index = 1;
  av.dgid = wire::IpAddr::parse(o_.peer)->bytes;
  at.qp_state = transport::QpState::kRtr;
  at.path_mtu = dev_->port_attr().active_mtu;
  at.dest_qp_num = static_cast<std::uint32_t>(peer["qpn"]);
  at.rq_psn = static_cast<std::uint32_t>(peer["psn"]);
  at.max_dest_rd_atomic = 16;
  at.min_rnr_timer = 12;
  if (int rc = dev_->modify_qp(
          *qp_, at, &av,
          kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer);
      rc != 0)
    fail("RTR: " + std::string(std::strerror(rc)));
  at.qp_state = transport::QpState::kRts;
  at.sq_psn = psn_;
  at.timeout = 14;  // 67 ms
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.max_rd_atomic = 16;
  if (dev_->modify_qp(*qp_, at, nullptr,
                      kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic))
    fail("RTS");

  // The UD QP: RESET -> INIT (Q_Key) -> RTR -> RTS, and an address
  // handle's route to the peer's UD QP.
  dev_->engine().attach(*ud_);
  transport::QpAttr u;
  u.qkey = kUdQkey;
  u.qp_state = transport::QpState::kInit;
  if (dev_->modify_qp(*ud_, u, nullptr, kState | kPkeyIndex | kPort | kQkey)) fail("UD INIT");
  u.qp_state = transport::QpState::kRtr;
  if (dev_->modify_qp(*ud_, u, nullptr, kState)) fail("UD RTR");
  u.qp_state = transport::QpState::kRts;
  u.sq_psn = transport::secure_random_psn();
  if (dev_->modify_qp(*ud_, u, nullptr, kState | kSqPsn)) fail("UD RTS");
  peer_ud_qpn_ = static_cast<std::uint32_t>(peer["udqpn"]);
  if (int rc = dev_->resolve(av, ud_->qpn(), peer_ud_qpn_, &peer_ud_route_); rc != 0)
    fail("UD address: " + std::string(std::strerror(rc)));
  return peer;
}

void Endpoint::sync(const std::string& name, std::chrono::seconds limit) {
  publish(o_.dir + "/" + o_.role + "." + name, {{"ok", 1}});
  await(o_.dir + "/" + (o_.role == "a" ? "b" : "a") + "." + name, limit);
  // What the peer wrote into our memory before it got here is ordered
  // before what we read next: taking the engine orders us behind the
  // poll thread that wrote it.
  dev_->engine().poll(engine::now_ns());
}

void Endpoint::post(const transport::SendWr& wr) {
  while (qp_->post_send(wr) == ENOMEM) dev_->progress().drive();
}

transport::Wc Endpoint::wait(transport::Cq& cq, std::chrono::seconds limit) {
  transport::Wc wc;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (cq.poll(&wc, 1) == 0) {
    if (std::chrono::steady_clock::now() > end) fail("no completion in time");
    // The waiter drives the engine itself; the poll thread steps back.
    dev_->progress().drive();
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
                    dev_->engine().counters().get(static_cast<engine::EngineCounter>(i))));
  }
  std::fflush(stdout);
}

}  // namespace uroce::test
