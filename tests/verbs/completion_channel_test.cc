/* SPDX-License-Identifier: BSD-3-Clause */
#include "verbs/completion_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <thread>

namespace uroce::verbs {
namespace {

using transport::Cq;
using transport::Wc;
using transport::WcStatus;

bool readable(int fd, int ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

TEST(CompletionChannel, AnArmedCqNotifiesOnceWithItsHandle) {
  CompletionChannel ch;
  Cq a(16), b(16);
  a.set_notifier(&ch);
  b.set_notifier(&ch);
  // Expect: nothing until armed.
  a.push(Wc{});
  EXPECT_FALSE(readable(ch.fd()));
  a.arm(false);
  b.arm(false);
  a.push(Wc{});
  a.push(Wc{});  // armed once: one event
  b.push(Wc{});
  ASSERT_TRUE(readable(ch.fd()));
  EXPECT_EQ(ch.get_event(), &a);
  EXPECT_EQ(ch.get_event(), &b);
  EXPECT_FALSE(readable(ch.fd())) << "two notifications, two events";
}

TEST(CompletionChannel, SolicitedOnlyWakesForSolicitedAndErrorCompletions) {
  CompletionChannel ch;
  Cq cq(16);
  cq.set_notifier(&ch);
  cq.arm(true);
  cq.push(Wc{});
  EXPECT_FALSE(readable(ch.fd()));
  cq.push(Wc{}, /*solicited=*/true);
  EXPECT_TRUE(readable(ch.fd()));
  EXPECT_EQ(ch.get_event(), &cq);
  cq.arm(true);
  Wc err;
  err.status = WcStatus::kRemAccessErr;
  cq.push(err);
  EXPECT_EQ(ch.get_event(), &cq) << "errors always wake";
}

TEST(CompletionChannel, GetEventBlocksUntilACompletionComesFromAnotherThread) {
  CompletionChannel ch;
  Cq cq(16);
  cq.set_notifier(&ch);
  cq.arm(false);
  std::thread engine([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cq.push(Wc{});
  });
  EXPECT_EQ(ch.get_event(), &cq);
  engine.join();
  // Non-blocking descriptor: no event is EAGAIN, as with the kernel's.
  fcntl(ch.fd(), F_SETFL, fcntl(ch.fd(), F_GETFL) | O_NONBLOCK);
  errno = 0;
  EXPECT_EQ(ch.get_event(), nullptr);
  EXPECT_EQ(errno, EAGAIN);
}

}  // namespace
}  // namespace uroce::verbs
