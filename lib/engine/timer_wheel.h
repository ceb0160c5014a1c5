/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A hashed timing wheel (Varghese and Lauck, SOSP 1987) for the engine's
// transport timers: local ACK timeouts, RNR waits, gate retries. Every QP
// has at most one entry: its next deadline. Scheduling and expiring are
// O(1) per entry; advancing costs one slot per tick passed, bounded by a
// full turn. Deadlines past one turn wait in their slot for later turns.

#include <cstdint>
#include <vector>

namespace uroce::engine {

template <typename T>
class TimerWheel {
 public:
  using Nanos = std::uint64_t;

  /// `slots` buckets of `tick` nanoseconds each (one turn = slots x tick).
  TimerWheel(Nanos tick, std::size_t slots) : tick_(tick), slots_(slots) {}

  /// Arms `item` for `when` (absolute). An item may be armed more than
  /// once; the caller ignores expiries that no longer hold.
  void schedule(T item, Nanos when) {
    if (now_tick_ == kUnset) now_tick_ = when / tick_;
    const Nanos t = std::max(when / tick_, now_tick_);
    slots_[t % slots_.size()].push_back({item, when});
    ++size_;
  }

  /// Calls fn(item, when) for every entry due at or before `now`.
  template <typename F>
  void advance(Nanos now, F&& fn) {
    if (size_ == 0 || now_tick_ == kUnset) {
      now_tick_ = now / tick_;
      return;
    }
    const Nanos target = now / tick_;
    // Past a full turn every slot is due for a look: no need to walk more.
    const Nanos last = std::min(target, now_tick_ + slots_.size() - 1);
    for (Nanos t = now_tick_; t <= last; ++t) {
      auto& slot = slots_[t % slots_.size()];
      for (std::size_t i = 0; i < slot.size();) {
        if (slot[i].when <= now) {
          const Entry e = slot[i];
          slot[i] = slot.back();
          slot.pop_back();
          --size_;
          fn(e.item, e.when);
        } else {
          ++i;  // a later turn's entry
        }
      }
    }
    now_tick_ = target;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr Nanos kUnset = ~Nanos{0};
  struct Entry {
    T item;
    Nanos when;
  };
  Nanos tick_;
  std::vector<std::vector<Entry>> slots_;
  Nanos now_tick_ = kUnset;
  std::size_t size_ = 0;
};

}  // namespace uroce::engine
