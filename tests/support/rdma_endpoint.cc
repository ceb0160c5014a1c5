/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/rdma_endpoint.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

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
  dc.priority_tag = o.priority_tag;
  dc.ecn = o.ecn;
  dc.selective_repeat = o.selective_repeat;
  dc.vlan_id = o.vlan_id;
  Config c;
  c.eal_memory_mb = o.hugepages ? 256 : 512;
  c.fault = o.fault;
  c.pfc = o.pfc;
  std::string err;
  dev_ = Device::open(dc, c, &err);
  if (!dev_) fail(err);
  pd_ = dev_->alloc_pd();
  scq_ = dev_->create_cq(1024);
  rcq_ = dev_->create_cq(1024);
  ud_scq_ = dev_->create_cq(256);
  ud_rcq_ = dev_->create_cq(256);
  if (o.srq) srq_ = pd_->create_srq(256, 4);
  QpInit init;
  init.send_cq = scq_.get();
  init.recv_cq = rcq_.get();
  init.srq = srq_.get();
  init.max_send_wr = 256;
  init.max_recv_wr = 256;
  qp_ = pd_->create_qp(init);
  init.type = QpType::kUd;
  init.send_cq = ud_scq_.get();
  init.recv_cq = ud_rcq_.get();
  init.srq = nullptr;
  ud_ = pd_->create_qp(init);
  if (!qp_ || !ud_) fail("cannot create the QPs");
}

Endpoint::~Endpoint() {
  // Children before parents, QPs before their queues.
  qp_.reset();
  ud_.reset();
  peer_ah_.reset();
  mrs_.clear();
  srq_.reset();
  scq_.reset();
  rcq_.reset();
  ud_scq_.reset();
  ud_rcq_.reset();
  pd_.reset();
  dev_.reset();
}

std::uint32_t Endpoint::reg(const void* p, std::size_t n) {
  int err = 0;
  auto mr = pd_->reg_mr(const_cast<void*>(p), n, access::kAll, &err);
  if (!mr) fail("memory registration failed: " + std::string(std::strerror(err)));
  mrs_.push_back(std::move(mr));
  return mrs_.back()->lkey();
}

Info Endpoint::connect(const Info& extra) {
  Info mine = extra;
  mine["qpn"] = qp_->qpn();
  mine["psn"] = qp_->psn();
  mine["udqpn"] = ud_->qpn();
  const std::string me = o_.dir + "/" + o_.role;
  const std::string them = o_.dir + "/" + (o_.role == "a" ? "b" : "a");
  publish(me + ".info", mine);
  Info peer = await(them + ".info", 30s);

  // The peer's GID is its IPv4 address, IPv4-mapped; ours is GID 1.
  const auto gid = Gid::from_ip(o_.peer);
  if (!gid) fail("bad peer address " + o_.peer);
  Remote remote{*gid, static_cast<std::uint32_t>(peer["qpn"]),
                static_cast<std::uint32_t>(peer["psn"])};
  ConnectOptions co;
  co.timeout = o_.timeout;
  if (int rc = qp_->connect(remote, co); rc != 0)
    fail("RC connect: " + std::string(std::strerror(rc)));
  if (int rc = ud_->connect({}); rc != 0) fail("UD connect: " + std::string(std::strerror(rc)));
  int err = 0;
  peer_ah_ = pd_->create_ah(*gid, 1, &err);
  if (!peer_ah_) fail("UD address: " + std::string(std::strerror(err)));
  peer_ud_qpn_ = static_cast<std::uint32_t>(peer["udqpn"]);
  return peer;
}

void Endpoint::sync(const std::string& name, std::chrono::seconds limit) {
  publish(o_.dir + "/" + o_.role + "." + name, {{"ok", 1}});
  await(o_.dir + "/" + (o_.role == "a" ? "b" : "a") + "." + name, limit);
  // What the peer wrote into our memory before it got here is ordered
  // before what we read next.
  dev_->poll();
}

void Endpoint::post(const SendWr& wr) {
  while (qp_->post_send(wr) == ENOMEM) {
    Completion none[1];
    scq_->poll({none, 0});  // drives the datapath while the queue drains
  }
}

Completion Endpoint::wait(CompletionQueue& cq, std::chrono::seconds limit) {
  auto c = cq.wait(limit);
  if (!c) fail("no completion in time");
  return *c;
}

void Endpoint::print_stats() {
  for (const auto& [name, value] : qp_->counters())
    std::printf("stat %s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
  for (const auto& [name, value] : dev_->counters())
    std::printf("stat %s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
  std::fflush(stdout);
}

}  // namespace uroce::test
