#include "base/futex_lock.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/backoff.hpp"

namespace loom {
namespace {

// Looks at the lock before a waiter sleeps: about a microsecond.
constexpr int kSpins = 32;

// Private futexes: the lock lives in this process's memory alone.
void futex(std::atomic<uint32_t>& word, int op, uint32_t value) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value, nullptr, nullptr, 0);
}

}  // namespace

void FutexLock::waitForIt() {
  for (int i = 0; i < kSpins; ++i) {
    uint32_t expected = kFree;
    if (state_.load(std::memory_order_relaxed) == kFree &&
        state_.compare_exchange_weak(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    cpuRelax();
  }
  // From here this thread may sleep, so it marks the lock waited for: the
  // holder's unlock then wakes one sleeper. A thread that takes the lock so
  // leaves it marked, which costs at most one needless wake.
  while (state_.exchange(kWaitedFor, std::memory_order_acquire) != kFree) {
    futex(state_, FUTEX_WAIT, kWaitedFor);  // returns at once if the word is no longer kWaitedFor
  }
}

void FutexLock::wakeOne() { futex(state_, FUTEX_WAKE, 1); }

}  // namespace loom
