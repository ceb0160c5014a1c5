/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs_host.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <tuple>

#include "verbs/access.h"

namespace uroce::test {

using namespace std::chrono_literals;
using transport::QpState;
using transport::QpType;
using transport::Wc;
using transport::WcStatus;
using transport::WrOpcode;
namespace am = transport::attr_mask;
namespace access = verbs::access;

Host::Host(const DeviceConfig& dc, const Config& c) {
  std::string err;
  dev = verbs::Device::open(dc, c, &err);
  if (!dev) {
    ADD_FAILURE() << dc.name << ": " << err;
    return;
  }
  ctx = std::make_unique<verbs::Context>(*dev, nullptr);
  pd = verbs::Pd::create(*ctx);
  EXPECT_EQ(verbs::Cq::create(*ctx, 1024, nullptr, 0, &cq), 0);
  EXPECT_EQ(verbs::Mr::reg(*pd, buf.data(), buf.size(), addr(0),
                           access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead, &mr),
            0);
}

Host::~Host() {
  qps.clear();
  ahs.clear();
  mr.reset();
  cq.reset();
  pd.reset();
  ctx.reset();
}

verbs::QueuePair* Host::make_qp(QpType type, int* err) {
  verbs::QpCaps caps;
  caps.type = type;
  caps.max_send_wr = caps.max_recv_wr = 64;
  caps.max_send_sge = caps.max_recv_sge = 1;
  std::unique_ptr<verbs::QueuePair> qp;
  const int rc = verbs::QueuePair::create(*pd, caps, *cq, *cq, nullptr, &qp);
  if (err) *err = rc;
  if (rc != 0) return nullptr;
  if (type == QpType::kUd) {
    verbs::QpModify m;
    m.attr.qp_state = QpState::kInit;
    m.attr.qkey = kQkey;
    EXPECT_EQ(qp->modify(m, am::kState | am::kPkeyIndex | am::kPort | am::kQkey), 0);
    m.attr.qp_state = QpState::kRtr;
    EXPECT_EQ(qp->modify(m, am::kState), 0);
    m.attr.qp_state = QpState::kRts;
    EXPECT_EQ(qp->modify(m, am::kState | am::kSqPsn), 0);
  }
  qps.push_back(std::move(qp));
  return qps.back().get();
}

const verbs::Ah& Host::ah_to(const std::array<std::uint8_t, 16>& dgid) {
  verbs::AddressVector av;
  av.sgid_index = 1;
  av.dgid = dgid;
  std::unique_ptr<verbs::Ah> ah;
  EXPECT_EQ(verbs::Ah::create(*pd, av, &ah), 0);
  ahs.push_back(std::move(ah));
  return *ahs.back();
}

void Host::post_recv(verbs::QueuePair& qp, std::uint64_t wr_id, std::size_t off,
                     std::uint32_t len) {
  transport::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list[0] = {addr(off), len, mr->lkey()};
  wr.num_sge = 1;
  ASSERT_EQ(qp.post_recv(wr), 0);
}

transport::SendWr Host::wr(WrOpcode op, std::uint64_t wr_id, std::size_t off,
                           std::uint32_t len) const {
  transport::SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.send_flags = transport::send_flags::kSignaled;
  w.sg_list[0] = {addr(off), len, mr->lkey()};
  w.num_sge = 1;
  return w;
}

void Host::post(verbs::QueuePair& qp, const transport::SendWr& w) {
  ASSERT_EQ(qp.post_send(w), 0);
  qp.doorbell();
}

void Host::send_ud(verbs::QueuePair& qp, const verbs::Ah& ah, std::uint32_t remote_qpn,
                   std::uint64_t wr_id, std::size_t off, std::uint32_t len) {
  transport::SendWr w = wr(WrOpcode::kSend, wr_id, off, len);
  ASSERT_EQ(qp.set_ud_destination(ah, remote_qpn, kQkey, &w), 0);
  post(qp, w);
}

std::vector<Wc> Host::poll(std::size_t n, std::chrono::milliseconds limit) {
  std::vector<Wc> out;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    Wc wc[16];
    const std::uint32_t got = cq->poll(wc, 16);
    out.insert(out.end(), wc, wc + got);
    if (got == 0) std::this_thread::sleep_for(100us);
  }
  return out;
}

Wc Host::expect_ok() {
  const std::vector<Wc> w = poll(1);
  if (w.empty()) {
    ADD_FAILURE() << dev->name() << ": no completion";
    return Wc{.status = WcStatus::kGeneralErr};
  }
  EXPECT_EQ(w[0].status, WcStatus::kSuccess) << "wr " << w[0].wr_id;
  return w[0];
}

Counters Host::counters() {
  Counters out;
  dev->for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
    out[std::string(scope) + "." + std::string(name)] = v;
  });
  return out;
}

// Takes RC QP `q` through INIT and RTR to RTS, toward `peer_qpn` at
// `peer_gid`. `timeout` is the local ACK timeout code (4.096 us << it).
void connect_rc(verbs::QueuePair& q, const std::array<std::uint8_t, 16>& peer_gid,
                std::uint32_t peer_qpn, std::uint8_t timeout) {
  verbs::QpModify m;
  transport::QpAttr& a = m.attr;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  ASSERT_EQ(q.modify(m, am::kState | am::kPkeyIndex | am::kPort | am::kAccessFlags), 0);
  m.av.sgid_index = 1;
  m.av.dgid = peer_gid;
  a.qp_state = QpState::kRtr;
  a.path_mtu = wire::Mtu::k1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  ASSERT_EQ(q.modify(m, am::kState | am::kAv | am::kPathMtu | am::kDestQpn | am::kRqPsn |
                            am::kMaxDestRdAtomic | am::kMinRnrTimer),
            0);
  a.qp_state = QpState::kRts;
  a.sq_psn = 0;
  a.timeout = timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  ASSERT_EQ(q.modify(m, am::kState | am::kSqPsn | am::kTimeout | am::kRetryCnt | am::kRnrRetry |
                            am::kMaxQpRdAtomic),
            0);
}

