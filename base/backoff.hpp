// How a waiter with nothing to do spends its time: the one wait loop of Loom,
// which the progress engine (comm/engine/wait.cpp), the collectives' links
// (collectives/links.cpp) and the node segment (collectives/shm/node_area.cpp)
// all turn. It spins first (a peer on another core answers in about 0.1 µs),
// then yields (ranks may outnumber cores, and a spinning rank would starve the
// one it waits for), then sleeps with a bounded timeout in what the waiter
// can be woken by (poll on its sockets, a futex on the segment): deadlines,
// aborts and dead peers must still be checked, and shared memory has no fd.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>

namespace loom {

// One pause of a spin loop (the CPU's pause/yield hint).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Backoff {
 public:
  enum class Phase { Spin, Yield, Sleep };

  static constexpr auto kSpin = std::chrono::microseconds(20);
  static constexpr auto kYield = std::chrono::microseconds(1000);
  // Sleeps start short and double up to kSleep: shared memory has no fd to
  // wake a sleeper, so a first sleep of kSleep would cost a whole millisecond
  // each time ranks outnumber cores, while long waits still cost few wake-ups.
  static constexpr auto kFirstSleep = std::chrono::microseconds(50);
  static constexpr auto kSleep = std::chrono::microseconds(1000);

  // `spin`: false when the waiters outnumber the cores, where spinning only
  // delays the rank being waited for (it starts at Yield).
  explicit Backoff(bool spin = true) : spin_(spin) {}

  // Something moved: start over.
  void reset() {
    idle_ = false;
    sleep_ = kFirstSleep;
  }
  // Nothing moved: the phase to wait in now.
  Phase next();
  // How long to sleep in the Sleep phase this time (each call doubles it, up to kSleep).
  std::chrono::microseconds sleepTime();

  // One turn of a waiter that found nothing new: a few pause hints while
  // spinning; otherwise `check(phase)` first (deadline, abort, peers; it
  // throws to end the wait), then a yield, or `sleep(sleepTime())`, which
  // blocks at most that long on whatever can wake the waiter.
  template <class Check, class Sleep>
  void idle(Check&& check, Sleep&& sleep) {
    const Phase phase = next();
    if (phase == Phase::Spin) {
      for (int i = 0; i < 16; ++i) cpuRelax();
      return;
    }
    check(phase);
    if (phase == Phase::Yield) {
      ::sched_yield();
    } else {
      sleep(sleepTime());
    }
  }

 private:
  bool spin_;
  bool idle_ = false;
  std::chrono::steady_clock::time_point since_{};
  std::chrono::microseconds sleep_ = kFirstSleep;
};

// `d` as the timespec that ppoll and futex take.
timespec toTimespec(std::chrono::microseconds d);

// True if `ranks` busy waiters would outnumber the CPUs this process may run on.
bool oversubscribed(int ranks);

}  // namespace loom
