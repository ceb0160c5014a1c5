/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Counters, written once for every layer. A set is keyed by an enum whose
// last member is kCount, and its names come from a constexpr `name(E)`
// found next to the enum: a switch without a default, so that a counter
// added without a name fails to compile (-Wswitch, an error here), as
// rxe's designated initialisers ([RXE_CNT_SENT_PKTS] = "sent_pkts") make
// their order impossible to get wrong.
//
// One thread writes a counter (the engine's); any thread may read it.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace uroce::counters {

/// One counter cell: written by one thread, read by any. The write is a
/// relaxed load and store, not a locked add: there is one writer.
class Counter {
 public:
  void add(std::uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void set(std::uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  std::uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

/// How many members an enum of counters has (its kCount).
template <typename E>
inline constexpr std::size_t kCountOf = static_cast<std::size_t>(E::kCount);

/// Whether every member of E has a name.
template <typename E>
constexpr bool all_named() {
  for (std::size_t i = 0; i < kCountOf<E>; ++i)
    if (name(static_cast<E>(i)).empty()) return false;
  return true;
}

template <typename E>
class CounterSet {
  static_assert(all_named<E>(), "every counter needs a name");

 public:
  static constexpr std::size_t kSize = kCountOf<E>;

  void inc(E c, std::uint64_t n = 1) { v_[static_cast<std::size_t>(c)].add(n); }
  void set(E c, std::uint64_t v) { v_[static_cast<std::size_t>(c)].set(v); }
  std::uint64_t get(E c) const { return v_[static_cast<std::size_t>(c)].get(); }

  /// Calls fn(name, value) for every counter, in enum order.
  template <typename F>
  void for_each(F&& fn) const {
    for (std::size_t i = 0; i < kSize; ++i) fn(name(static_cast<E>(i)), v_[i].get());
  }

 private:
  std::array<Counter, kSize> v_{};
};

}  // namespace uroce::counters
