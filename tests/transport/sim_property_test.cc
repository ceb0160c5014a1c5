/* SPDX-License-Identifier: BSD-3-Clause */
// Property tests over thousands of seeds: random mixes of every operation
// and of sizes from 0 B to 1 MiB, on several QP pairs in both directions,
// over links that lose, duplicate, reorder and corrupt frames. Whatever
// the seed: every message arrives exactly once, in order, byte-identical;
// every WR completes exactly once, successfully; atomics see each other
// in order; no QP stalls. The seeds take turns over the four kinds of
// route: IPv4, IPv6, and each on an 802.1Q VLAN.
//
// One outcome is not a fault: a lossy link may lose every copy of one
// packet, retry_cnt + 1 in a row (1e-8 at 10 % loss, so about one seed in
// 3,000 at loss10). That QP rightly ends in RETRY_EXC_ERR, its WRs after
// the failed one flushed, and its pair is not checked further; such seeds
// are counted and must stay that rare (sim_retry_test.cc checks the
// budget itself).

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::FaultModel;
using test::SimHost;
using test::SimNet;
using Bytes = std::vector<std::uint8_t>;

constexpr unsigned kAllAccess =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

// A whole number of at least `min` from the environment variable `name`,
// `fallback` when it is unset. Anything else (empty, "0" for a count,
// "ten", "5x") fails the test: a typo must not run no seed and pass.
std::optional<long> env_number(const char* name, long fallback, long min) {
  const char* e = std::getenv(name);
  if (!e) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(e, &end, 10);
  if (*e == '\0' || *end != '\0' || errno != 0 || v < min || v > 1'000'000) {
    ADD_FAILURE() << name << "='" << e << "': not a whole number from " << min << " to 1000000";
    return std::nullopt;
  }
  return v;
}

std::uint32_t random_size(std::mt19937_64& rng) {
  const unsigned pick = rng() % 100;
  if (pick < 10) return 0;
  if (pick < 40) return 1 + rng() % 64;
  if (pick < 70) return 65 + rng() % 4096;
  if (pick < 92) return 4097 + rng() % 65536;
  if (pick < 99) return 65537 + rng() % (256 * 1024);
  return 1 << 20;  // 1 MiB
}

// One direction of traffic on one QP pair: what the sender posted and what
// the receiver must end up with.
struct Flow {
  SimHost* src_host;
  SimHost* dst_host;
  Qp* src;
  Qp* dst;
  std::vector<std::unique_ptr<Bytes>> buffers;  // stable addresses
  // Expectations.
  struct Recv {
    std::uint64_t wr_id;
    Bytes* buf;
    Bytes expect;
    WcOpcode opcode;
    bool imm;
    std::uint32_t imm_data;
  };
  std::vector<Recv> recvs;
  struct Check {
    Bytes* got;
    Bytes expect;
  };
  std::vector<Check> checks;  // WRITE targets, READ results
  std::vector<std::uint64_t> send_ids;
  alignas(8) std::uint64_t faa_word = 0;
  alignas(8) std::uint64_t cas_word = 0;
  std::vector<std::pair<Bytes*, std::uint64_t>> atomic_results;  // where, expected orig
  std::uint64_t faa_expect = 0;
  std::uint64_t cas_expect = 0;

  Bytes* buffer(std::size_t n, std::mt19937_64& rng, bool fill) {
    buffers.push_back(std::make_unique<Bytes>(n + 1));  // never empty
    if (fill) {
      // Eight bytes per step of splitmix64, seeded from the seed's stream:
      // a byte per step of the Mersenne Twister was most of a seed's time.
      Bytes& buf = *buffers.back();
      std::uint64_t x = rng();
      for (std::size_t i = 0; i < buf.size(); i += 8) {
        std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        std::memcpy(buf.data() + i, &z, std::min<std::size_t>(8, buf.size() - i));
      }
    }
    return buffers.back().get();
  }
};

std::uint64_t addr(const Bytes* b) { return reinterpret_cast<std::uint64_t>(b->data()); }

