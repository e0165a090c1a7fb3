// How a waiter with nothing to do spends its time: the one wait loop of Loom,
// which the progress engine (comm/engine/wait.cpp), the collectives' links
// (collectives/links.cpp) and the node segment (collectives/shm/node_area.cpp)
// all turn. It spins first (a peer on another core answers in about 0.1 µs),
// then yields (ranks may outnumber cores, and a spinning rank would starve the
// one it waits for), then sleeps with a bounded timeout in what the waiter
// can be woken by (poll on its sockets, a futex on the segment): deadlines,
// aborts and dead peers must still be checked, and shared memory has no fd.
//
// How long to spin is learnt per thread. Spinning pays only while the peer
// runs on another CPU; when the host keeps a waiter and the rank it waits
// for on one CPU (seen on the 2-vCPU VMs in about one run in ten: two ranks
// then took 42 µs per hand-off instead of 1), every spin is time the peer
// cannot run. So a wait that ended just after a yield that gave the CPU away
// halves the thread's spin, and a wait that ended while spinning, or after
// yields that gave nothing away (no one else wanted this CPU), doubles it,
// up to kSpin.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <functional>

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

  // A yield that took longer than this gave the CPU to another thread: one
  // that finds no one takes about 0.16 µs here, and one that hands the CPU to
  // a peer and gets it back after the peer's step about 1.1 µs.
  static constexpr auto kGaveAway = std::chrono::nanoseconds(500);

  // Pause hints of a spinning turn, after which the waiter looks again. A
  // pause takes 27 ns on the project's AMD EPYC VMs (about 40 on Intel from
  // Skylake on): 16 a turn made a look every 0.45 us, longer than a hand-off
  // between cores takes, and a point-to-point message waited for it twice.
  static constexpr int kPausesPerTurn = 2;
  // Spinning turns between two readings of the clock (26 ns here), which
  // only tell the spin when to stop.
  static constexpr unsigned kTurnsPerClock = 8;

  // `spin`: false when the waiters outnumber the cores, where spinning only
  // delays the rank being waited for (it starts at Yield).
  explicit Backoff(bool spin = true) : spin_(spin) {}
  // The wait is over: what it showed goes into the thread's spin.
  ~Backoff() { learn(); }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // Something moved: start over.
  void reset() {
    learn();
    idle_ = false;
    turns_ = 0;
    sleep_ = kFirstSleep;
  }
  // Nothing moved: the phase to wait in now.
  Phase next();
  // How long to sleep in the Sleep phase this time (each call doubles it, up to kSleep).
  std::chrono::microseconds sleepTime();

  // One turn of a waiter that found nothing new: kPausesPerTurn pause hints
  // while spinning; otherwise `check(phase)` first (deadline, abort, peers; it
  // throws to end the wait), then a yield, or `sleep(sleepTime())`, which
  // blocks at most that long on whatever can wake the waiter.
  template <class Check, class Sleep>
  void idle(Check&& check, Sleep&& sleep) {
    const Phase phase = next();
    if (phase == Phase::Spin) {
      for (int i = 0; i < kPausesPerTurn; ++i) cpuRelax();
      return;
    }
    check(phase);
    if (phase == Phase::Yield) {
      const auto before = std::chrono::steady_clock::now();
      ::sched_yield();
      gaveAway_ = std::chrono::steady_clock::now() - before > kGaveAway;
    } else {
      sleep(sleepTime());
    }
  }

  // This thread's spin now (what the waits taught it), and the rule that
  // teaches it: the spin after a wait that ended in `phase`, the last yield
  // having given the CPU away or not.
  static std::chrono::nanoseconds threadSpin();
  static std::chrono::nanoseconds learnt(std::chrono::nanoseconds spin, Phase phase, bool gaveAway);

 private:
  void learn();

  bool spin_;
  bool idle_ = false;
  unsigned turns_ = 0;         // spinning turns since the clock was read
  Phase phase_ = Phase::Spin;  // the last next() gave
  bool gaveAway_ = false;      // the last yield did
  std::chrono::steady_clock::time_point since_{};
  std::chrono::microseconds sleep_ = kFirstSleep;
};

// `d` as the timespec that ppoll and futex take.
timespec toTimespec(std::chrono::microseconds d);

// True if `ranks` busy waiters would outnumber the CPUs this process may run on.
bool oversubscribed(int ranks);

// Returns once `done()` holds, asking it at every turn of the back-off and
// sleeping between (nothing can wake the waiter: a device's progress, a word
// another thread writes); `check()` runs on every idle turn after the spin
// and throws to give up (an abort, a deadline). The device path's waits.
void pollUntil(const std::function<bool()>& done, const std::function<void()>& check = {});

}  // namespace loom
