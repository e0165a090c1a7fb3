// The executor seam (collectives/executor.hpp): which executor runs a call's
// buffers, what the host executor computes, and a device executor never
// being handed an algorithm that touches memory by hand.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/cpu/host_executor.hpp"
#include "collectives/executor.hpp"
#include "collectives/tuner.hpp"
#include "tests/support/ranks.hpp"

namespace loom::coll {
namespace {

using loom::test::ScopedEnv;
using memory::MemoryKind;

constexpr std::array<CollectiveKind, kCollectiveKinds> kAllKinds{
    CollectiveKind::Broadcast, CollectiveKind::Reduce,   CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
    CollectiveKind::AllGather, CollectiveKind::AlltoAll, CollectiveKind::Gather,    CollectiveKind::Scatter};

// What the tuner sees of a CUDA executor: it reaches device memory and is
// not the host's. Nothing here runs data.
class DeviceLikeExecutor final : public Executor {
 public:
  const char* name() const override { return "device-like"; }
  bool reaches(MemoryKind kind) const override { return kind == MemoryKind::CudaDevice; }
  bool isHost() const override { return false; }
  void copy(std::byte*, const std::byte*, size_t) const override { ADD_FAILURE() << "copy"; }
  void reduce(loomDataType_t, cpu::ReduceOp, std::span<const void* const>, void*, size_t, double) const override {
    ADD_FAILURE() << "reduce";
  }
  void divide(loomDataType_t, void*, size_t, uint64_t) const override { ADD_FAILURE() << "divide"; }
  std::unique_ptr<Primitives> primitives(Links&, int, int, const PrimitiveCall&) const override { return nullptr; }
};

TEST(ExecutorFor, HostMemoryOfEveryKindRunsOnTheCpu) {
  for (MemoryKind send : {MemoryKind::Host, MemoryKind::HostShared, MemoryKind::CudaHostPinned}) {
    for (MemoryKind recv : {MemoryKind::Host, MemoryKind::HostShared, MemoryKind::CudaHostPinned}) {
      Collective c;
      c.sendKind = send;
      c.recvKind = recv;
      EXPECT_STREQ(executorFor(c).name(), "cpu");
      EXPECT_TRUE(executorFor(c).isHost());
    }
  }
}

TEST(ExecutorFor, MemoryNoExecutorReachesIsRefusedNamingTheBuffer) {
  for (const std::string buffer : {"sendbuff", "recvbuff"}) {
    Collective c;
    (buffer == "sendbuff" ? c.sendKind : c.recvKind) = MemoryKind::CudaDevice;
    try {
      executorFor(c);
      FAIL() << "device memory found an executor in a build without one";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), loomInvalidUsage);
      EXPECT_NE(std::string(e.what()).find(buffer), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cuda-device"), std::string::npos) << e.what();
    }
  }
}

TEST(HostExecutor, CopiesReducesAndDividesOnTheCpu) {
  const Executor& cpu = hostExecutor();
  std::vector<int32_t> a{1, -2, 3, 40}, b{10, 20, -30, 4}, out(4, 0);
  cpu.copy(reinterpret_cast<std::byte*>(out.data()), reinterpret_cast<const std::byte*>(a.data()), 16);
  EXPECT_EQ(out, a);
  const std::array<const void*, 2> sources{a.data(), b.data()};
  cpu.reduce(loomInt32, cpu::ReduceOp::Sum, sources, out.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{11, 18, -27, 44}));
  cpu.reduce(loomInt32, cpu::ReduceOp::Max, sources, out.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{10, 20, 3, 40}));
  cpu.divide(loomInt32, out.data(), 4, 3);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 6, 1, 13}));
}

// A device executor has an algorithm for every collective, and is never
// given one of the node segment's, which the CPU runs by hand.
TEST(TunerWithADeviceExecutor, NeverPicksAHostOnlyAlgorithm) {
  const DeviceLikeExecutor device;
  for (Layout layout : {Layout{.nranks = 4, .nodes = 1, .sharedMemory = true},
                        Layout{.nranks = 4, .nodes = 2, .sharedMemory = false, .ranksPerNode = 2},
                        Layout{.nranks = 8, .nodes = 1, .sharedMemory = true}}) {
    Tuner tuner(layout, Overrides{});
    for (CollectiveKind kind : kAllKinds) {
      for (size_t bytes : {size_t{0}, size_t{8}, size_t{64} << 10, size_t{16} << 20, size_t{1} << 30}) {
        const Choice onDevice = tuner.choose(kind, bytes, device);
        ASSERT_NE(onDevice.algorithm, nullptr);
        EXPECT_FALSE(onDevice.algorithm->hostOnly()) << collectiveName(kind) << " " << bytes << ": "
                                                     << onDevice.algorithm->name;
        EXPECT_EQ(onDevice.algorithm->kind, kind);
      }
    }
  }
  // The same tuner still gives the host the segment (the choice is not cached across executors).
  Tuner tuner({.nranks = 4, .nodes = 1, .sharedMemory = true}, Overrides{});
  EXPECT_STRNE(tuner.choose(CollectiveKind::AllReduce, 1 << 20, device).algorithm->name, "shm");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).algorithm->name, "shm");
  EXPECT_STRNE(tuner.choose(CollectiveKind::AllReduce, 1 << 20, device).algorithm->name, "shm");
}

TEST(TunerWithADeviceExecutor, LoomAlgoForcingTheSegmentIsRefusedByName) {
  const DeviceLikeExecutor device;
  ScopedEnv algo("LOOM_ALGO", "shm");
  Tuner tuner({.nranks = 4, .nodes = 1, .sharedMemory = true}, Overrides::fromEnv());
  try {
    tuner.choose(CollectiveKind::AllReduce, 1024, device);
    FAIL() << "LOOM_ALGO=shm was accepted for a device executor";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("LOOM_ALGO: shm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device-like"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 1024, hostExecutor()).algorithm->name, "shm");
}

TEST(TunerWithADeviceExecutor, DeterministicReductionsStillHaveARankOrderFold) {
  const DeviceLikeExecutor device;
  Overrides overrides;
  overrides.deterministic = true;
  Tuner tuner({.nranks = 4, .nodes = 1, .sharedMemory = true}, overrides);
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::Reduce, CollectiveKind::ReduceScatter}) {
    const Choice choice = tuner.choose(kind, 1 << 20, device);
    EXPECT_TRUE(choice.algorithm->foldsInRankOrder) << collectiveName(kind) << ": " << choice.algorithm->name;
    EXPECT_FALSE(choice.algorithm->hostOnly()) << collectiveName(kind);
  }
}

}  // namespace
}  // namespace loom::coll
