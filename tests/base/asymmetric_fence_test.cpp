// The split store-load fence (base/asymmetric_fence.hpp) on the litmus test
// it exists for, store buffering: one side stores x and loads y, the other
// stores y and loads x, each with its half of the fence between. Without a
// fence the CPU may let each load pass its own store, and both load the 0
// from before (x86's store buffer does so within a few thousand rounds
// here); with the fence at least one side sees the other's store. Run
// between two threads of one process and between two processes, as the
// shared segment's posters and sleepers are, split and unsplit.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "base/asymmetric_fence.hpp"

namespace loom {
namespace {

constexpr uint32_t kRounds = 20000;

// What both sides share, in memory both processes map where they are two.
struct Litmus {
  std::atomic<uint32_t> arrived{0};  // both sides' arrivals at each round's start, 2 a round
  std::atomic<int> x{0};
  std::atomic<int> y{0};
  std::atomic<int> seenByLight{0};  // what the light side loaded of y in the round
  std::atomic<int> seenByHeavy{0};  // what the heavy side loaded of x
  std::atomic<uint32_t> finished{0};  // both sides' ends of each round, 2 a round
  std::atomic<uint32_t> bothMissed{0};  // rounds in which neither side saw the other's store
};

// Waits until `count` reaches `until`: the two sides start and end each
// round together, so that their stores and loads overlap.
void meet(std::atomic<uint32_t>& count, uint32_t until) {
  count.fetch_add(1, std::memory_order_acq_rel);
  while (count.load(std::memory_order_acquire) < until) {
  }
}

// A few nanoseconds to some hundreds: the side that learns of the meeting
// last starts that much later, so each round shifts one side against the
// other by another amount, and some rounds line their stores up.
void delay(uint32_t steps) {
  for (uint32_t i = 0; i < steps; ++i) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // a step the compiler keeps
  }
}
uint32_t lightDelay(uint32_t round) { return (round % 16) * 4; }
uint32_t heavyDelay(uint32_t round) { return (round / 16 % 16) * 4; }

// The side that posts: store, light half, load. It also resets the round's
// stores once both sides have finished the round before, and counts misses.
void lightSide(Litmus& t, const AsymmetricFence& fence) {
  for (uint32_t round = 0; round < kRounds; ++round) {
    meet(t.arrived, 2 * (round + 1));
    delay(lightDelay(round));
    t.x.store(1, std::memory_order_relaxed);
    fence.light();
    t.seenByLight.store(t.y.load(std::memory_order_relaxed), std::memory_order_relaxed);
    meet(t.finished, 2 * (round + 1));
    if (t.seenByLight.load(std::memory_order_relaxed) == 0 && t.seenByHeavy.load(std::memory_order_relaxed) == 0) {
      t.bothMissed.fetch_add(1, std::memory_order_relaxed);
    }
    t.x.store(0, std::memory_order_relaxed);
    t.y.store(0, std::memory_order_relaxed);
    // The next round's arrival (acq_rel) publishes the reset to the other side.
  }
}

// The side that sleeps: store, heavy half, load.
void heavySide(Litmus& t, const AsymmetricFence& fence) {
  for (uint32_t round = 0; round < kRounds; ++round) {
    meet(t.arrived, 2 * (round + 1));
    delay(heavyDelay(round));
    t.y.store(1, std::memory_order_relaxed);
    fence.heavy();
    t.seenByHeavy.store(t.x.load(std::memory_order_relaxed), std::memory_order_relaxed);
    meet(t.finished, 2 * (round + 1));
  }
}

uint32_t missesBetweenThreads(bool split) {
  const AsymmetricFence fence(split);
  Litmus t;
  std::thread heavy([&] { heavySide(t, fence); });
  lightSide(t, fence);
  heavy.join();
  return t.bothMissed.load();
}

// The heavy side in a child process, as a sleeping rank of another process.
uint32_t missesBetweenProcesses(bool split) {
  void* shared = mmap(nullptr, sizeof(Litmus), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(shared, MAP_FAILED);
  if (shared == MAP_FAILED) return kRounds;
  auto* t = new (shared) Litmus;
  const pid_t child = fork();
  if (child == 0) {
    // Its own memory map: registered anew, as a forked rank's NodeArea does.
    const bool registered = AsymmetricFence::registerProcess();
    heavySide(*t, AsymmetricFence(split && registered));
    _exit(split && !registered ? 3 : 0);
  }
  EXPECT_GT(child, 0);
  lightSide(*t, AsymmetricFence(split));
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not register: " << status;
  const uint32_t misses = t->bothMissed.load();
  t->~Litmus();
  munmap(shared, sizeof(Litmus));
  return misses;
}

TEST(AsymmetricFence, SplitHalvesKeepStoreBufferingAwayBetweenThreads) {
  if (!AsymmetricFence::registerProcess()) GTEST_SKIP() << "the kernel offers no expedited global membarrier";
  EXPECT_EQ(missesBetweenThreads(true), 0u);
}

TEST(AsymmetricFence, SplitHalvesKeepStoreBufferingAwayBetweenProcesses) {
  if (!AsymmetricFence::registerProcess()) GTEST_SKIP() << "the kernel offers no expedited global membarrier";
  EXPECT_EQ(missesBetweenProcesses(true), 0u);
}

TEST(AsymmetricFence, UnsplitHalvesAreFullFences) {
  EXPECT_EQ(missesBetweenThreads(false), 0u);
  EXPECT_EQ(missesBetweenProcesses(false), 0u);
}

}  // namespace
}  // namespace loom
