/* SPDX-License-Identifier: BSD-3-Clause */
#include "engine/timer_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace uroce::engine {
namespace {

TEST(TimerWheel, ExpiresEachEntryOnceAtOrAfterItsDeadline) {
  TimerWheel<int> w(1000, 64);  // 1 us ticks, 64 us a turn
  w.schedule(1, 5'500);
  w.schedule(2, 5'000);
  w.schedule(3, 200'000);  // three turns ahead
  std::vector<std::pair<int, std::uint64_t>> fired;
  auto collect = [&](int item, std::uint64_t when) { fired.push_back({item, when}); };
  w.advance(4'999, collect);
  EXPECT_TRUE(fired.empty());
  w.advance(5'000, collect);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].first, 2);
  w.advance(70'000, collect);  // past a full turn
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[1].first, 1);
  w.advance(199'999, collect);
  EXPECT_EQ(fired.size(), 2u) << "a later turn's entry waits";
  w.advance(200'000, collect);
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[2].first, 3);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, AgreesWithASortedMapOnRandomSchedules) {
  std::mt19937_64 rng(5);
  TimerWheel<int> w(1000, 128);
  std::multimap<std::uint64_t, int> ref;
  std::uint64_t now = 1'000'000;
  int next = 0;
  for (int step = 0; step < 5000; ++step) {
    for (int k = rng() % 3; k > 0; --k) {
      const std::uint64_t when = now + rng() % 400'000;
      w.schedule(next, when);
      ref.insert({when, next++});
    }
    now += rng() % 20'000;
    std::vector<int> got;
    w.advance(now, [&](int item, std::uint64_t when) {
      EXPECT_LE(when, now);
      got.push_back(item);
    });
    std::vector<int> want;
    while (!ref.empty() && ref.begin()->first <= now) {
      want.push_back(ref.begin()->second);
      ref.erase(ref.begin());
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(got, want) << "at step " << step;
  }
}

}  // namespace
}  // namespace uroce::engine
