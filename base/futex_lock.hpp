// A lock for state that one thread at a time uses unless a program mixes
// threads on it: a communicator's collectives (collectives/comm_state.hpp),
// taken once a call. Taking and giving it back are one atomic instruction
// each where no one waits (a std::mutex costs some 55 instructions through
// glibc, a thirtieth of a small call); a waiter spins briefly, as the holder
// may be about to give it back, then sleeps on a futex until woken. The three
// states are Drepper's ("Futexes Are Tricky", his third mutex).
#pragma once

#include <atomic>
#include <cstdint>

namespace loom {

class FutexLock {
 public:
  FutexLock() = default;
  FutexLock(const FutexLock&) = delete;
  FutexLock& operator=(const FutexLock&) = delete;

  void lock() {
    uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) {
      waitForIt();
    }
  }
  bool try_lock() {
    uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kWaitedFor) wakeOne();
  }

 private:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kHeld = 1;       // and no one sleeps on it
  static constexpr uint32_t kWaitedFor = 2;  // held, and a thread may sleep on it

  void waitForIt();
  void wakeOne();

  std::atomic<uint32_t> state_{kFree};
};

}  // namespace loom