namespace {

void fill(Host& h, std::size_t off, std::size_t len, std::uint8_t seed) {
  std::iota(h.buf.begin() + off, h.buf.begin() + off + len, seed);
}
bool same(const Host& a, std::size_t a_off, const Host& b, std::size_t b_off, std::size_t len) {
  return std::memcmp(a.buf.data() + a_off, b.buf.data() + b_off, len) == 0;
}

}  // namespace

// RC between a and b, over new QPs: a SEND each way, an RDMA WRITE from
// a into b and a READ of it back; every byte must arrive intact.
void exchange_rc(Host& a, Host& b) {
  verbs::QueuePair* qa = a.make_qp(QpType::kRc);
  verbs::QueuePair* qb = b.make_qp(QpType::kRc);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(connect_rc(*qa, b.gid(), qb->qpn()));
  ASSERT_NO_FATAL_FAILURE(connect_rc(*qb, a.gid(), qa->qpn()));

  // SEND a -> b and b -> a, several packets each (path MTU 1024).
  fill(a, 0, 5000, 3);
  fill(b, 0, 3000, 101);
  ASSERT_NO_FATAL_FAILURE(b.post_recv(*qb, 10, 65536, 8192));
  ASSERT_NO_FATAL_FAILURE(a.post_recv(*qa, 20, 65536, 8192));
  ASSERT_NO_FATAL_FAILURE(a.post(*qa, a.wr(WrOpcode::kSend, 1, 0, 5000)));
  ASSERT_NO_FATAL_FAILURE(b.post(*qb, b.wr(WrOpcode::kSend, 2, 0, 3000)));
  std::vector<Wc> wa = a.poll(2), wb = b.poll(2);
  ASSERT_EQ(wa.size(), 2u);
  ASSERT_EQ(wb.size(), 2u);
  for (const Wc& w : wa) EXPECT_EQ(w.status, WcStatus::kSuccess) << "a wr " << w.wr_id;
  for (const Wc& w : wb) {
    EXPECT_EQ(w.status, WcStatus::kSuccess) << "b wr " << w.wr_id;
    if (w.wr_id == 10) {
      EXPECT_EQ(w.byte_len, 5000u);
    }
  }
  EXPECT_TRUE(same(a, 0, b, 65536, 5000));
  EXPECT_TRUE(same(b, 0, a, 65536, 3000));

  // WRITE a[0, 20000) into b[16384, ...), then READ it back into a[32768, ...).
  fill(a, 0, 20000, 55);
  transport::SendWr w = a.wr(WrOpcode::kRdmaWrite, 3, 0, 20000);
  w.remote_addr = b.addr(16384);
  w.rkey = b.mr->rkey();
  ASSERT_NO_FATAL_FAILURE(a.post(*qa, w));
  EXPECT_EQ(a.expect_ok().wr_id, 3u);
  b.dev->poll();  // orders what a wrote before our reads
  EXPECT_TRUE(same(a, 0, b, 16384, 20000));
  std::fill(a.buf.begin() + 32768, a.buf.begin() + 32768 + 20000, 0);
  w = a.wr(WrOpcode::kRdmaRead, 4, 32768, 20000);
  w.remote_addr = b.addr(16384);
  w.rkey = b.mr->rkey();
  ASSERT_NO_FATAL_FAILURE(a.post(*qa, w));
  EXPECT_EQ(a.expect_ok().wr_id, 4u);
  EXPECT_TRUE(same(a, 0, a, 32768, 20000));
}

// UD between a and b, over new QPs: a datagram each way, with the
// sender's QPN as its source.
void exchange_ud(Host& a, Host& b) {
  verbs::QueuePair* qa = a.make_qp(QpType::kUd);
  verbs::QueuePair* qb = b.make_qp(QpType::kUd);
  ASSERT_TRUE(qa && qb);
  ASSERT_NO_FATAL_FAILURE(a.post_recv(*qa, 30, 65536, kGrh + 1024));
  ASSERT_NO_FATAL_FAILURE(b.post_recv(*qb, 40, 65536, kGrh + 1024));
  fill(a, 0, 700, 9);
  fill(b, 0, 900, 77);
  ASSERT_NO_FATAL_FAILURE(a.send_ud(*qa, a.ah_to(b.gid()), qb->qpn(), 5, 0, 700));
  ASSERT_NO_FATAL_FAILURE(b.send_ud(*qb, b.ah_to(a.gid()), qa->qpn(), 6, 0, 900));
  for (auto [h, peer, len] : {std::tuple{&a, qb, 900u}, std::tuple{&b, qa, 700u}}) {
    const std::vector<Wc> w = h->poll(2);
    ASSERT_EQ(w.size(), 2u);
    for (const Wc& c : w) {
      EXPECT_EQ(c.status, WcStatus::kSuccess) << "wr " << c.wr_id;
      if (c.opcode != transport::WcOpcode::kRecv) continue;
      EXPECT_EQ(c.byte_len, kGrh + len);
      EXPECT_EQ(c.src_qp, peer->qpn());
    }
  }
  EXPECT_TRUE(same(a, 0, b, 65536 + kGrh, 700));
  EXPECT_TRUE(same(b, 0, a, 65536 + kGrh, 900));
}

}  // namespace uroce::test
