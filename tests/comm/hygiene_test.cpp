// Resource hygiene: nothing a communicator opened outlives it. After normal
// runs, aborts and timeouts, on shared memory and on sockets, this process
// is back to the file descriptors and threads it had before, and /dev/shm
// holds no segment of this process.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ranks.hpp"
#include "tests/support/transports.hpp"

namespace {

using loom::test::ScopedEnv;

size_t entries(const std::string& dir, const std::string& prefix = "") {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  }
  return n;
}

struct Footprint {
  size_t fds;
  size_t threads;
  size_t segments;  // /dev/shm/loom-<this pid>-*

  static Footprint now() {
    return {entries("/proc/self/fd"), entries("/proc/self/task"),
            entries("/dev/shm", "loom-" + std::to_string(::getpid()) + "-")};
  }
  bool operator==(const Footprint&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Footprint& f) {
  return os << f.fds << " fds, " << f.threads << " threads, " << f.segments << " segments";
}

// Threads that were joined are gone at once, but give the kernel a moment
// to drop their task entries before calling it a leak.
void expectBackTo(const Footprint& before, const std::string& after) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Footprint now = Footprint::now();
  while (!(now == before) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = Footprint::now();
  }
  std::string fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    fds += " " + e.path().filename().string() + "->" + std::filesystem::read_symlink(e.path(), ec).string();
  }
  EXPECT_EQ(now, before) << "after " << after << "; open now:" << fds;
}

void allReduceEverywhere(std::vector<loomComm_t>& comms, size_t count) {
  loom::test::onThreads(static_cast<int>(comms.size()), [&](int r) {
    std::vector<float> x(count, 1.0f);
    EXPECT_EQ(loomAllReduce(x.data(), x.data(), count, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr),
              loomSuccess);
    EXPECT_EQ(x[count - 1], static_cast<float>(comms.size()));
  });
}

// Whatever a process sets up once and keeps (the topology cache, the
// logger, a sanitizer's own thread), so that only what a communicator
// leaves behind counts.
Footprint warmUp() {
  auto comms = loom::test::initThreadComms(2);
  allReduceEverywhere(comms, 1000);
  loom::test::destroyAll(comms);
  return Footprint::now();
}

class Hygiene : public ::testing::TestWithParam<const char*> {};

TEST_P(Hygiene, CommunicatorsLeaveNothingBehind) {
  loom::test::TransportScope transport(GetParam());
  ScopedEnv algo("LOOM_ALGO", std::string(GetParam()) == "shm" ? "" : "ring");
  const Footprint before = warmUp();

  {
    auto comms = loom::test::initThreadComms(3);
    allReduceEverywhere(comms, 7);
    allReduceEverywhere(comms, 300000);  // several steps and FIFO laps
    loom::test::destroyAll(comms);
  }
  expectBackTo(before, "collectives and destroy");

  {
    ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
    auto comms = loom::test::initThreadComms(2);
    std::thread waiter([&] {
      float x = 1;
      EXPECT_NE(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), loomSuccess);
    });
    EXPECT_EQ(loom::test::abortOnceInside(comms[0]), loomSuccess);
    waiter.join();
    EXPECT_EQ(loomCommAbort(comms[1]), loomSuccess);
  }
  expectBackTo(before, "an abort during a collective");

  {
    ScopedEnv timeout("LOOM_TIMEOUT_MS", "500");
    auto comms = loom::test::initThreadComms(2);
    float x = 1;
    EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), loomTimeout);
    loom::test::destroyAll(comms);
  }
  expectBackTo(before, "a timed-out collective");
}

INSTANTIATE_TEST_SUITE_P(Transports, Hygiene, ::testing::ValuesIn(loom::test::threadTransportsUnderTest()),
                         loom::test::transportName);

// Buffers from loomMemAlloc, read in place by the other ranks (which map
// them through /proc/<pid>/fd): freed and destroyed, they leave no fd.
TEST(Hygiene, LoomMemAllocBuffersLeaveNoMapping) {
  const Footprint before = warmUp();
  {
    auto comms = loom::test::initThreadComms(2);
    loom::test::onThreads(2, [&](int r) {
      const size_t count = 300000;
      void* buffer = nullptr;
      ASSERT_EQ(loomMemAlloc(&buffer, count * sizeof(float)), loomSuccess);
      auto* x = static_cast<float*>(buffer);
      for (size_t i = 0; i < count; ++i) x[i] = 1.0f;
      EXPECT_EQ(loomAllReduce(x, x, count, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr), loomSuccess);
      EXPECT_EQ(x[count - 1], 2.0f);
      EXPECT_EQ(loomMemFree(buffer), loomSuccess);
    });
    loom::test::destroyAll(comms);
  }
  expectBackTo(before, "loomMemAlloc buffers");
}

}  // namespace