void post_ops(Flow& f, int count, std::mt19937_64& rng, std::uint64_t& next_id) {
  f.faa_word = rng();
  f.faa_expect = f.faa_word;
  f.cas_word = rng();
  f.cas_expect = f.cas_word;
  const auto faa_key = f.dst_host->memory().reg(&f.faa_word, 8, kAllAccess);
  const auto cas_key = f.dst_host->memory().reg(&f.cas_word, 8, kAllAccess);
  for (int i = 0; i < count; ++i) {
    const std::uint64_t id = next_id++;
    SendWr wr;
    wr.wr_id = id;
    wr.send_flags = send_flags::kSignaled;
    const unsigned kind = rng() % 8;
    const bool atomic = kind >= 6;
    const std::uint32_t len = atomic ? 8 : random_size(rng);
    Bytes* local = f.buffer(len, rng, true);
    const auto lkey = f.src_host->memory().reg(local->data(), local->size(), kAllAccess);
    wr.num_sge = 1;
    wr.sg_list[0] = {addr(local), len, lkey};
    if (len > 8 && (rng() & 3) == 0) {
      // Split the message over up to four SGEs.
      const std::uint32_t cut1 = 1 + rng() % (len - 1);
      const std::uint32_t cut2 = cut1 + rng() % (len - cut1);
      wr.num_sge = 3;
      wr.sg_list[0] = {addr(local), cut1, lkey};
      wr.sg_list[1] = {addr(local) + cut1, cut2 - cut1, lkey};
      wr.sg_list[2] = {addr(local) + cut2, len - cut2, lkey};
    }
    if (len <= 128 && !atomic && kind < 4 && (rng() & 1)) wr.send_flags |= send_flags::kInline;
    const Bytes data(local->begin(), local->begin() + len);

    if (kind <= 1 || kind == 3) {  // SEND, SEND_WITH_IMM, WRITE_WITH_IMM
      const bool write = kind == 3;
      wr.opcode = kind == 0 ? WrOpcode::kSend
                  : write   ? WrOpcode::kRdmaWriteWithImm
                            : WrOpcode::kSendWithImm;
      wr.imm_data = static_cast<std::uint32_t>(rng());
      Bytes* target = f.buffer(len, rng, false);
      const auto tkey = f.dst_host->memory().reg(target->data(), target->size(), kAllAccess);
      // The receive buffer is a little larger than the message, as real
      // programs post.
      Bytes* rbuf = write ? nullptr : f.buffer(len + rng() % 64, rng, false);
      RecvWr rwr;
      rwr.wr_id = id;
      if (rbuf) {
        const auto rkey = f.dst_host->memory().reg(rbuf->data(), rbuf->size(), kAllAccess);
        rwr.num_sge = 1;
        rwr.sg_list[0] = {addr(rbuf), static_cast<std::uint32_t>(rbuf->size()), rkey};
      }
      EXPECT_EQ(f.dst->post_recv(rwr), 0);
      if (write) {
        wr.remote_addr = addr(target);
        wr.rkey = tkey;
        f.checks.push_back({target, data});
      }
      f.recvs.push_back({id, rbuf, data, write ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv,
                         kind != 0, wr.imm_data});
    } else if (kind == 2) {
      wr.opcode = WrOpcode::kRdmaWrite;
      Bytes* target = f.buffer(len, rng, false);
      wr.remote_addr = addr(target);
      wr.rkey = f.dst_host->memory().reg(target->data(), target->size(), kAllAccess);
      f.checks.push_back({target, data});
    } else if (kind <= 5) {
      wr.opcode = WrOpcode::kRdmaRead;
      Bytes* source = f.buffer(len, rng, true);
      wr.remote_addr = addr(source);
      wr.rkey = f.dst_host->memory().reg(source->data(), source->size(), kAllAccess);
      f.checks.push_back({local, Bytes(source->begin(), source->begin() + len)});
    } else if (kind == 6) {
      wr.opcode = WrOpcode::kAtomicFetchAndAdd;
      wr.compare_add = rng() % 1000;
      wr.remote_addr = reinterpret_cast<std::uint64_t>(&f.faa_word);
      wr.rkey = faa_key;
      f.atomic_results.push_back({local, f.faa_expect});
      f.faa_expect += wr.compare_add;
    } else {
      wr.opcode = WrOpcode::kAtomicCmpAndSwp;
      wr.compare_add = f.cas_expect;
      wr.swap = rng();
      wr.remote_addr = reinterpret_cast<std::uint64_t>(&f.cas_word);
      wr.rkey = cas_key;
      f.atomic_results.push_back({local, f.cas_expect});
      f.cas_expect = wr.swap;
    }
    if ((rng() % 16) == 0) wr.send_flags |= send_flags::kFence;
    ASSERT_EQ(f.src->post_send(wr), 0) << "op " << i;
    f.send_ids.push_back(id);
  }
}

