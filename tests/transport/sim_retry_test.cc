/* SPDX-License-Identifier: BSD-3-Clause */
// The retry budget under independent loss: four single-packet SENDs over
// a link that loses a fifth of the requests and none of the answers. A
// message is lost for good only when one PSN goes out retry_cnt + 1 times
// in a row (the first try, or the copy in flight when the budget was last
// reset, and retry_cnt retries) and every copy is lost: about
// 4 x 0.2^6 = 2.6e-4 of the QPs. An idealised go-back-N model (NAK once
// per gap, a timeout otherwise, the budget reset on every ACK that moves
// the window) gives 2.7e-4 over 2 million runs; this simulator gave
// 50 in 200,000 seeds (2.5e-4). Spending budget twice for one loss, or
// resending from a PSN the responder does not expect, fails far more.
// Seed 42684 is one such failure, with the counters of a reported one
// but for an ACK the responder there coalesced: the third PSN and all
// five of its retries are lost, and the responder rightly finds each
// copy of the fourth out of sequence.

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "support/sim_net.h"

namespace uroce::transport {
namespace {

using test::FaultModel;
using test::SimHost;
using test::SimNet;

constexpr int kMessages = 4;
constexpr std::uint8_t kRetryCnt = 5;

struct Outcome {
  int completed = 0;
  int retry_exc = 0;
  int recvs = 0;  ///< messages the responder delivered
};

void post_recvs(SimHost& b, Qp& qb, std::vector<std::vector<std::uint8_t>>& bufs) {
  for (int i = 0; i < kMessages; ++i) {
    RecvWr r;
    r.wr_id = 100 + i;
    r.num_sge = 1;
    r.sg_list[0] = {reinterpret_cast<std::uint64_t>(bufs[i].data()),
                    static_cast<std::uint32_t>(bufs[i].size()),
                    b.memory().reg(bufs[i].data(), bufs[i].size(), access::kLocalWrite)};
    EXPECT_EQ(qb.post_recv(r), 0);
  }
}

void post_sends(SimHost& a, Qp& qa, std::vector<std::vector<std::uint8_t>>& bufs) {
  for (int i = 0; i < kMessages; ++i) {
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::kSend;
    w.send_flags = send_flags::kSignaled;
    w.num_sge = 1;
    w.sg_list[0] = {reinterpret_cast<std::uint64_t>(bufs[i].data()),
                    static_cast<std::uint32_t>(bufs[i].size()),
                    a.memory().reg(bufs[i].data(), bufs[i].size(), 0)};
    EXPECT_EQ(qa.post_send(w), 0);
  }
}

// One QP pair, A sending to B; `verbose` prints both QPs' counters.
Outcome run_seed(std::uint64_t seed, bool verbose) {
  SimNet net(seed);
  SimHost& a = net.add_host(2 * kMessages);
  SimHost& b = net.add_host(2 * kMessages);
  Qp& qa = a.create_qp(QpType::kRc);
  Qp& qb = b.create_qp(QpType::kRc);
  QpAttr p;
  p.max_rd_atomic = p.max_dest_rd_atomic = 1;
  p.timeout = 14;  // 67.1 ms
  p.retry_cnt = kRetryCnt;
  p.rnr_retry = 0;
  net.connect(qa, a, qb, b, p);
  FaultModel lossy;
  lossy.drop = 0.2;
  net.set_faults(a, b, lossy);  // B to A keeps the default: nothing lost

  std::vector<std::vector<std::uint8_t>> src(kMessages, std::vector<std::uint8_t>(64, 7));
  std::vector<std::vector<std::uint8_t>> dst(kMessages, std::vector<std::uint8_t>(64, 0));
  post_recvs(b, qb, dst);
  post_sends(a, qa, src);
  // Six local ACK timeouts are 0.4 s: ten seconds ends every run.
  net.run_until([&] { return a.send_cq().size() >= kMessages; }, 10'000'000'000);

  Outcome o;
  Wc wc;
  while (a.send_cq().poll(&wc, 1) == 1) {
    o.completed += wc.status == WcStatus::kSuccess;
    o.retry_exc += wc.status == WcStatus::kRetryExcErr;
  }
  o.recvs = static_cast<int>(qb.counters().get(Counter::kRdmaRecvs));
  if (verbose) {
    const auto n = [](const Qp& q, Counter c) {
      return static_cast<unsigned long long>(q.counters().get(c));
    };
    std::printf(
        "seed %llu  A: sent %llu rcvd %llu seq_err %llu retries %llu timeouts %llu exc %llu"
        "  B: rcvd %llu recvs %llu out_of_seq %llu naks %llu dups %llu sent %llu\n",
        static_cast<unsigned long long>(seed), n(qa, Counter::kSentPkts), n(qa, Counter::kRcvdPkts),
        n(qa, Counter::kRcvdSeqErr), n(qa, Counter::kCompleterRetryErr),
        n(qa, Counter::kLocalAckTimeoutErr), n(qa, Counter::kRetryExceededErr),
        n(qb, Counter::kRcvdPkts), n(qb, Counter::kRdmaRecvs), n(qb, Counter::kOutOfSeqRequest),
        n(qb, Counter::kPacketSeqErr), n(qb, Counter::kDuplicateRequest),
        n(qb, Counter::kSentPkts));
  }
  return o;
}

// UROCE_SIM_SEEDS runs more seeds and prints each failing one's counters
// (UROCE_SIM_TRACE=1 with UROCE_SIM_SEED then shows its packets).
long env_long(const char* name, long fallback) {
  const char* e = std::getenv(name);
  if (!e) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(e, &end, 10);
  if (*e == '\0' || *end != '\0' || errno != 0 || v < 1) {
    ADD_FAILURE() << name << "='" << e << "': not a whole number of at least 1";
    return 0;
  }
  return v;
}

TEST(SimRetry, FourSendsAtAFifthLossRunOutOfRetriesNoMoreThanTheLossesExplain) {
  const long only = env_long("UROCE_SIM_SEED", -1);
  if (only > 0) {
    run_seed(static_cast<std::uint64_t>(only), true);
    return;
  }
  const long seeds = env_long("UROCE_SIM_SEEDS", 2000);
  const bool verbose = std::getenv("UROCE_SIM_SEEDS") != nullptr;
  long failed = 0;
  for (long s = 1; s <= seeds; ++s) {
    const Outcome o = run_seed(static_cast<std::uint64_t>(s), false);
    if (o.retry_exc == 0) {
      EXPECT_EQ(o.completed, kMessages) << "seed " << s;
      EXPECT_EQ(o.recvs, kMessages) << "seed " << s;
      continue;
    }
    // The WR whose message never arrived fails; the ones behind it flush.
    EXPECT_EQ(o.retry_exc, 1) << "seed " << s;
    EXPECT_EQ(o.completed, o.recvs) << "seed " << s;
    ++failed;
    if (verbose) run_seed(static_cast<std::uint64_t>(s), true);
  }
  std::printf("%ld seeds, %ld ended in RETRY_EXC_ERR\n", seeds, failed);
  // 2.7e-4 of 2000 is 0.5 expected (these seeds give 2); a budget spent
  // twice per loss would give dozens.
  EXPECT_LE(failed * 1000, seeds * 2) << "more than 2e-3 of the QPs ran out of retries";
}

}  // namespace
}  // namespace uroce::transport
