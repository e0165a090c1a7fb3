// How a waiter with nothing to do spends its time. It spins first (a peer on
// another core answers in about 0.1 µs), then yields (ranks may outnumber
// cores, and a spinning rank would starve the one it waits for), then sleeps
// in poll() with a bounded timeout: sockets wake it at once, shared memory has
// no fd to wake it, and deadlines and aborts must still be checked.
#pragma once

#include <time.h>

#include <chrono>

namespace loom {

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

// One pause of a spin loop (the CPU's pause/yield hint).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace loom