struct Coverage {
  std::uint64_t seeds = 0, frames = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0,
                retransmits = 0, timeouts = 0, seq_naks = 0, duplicates_seen = 0,
                out_of_retries = 0;  ///< seeds where a QP ran out of retries
  // Selective repeat: requests kept out of order, SACKs sent, PSNs resent.
  std::uint64_t sr_kept = 0, sr_sacks = 0, sr_resent = 0, sr_probes = 0;
  std::uint64_t virtual_ns = 0;    ///< the seeds' virtual time until every completion came
  std::uint64_t by_route[4] = {};  ///< seeds per kind of route (route_kind)
  std::uint64_t ipv6_frames = 0, tagged_frames = 0;
};

// Seed s runs route kind s % 4: IPv4, IPv6, IPv4 tagged, IPv6 tagged.
constexpr const char* kRouteNames[4] = {"IPv4", "IPv6", "IPv4+VLAN", "IPv6+VLAN"};
test::SimRoutes route_kind(std::uint64_t seed) {
  return {.ipv6 = (seed & 1) != 0, .vlan = (seed & 2) != 0};
}

// Which hosts offer selective repeat.
enum class Sr : std::uint8_t { kNone, kBoth, kOneSide };

void run_seed(std::uint64_t seed, const FaultModel& faults, Sr sr, Coverage& cov) {
  SimNet net(seed, 10'000'000'000, route_kind(seed));
  std::mt19937_64 rng(seed * 7919 + 1);
  SimHost& a = net.add_host(1024);
  SimHost& b = net.add_host(1024);
  a.set_selective_repeat(sr != Sr::kNone);
  b.set_selective_repeat(sr == Sr::kBoth);
  net.set_faults_all(faults);

  QpAttr params;
  params.path_mtu = static_cast<wire::Mtu>(1 + rng() % 5);
  params.max_rd_atomic = static_cast<std::uint8_t>(1 + rng() % 16);
  params.max_dest_rd_atomic = 16;
  params.min_rnr_timer = 1;
  params.timeout = 8;  // 1.05 ms
  params.retry_cnt = 7;
  params.rnr_retry = 7;

  const int npairs = 1 + static_cast<int>(rng() % 3);
  std::vector<std::unique_ptr<Flow>> flows;
  std::uint64_t next_id = 1;
  for (int i = 0; i < npairs; ++i) {
    Qp& qa = a.create_qp(QpType::kRc, 512);
    Qp& qb = b.create_qp(QpType::kRc, 512);
    net.connect(qa, a, qb, b, params);
    for (bool reverse : {false, true}) {
      auto f = std::make_unique<Flow>();
      f->src_host = reverse ? &b : &a;
      f->dst_host = reverse ? &a : &b;
      f->src = reverse ? &qb : &qa;
      f->dst = reverse ? &qa : &qb;
      flows.push_back(std::move(f));
    }
  }
  std::size_t expected_send = 0, expected_recv = 0;
  for (auto& f : flows) {
    post_ops(*f, 1 + static_cast<int>(rng() % 12), rng, next_id);
    expected_send += f->send_ids.size();
    expected_recv += f->recvs.size();
  }

  std::map<std::uint64_t, Wc> send_wc;
  std::map<std::uint32_t, std::vector<Wc>> recv_wc;  // by QP, in arrival order
  std::size_t nsend = 0, nrecv = 0;
  std::set<std::uint32_t> out_of_retries;  // QPs with a RETRY_EXC_ERR completion
  auto drain = [&] {
    Wc wc[64];
    for (SimHost* h : {&a, &b}) {
      for (std::uint32_t n; (n = h->send_cq().poll(wc, 64)) > 0;) {
        for (std::uint32_t i = 0; i < n; ++i) {
          EXPECT_TRUE(send_wc.emplace(wc[i].wr_id, wc[i]).second)
              << "WR " << wc[i].wr_id << " completed twice";
          if (wc[i].status == WcStatus::kRetryExcErr) out_of_retries.insert(wc[i].qp_num);
          ++nsend;
        }
      }
      for (std::uint32_t n; (n = h->recv_cq().poll(wc, 64)) > 0;) {
        for (std::uint32_t i = 0; i < n; ++i) recv_wc[wc[i].qp_num].push_back(wc[i]);
        nrecv += n;
      }
    }
    // A pair with a QP out of retries delivers no more: its peer's
    // receives stay posted.
    return nsend >= expected_send && (nrecv >= expected_recv || !out_of_retries.empty());
  };
  const bool finished = net.run_until(drain, 60'000'000'000ull);  // 60 s of virtual time
  drain();
  cov.virtual_ns += net.now();
  ASSERT_TRUE(finished) << "stalled at " << net.now() << " ns: " << nsend << "/" << expected_send
                        << " send, " << nrecv << "/" << expected_recv << " recv completions";

  if (!out_of_retries.empty()) ++cov.out_of_retries;
  for (auto& f : flows) {
    if (out_of_retries.count(f->src->qpn()) || out_of_retries.count(f->dst->qpn())) {
      // Successes, then at most one RETRY_EXC_ERR, then flushes: the
      // failed WR ends the QP's work and nothing after it runs.
      WcStatus last = WcStatus::kSuccess;
      for (std::uint64_t id : f->send_ids) {
        ASSERT_TRUE(send_wc.count(id)) << "WR " << id << " never completed";
        const WcStatus st = send_wc[id].status;
        if (last == WcStatus::kSuccess) {
          EXPECT_TRUE(st == WcStatus::kSuccess || st == WcStatus::kRetryExcErr) << "WR " << id;
        } else {
          EXPECT_EQ(st, WcStatus::kWrFlushErr) << "WR " << id;
        }
        last = st;
      }
      continue;
    }
    for (std::uint64_t id : f->send_ids) {
      ASSERT_TRUE(send_wc.count(id)) << "WR " << id << " never completed";
      EXPECT_EQ(send_wc[id].status, WcStatus::kSuccess) << "WR " << id;
    }
    const auto& got = recv_wc[f->dst->qpn()];
    std::size_t k = 0;
    for (const auto& wc : got) {
      if (k >= f->recvs.size()) break;
      // Receives of the reverse flow share the CQ; take ours in order.
      if (wc.wr_id != f->recvs[k].wr_id) continue;
      const Flow::Recv& r = f->recvs[k++];
      EXPECT_EQ(wc.status, WcStatus::kSuccess);
      EXPECT_EQ(wc.opcode, r.opcode);
      EXPECT_EQ(wc.byte_len, r.expect.size());
      EXPECT_EQ((wc.wc_flags & wc_flags::kWithImm) != 0, r.imm);
      if (r.imm) {
        EXPECT_EQ(wc.imm_data, r.imm_data);
      }
      if (r.buf && !r.expect.empty()) {
        EXPECT_EQ(0, std::memcmp(r.buf->data(), r.expect.data(), r.expect.size()))
            << "SEND " << r.wr_id << " of " << r.expect.size() << " bytes";
      }
    }
    EXPECT_EQ(k, f->recvs.size()) << "receives missing or out of order";
    for (const auto& c : f->checks) {
      if (c.expect.empty()) continue;
      EXPECT_EQ(0, std::memcmp(c.got->data(), c.expect.data(), c.expect.size()))
          << "WRITE or READ of " << c.expect.size() << " bytes";
    }
    for (const auto& [buf, orig] : f->atomic_results) {
      std::uint64_t v;
      std::memcpy(&v, buf->data(), 8);
      EXPECT_EQ(v, orig) << "atomic original value";
    }
    EXPECT_EQ(f->faa_word, f->faa_expect);
    EXPECT_EQ(f->cas_word, f->cas_expect);
    const Counters& c = f->src->counters();
    cov.retransmits += c.get(Counter::kCompleterRetryErr);
    cov.timeouts += c.get(Counter::kLocalAckTimeoutErr);
    cov.seq_naks += c.get(Counter::kRcvdSeqErr);
    cov.duplicates_seen += f->dst->counters().get(Counter::kDuplicateRequest);
    cov.sr_kept += f->dst->counters().get(Counter::kSrOooKept);
    cov.sr_sacks += f->dst->counters().get(Counter::kSrSackSent);
    cov.sr_resent += c.get(Counter::kSrRetransmitted);
    cov.sr_probes += c.get(Counter::kSrTailProbes);
  }
  EXPECT_EQ(nsend, expected_send);
  if (out_of_retries.empty()) {
    EXPECT_EQ(nrecv, expected_recv);
  }
  const auto& s = net.stats();
  ++cov.seeds;
  ++cov.by_route[seed % 4];
  // The frames on the link are what the route says, all of them.
  EXPECT_EQ(s.ipv6, route_kind(seed).ipv6 ? s.frames : 0);
  EXPECT_EQ(s.tagged, route_kind(seed).vlan ? s.frames : 0);
  cov.ipv6_frames += s.ipv6;
  cov.tagged_frames += s.tagged;
  cov.frames += s.frames;
  cov.dropped += s.dropped;
  cov.duplicated += s.duplicated;
  cov.reordered += s.reordered;
  cov.corrupted += s.corrupted;
}

struct Level {
  const char* name;
  FaultModel faults;
  Sr sr = Sr::kNone;
};

// How ctest and gtest name a level.
void PrintTo(const Level& level, std::ostream* os) { *os << level.name; }

class SimProperty : public ::testing::TestWithParam<Level> {};

TEST_P(SimProperty, EveryMessageExactlyOnceInOrderIntact) {
  Coverage cov;
  // Seeds per loss level (scripts/test.sh sets them per build), or the one
  // seed UROCE_SIM_SEED names, to debug it.
  const auto seeds = env_number("UROCE_SIM_SEEDS", 400, 1);
  const auto only = env_number("UROCE_SIM_SEED", -1, 0);
  ASSERT_TRUE(seeds && only);
  const long first = *only >= 0 ? *only : 0;
  const long end = *only >= 0 ? *only + 1 : *seeds;
  for (long s = first; s < end; ++s) {
    SCOPED_TRACE("seed " + std::to_string(s));
    run_seed(static_cast<std::uint64_t>(s) + 1, GetParam().faults, GetParam().sr, cov);
    if (HasFailure()) break;
  }
  if (!HasFailure()) {
    EXPECT_EQ(cov.seeds, static_cast<std::uint64_t>(end - first)) << "every seed ran";
    // Four seeds or more run every kind of route.
    for (int k = 0; k < 4 && end - first >= 4; ++k)
      EXPECT_GT(cov.by_route[k], 0u) << "no seed ran " << kRouteNames[k];
  }
  // The coverage the run achieved, for the record.
  std::printf(
      "[ coverage ] %s: %llu seeds, %llu frames, %llu dropped, %llu duplicated, %llu "
      "reordered, %llu corrupted; %llu go-back-N restarts (%llu timeouts, %llu NAK seq err), "
      "%llu duplicate requests\n",
      GetParam().name, static_cast<unsigned long long>(cov.seeds),
      static_cast<unsigned long long>(cov.frames), static_cast<unsigned long long>(cov.dropped),
      static_cast<unsigned long long>(cov.duplicated),
      static_cast<unsigned long long>(cov.reordered),
      static_cast<unsigned long long>(cov.corrupted),
      static_cast<unsigned long long>(cov.retransmits),
      static_cast<unsigned long long>(cov.timeouts), static_cast<unsigned long long>(cov.seq_naks),
      static_cast<unsigned long long>(cov.duplicates_seen));
  std::printf("[ coverage ] %s: %llu seeds with a QP out of retries\n", GetParam().name,
              static_cast<unsigned long long>(cov.out_of_retries));
  std::printf(
      "[ coverage ] %s: selective repeat: %llu requests kept out of order, %llu SACKs, %llu "
      "packets resent selectively, %llu tail probes\n",
      GetParam().name, static_cast<unsigned long long>(cov.sr_kept),
      static_cast<unsigned long long>(cov.sr_sacks), static_cast<unsigned long long>(cov.sr_resent),
      static_cast<unsigned long long>(cov.sr_probes));
  std::printf("[ coverage ] %s: %.3f s of virtual time until the last completion\n",
              GetParam().name, static_cast<double>(cov.virtual_ns) / 1e9);
  std::printf("[ coverage ] %s: seeds by route:", GetParam().name);
  for (int k = 0; k < 4; ++k)
    std::printf(" %s %llu", kRouteNames[k], static_cast<unsigned long long>(cov.by_route[k]));
  std::printf("; %llu frames over IPv6, %llu tagged\n",
              static_cast<unsigned long long>(cov.ipv6_frames),
              static_cast<unsigned long long>(cov.tagged_frames));
  // Only loss runs a QP out of retries, and rarely: 1 % of the seeds is
  // 30 times what 10 % loss explains.
  if (GetParam().faults.drop == 0 && GetParam().faults.corrupt == 0) {
    EXPECT_EQ(cov.out_of_retries, 0u);
  }
  EXPECT_LE(cov.out_of_retries * 100, cov.seeds)
      << "QPs ran out of retries more than loss explains";
  const Sr sr = GetParam().sr;
  if (GetParam().faults.drop > 0) {
    EXPECT_GT(cov.dropped, 0u);
    if (sr == Sr::kBoth) {
      EXPECT_GT(cov.sr_resent, 0u) << "loss must have caused selective resends";
    } else {
      EXPECT_GT(cov.retransmits, 0u) << "loss must have caused go-back-N";
    }
  }
  if (sr == Sr::kBoth) {
    // A responder that keeps what comes out of order never NAKs a gap.
    EXPECT_EQ(cov.seq_naks, 0u);
    if (GetParam().faults.drop > 0 || GetParam().faults.reorder > 0) {
      EXPECT_GT(cov.sr_kept, 0u);
      EXPECT_GT(cov.sr_sacks, 0u);
    }
  } else {
    // Offered by one side alone, selective repeat is not used: the other
    // side gets go-back-N, as a peer that never heard of it would.
    EXPECT_EQ(cov.sr_kept, 0u);
    EXPECT_EQ(cov.sr_sacks, 0u);
    EXPECT_EQ(cov.sr_resent, 0u);
  }
}

FaultModel faults(double drop, double dup, double reorder, double corrupt) {
  FaultModel f;
  f.drop = drop;
  f.duplicate = dup;
  f.reorder = reorder;
  f.corrupt = corrupt;
  return f;
}

INSTANTIATE_TEST_SUITE_P(
    Loss, SimProperty,
    ::testing::Values(Level{"clean", faults(0, 0, 0, 0)},
                      Level{"loss1", faults(0.01, 0.01, 0.01, 0.002)},
                      Level{"loss10", faults(0.10, 0.02, 0.05, 0.01)},
                      // Selective repeat on both hosts.
                      Level{"sr_clean", faults(0, 0, 0, 0), Sr::kBoth},
                      Level{"sr_loss1", faults(0.01, 0.01, 0.01, 0.002), Sr::kBoth},
                      Level{"sr_loss10", faults(0.10, 0.02, 0.05, 0.01), Sr::kBoth},
                      // Offered by one host only.
                      Level{"sr_one_side_loss1", faults(0.01, 0.01, 0.01, 0.002), Sr::kOneSide}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace uroce::transport
