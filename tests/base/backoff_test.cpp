// The one wait loop's spin, learnt per thread (base/backoff.hpp): the rule,
// and two threads held on one CPU teaching each other not to spin.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/backoff.hpp"

namespace loom {
namespace {

using std::chrono::nanoseconds;
using Phase = Backoff::Phase;

TEST(BackoffSpin, AYieldThatGaveTheCpuAwayHalvesItAndAnythingElseDoublesIt) {
  EXPECT_EQ(Backoff::learnt(nanoseconds(20000), Phase::Yield, true), nanoseconds(10000));
  EXPECT_EQ(Backoff::learnt(nanoseconds(400), Phase::Yield, true), nanoseconds(0));  // below the least: none
  EXPECT_EQ(Backoff::learnt(nanoseconds(0), Phase::Yield, true), nanoseconds(0));
  EXPECT_EQ(Backoff::learnt(nanoseconds(0), Phase::Yield, false), nanoseconds(250));  // no one else wanted the CPU
  EXPECT_EQ(Backoff::learnt(nanoseconds(4000), Phase::Spin, false), nanoseconds(8000));
  EXPECT_EQ(Backoff::learnt(nanoseconds(15000), Phase::Spin, false), Backoff::kSpin);  // capped
  EXPECT_EQ(Backoff::learnt(nanoseconds(3000), Phase::Sleep, true), nanoseconds(3000));  // a long wait teaches nothing
}

// Pins the calling thread to one CPU for its lifetime.
void pinTo(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
}

// Two threads on one CPU hand a counter back and forth through the wait
// loop: every yield gives the CPU to the other, so both stop spinning; a
// thread that has not waited still spins the whole kSpin.
TEST(BackoffSpin, TwoThreadsOnOneCpuStopSpinningForEachOther) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  constexpr int kHandOffs = 200;
  std::atomic<int> turn{0};
  std::atomic<long> spinA{-1}, spinB{-1};
  auto player = [&](int parity, std::atomic<long>& spinOut) {
    pinTo(cpu);
    for (int i = parity; i < kHandOffs; i += 2) {
      {
        Backoff backoff;
        while (turn.load(std::memory_order_acquire) != i) backoff.idle([](Phase) {}, [](auto) {});
      }
      turn.store(i + 1, std::memory_order_release);
    }
    spinOut = static_cast<long>(Backoff::threadSpin().count());
  };
  std::thread a(player, 0, std::ref(spinA));
  std::thread b(player, 1, std::ref(spinB));
  a.join();
  b.join();
  EXPECT_LT(spinA.load(), nanoseconds(Backoff::kSpin).count() / 4);
  EXPECT_LT(spinB.load(), nanoseconds(Backoff::kSpin).count() / 4);
  EXPECT_EQ(Backoff::threadSpin(), nanoseconds(Backoff::kSpin));  // this thread never waited
}

}  // namespace
}  // namespace loom
