// The shared-memory collectives on device buffers read in place
// (algorithms/shm_*.cpp: all-reduce, all-gather, reduce-scatter, broadcast,
// reduce, all-to-all, gather, scatter; averages and PreMulSum scaled and
// divided by the device, run.cpp):
// ranks as threads and as processes, every rank's buffers on the device, or
// one rank's on the host (every rank then starts over on the staged path).
// On a GPU the processes open each other's buffers through CUDA IPC; on the
// fake device (CI) they map each other's memfds, so that the host side of
// the path (the offer, the decision, the steps, the two shots) runs here too.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/device/staging.hpp"
#include "tests/support/counters.hpp"
#include "tests/support/device_memory.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/text_match.hpp"

namespace loom::test {
namespace {

bool fake() { return std::string(deviceMemoryKind()) == "fake"; }

// Past one 256 KiB slot of the node's segment (where buffers are offered) in
// each type the program runs, bfloat16 too.
constexpr size_t kLarge = 150001;

// Int32 sums of n thread ranks, rank `hostRank`'s buffers on the host (-1:
// none), rank r's on GPU r % gpus.
void allReduceOnThreads(int n, size_t count, int hostRank, bool inPlace, int gpus = 1) {
  auto comms = initThreadComms(n);
  onThreads(n, [&](int r) {
    cuda::setCurrentDevice(r % gpus);
    std::vector<int32_t> in(count), out(count), expected(count);
    for (size_t i = 0; i < count; ++i) {
      in[i] = static_cast<int32_t>(i * 31 + static_cast<size_t>(r) * 1000003);
      expected[i] = 0;
      for (int q = 0; q < n; ++q) expected[i] += static_cast<int32_t>(i * 31 + static_cast<size_t>(q) * 1000003);
    }
    const size_t bytes = count * sizeof(int32_t);
    DeviceBuffer dsend(bytes), drecv(bytes);
    dsend.upload(in.data());
    const bool device = r != hostRank;
    void* send = device ? static_cast<void*>(dsend.data()) : in.data();
    void* recv = inPlace ? send : (device ? static_cast<void*>(drecv.data()) : out.data());
    ASSERT_EQ(loomAllReduce(send, recv, count, loomInt32, loomSum, comms[static_cast<size_t>(r)], nullptr), loomSuccess)
        << loomGetLastError(comms[static_cast<size_t>(r)]);
    if (device) {
      (inPlace ? dsend : drecv).download(out.data());
    } else if (inPlace) {
      out = in;
    }
    EXPECT_EQ(out, expected) << "rank " << r << " of " << n << (device ? ", device" : ", host");
  });
  destroyAll(comms);
}

TEST(DeviceInPlace, ThreadsOnOneDeviceReadEachOthersBuffersWithoutStaging) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3, 4}) {
    for (bool inPlace : {false, true}) {
      const uint64_t staged = cuda::fakeBytesStaged();
      const uint64_t read = loom::test::counter("host_kernel_bytes");
      allReduceOnThreads(n, kLarge, -1, inPlace);
      if (fake()) {
        EXPECT_EQ(cuda::fakeBytesStaged(), staged) << n << " ranks";
        // Each rank writes its slice and copies the others': the whole output, on every rank.
        EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read, static_cast<uint64_t>(n) * kLarge * sizeof(int32_t))
            << n << " ranks";
      }
    }
  }
}

// The fake device's GPUs for a scope (fakeDeviceGpus); one again after it.
class FakeGpus {
 public:
  FakeGpus(int count, bool peerAccess) { cuda::fakeDeviceGpus(count, peerAccess); }
  ~FakeGpus() { cuda::fakeDeviceGpus(1, true); }
  FakeGpus(const FakeGpus&) = delete;
  FakeGpus& operator=(const FakeGpus&) = delete;
};

// Each rank on a GPU of its own (the fake device shows three; a GPU machine
// what it has). Where every rank's kernels may access the others' GPUs as
// peers, the ranks read each other's buffers in place as on one GPU; where
// they may not, every rank finds out (one rank alone could not see it), and
// all stage, with the same sums.
TEST(DeviceInPlace, ThreadsOnGpusOfTheirOwnReadInPlaceOnlyAsPeers) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const int gpus = fake() ? 3 : std::min(3, cuda::deviceCount());
  for (bool peers : {true, false}) {
    if (!fake() && !peers) continue;  // a GPU machine's access is what it is
    const FakeGpus shown(gpus, peers);
    for (int n : {2, 3}) {
      const uint64_t staged = cuda::fakeBytesStaged();
      const uint64_t read = loom::test::counter("host_kernel_bytes");
      allReduceOnThreads(n, kLarge, -1, false, gpus);
      if (!fake()) continue;
      if (peers) {
        EXPECT_EQ(cuda::fakeBytesStaged(), staged) << n << " ranks";
        EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read, static_cast<uint64_t>(n) * kLarge * sizeof(int32_t))
            << n << " ranks";
      } else {
        EXPECT_GT(cuda::fakeBytesStaged(), staged) << n << " ranks";
        EXPECT_EQ(loom::test::counter("host_kernel_bytes"), read) << n << " ranks";
      }
    }
  }
}

// Buffers from memory pools (cudaMallocAsync's), which peer access does not
// open to other GPUs: ranks on GPUs of their own stage them, even as peers,
// and read them in place on one GPU; the same sums.
TEST(DeviceInPlace, PoolBuffersAreReadInPlaceOnlyOnTheirOwnGpu) {
  if (!fake()) GTEST_SKIP() << "the fake device's pools";
  struct NoPools {
    ~NoPools() { cuda::fakeMemoryPools(false); }
  } noPools;
  cuda::fakeMemoryPools(true);
  for (int gpus : {3, 1}) {
    const FakeGpus shown(gpus, true);
    const uint64_t staged = cuda::fakeBytesStaged();
    const uint64_t read = loom::test::counter("host_kernel_bytes");
    allReduceOnThreads(3, kLarge, -1, false, gpus);
    if (gpus > 1) {
      EXPECT_GT(cuda::fakeBytesStaged(), staged) << "pool buffers read across GPUs";
      EXPECT_EQ(loom::test::counter("host_kernel_bytes"), read);
    } else {
      EXPECT_EQ(cuda::fakeBytesStaged(), staged) << "pool buffers on one GPU staged";
      EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read, 3 * kLarge * sizeof(int32_t));
    }
  }
}

// One thread driving two ranks in one group, NCCL's idiom for a rank per
// GPU: each call runs on the device current where it was made, not on the
// one current at loomGroupEnd, nor on a group worker's. Both ranks' buffers
// are on fake GPU 1 and the GPUs have no peer access, so a share run from
// GPU 0 would find them out of reach and stage.
TEST(DeviceInPlace, AGroupRunsEachCallOnTheDeviceItWasMadeOn) {
  if (!fake()) GTEST_SKIP() << "the fake device's GPUs without peer access; ThreadsOnGpusOfTheirOwn... runs on GPUs";
  const FakeGpus shown(2, false);
  auto comms = initThreadComms(2);
  const size_t bytes = kLarge * sizeof(int32_t);
  cuda::setCurrentDevice(1);
  DeviceBuffer first(bytes), second(bytes);
  DeviceBuffer* buffers[] = {&first, &second};
  for (size_t r = 0; r < 2; ++r) {
    std::vector<int32_t> in(kLarge);
    for (size_t i = 0; i < kLarge; ++i) in[i] = static_cast<int32_t>(i + 1000 * r);
    buffers[r]->upload(in.data());
  }
  const uint64_t staged = cuda::fakeBytesStaged();
  const uint64_t read = loom::test::counter("host_kernel_bytes");
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(loomAllReduce(buffers[r]->data(), buffers[r]->data(), kLarge, loomInt32, loomSum, comms[r], nullptr),
              loomSuccess);
  }
  cuda::setCurrentDevice(0);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[0]) << " / " << loomGetLastError(comms[1]);
  EXPECT_EQ(cuda::currentDevice(), 0) << "loomGroupEnd leaves the caller's device as it was";
  for (size_t r = 0; r < 2; ++r) {
    std::vector<int32_t> out(kLarge);
    buffers[r]->download(out.data());
    for (size_t i = 0; i < kLarge; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(2 * i + 1000)) << "rank " << r << ", " << i;
  }
  EXPECT_EQ(cuda::fakeBytesStaged(), staged);
  EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read, 2 * bytes);
  destroyAll(comms);
}

// All-gather and reduce-scatter of int32 on n thread ranks, out of place, every rank's buffers on the device.
void gatherAndScatterOnThreads(int n, size_t count) {
  auto comms = initThreadComms(n);
  onThreads(n, [&](int r) {
    const size_t nn = static_cast<size_t>(n);
    const auto value = [](int rank, size_t i) {
      return static_cast<int32_t>(i * 7 + static_cast<size_t>(rank) * 65537);
    };
    std::vector<int32_t> mine(nn * count), gathered(nn * count), scattered(count);
    for (size_t i = 0; i < nn * count; ++i) mine[i] = value(r, i);
    DeviceBuffer in(nn * count * sizeof(int32_t)), out(nn * count * sizeof(int32_t));
    in.upload(mine.data());
    loomComm_t comm = comms[static_cast<size_t>(r)];
    ASSERT_EQ(loomAllGather(in.data(), out.data(), count, loomInt32, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    out.download(gathered.data());
    for (size_t i = 0; i < nn * count; ++i) {
      ASSERT_EQ(gathered[i], value(static_cast<int>(i / count), i % count))
          << "all-gather, rank " << r << ", element " << i;
    }
    ASSERT_EQ(loomReduceScatter(in.data(), out.data(), count, loomInt32, loomSum, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    std::vector<int32_t> result(nn * count);
    out.download(result.data());
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, static_cast<size_t>(r) * count + i);
      ASSERT_EQ(result[i], sum) << "reduce-scatter, rank " << r << ", element " << i;
    }
  });
  destroyAll(comms);
}

TEST(DeviceInPlace, ThreadsAllGatherAndReduceScatterWithoutStaging) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3}) {
    const uint64_t staged = cuda::fakeBytesStaged();
    const uint64_t read = loom::test::counter("host_kernel_bytes");
    gatherAndScatterOnThreads(n, kLarge);
    if (fake()) {
      EXPECT_EQ(cuda::fakeBytesStaged(), staged) << n << " ranks";
      // All-gather writes n blocks on each rank, reduce-scatter one.
      EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read,
                static_cast<uint64_t>(n) * static_cast<uint64_t>(n + 1) * kLarge * sizeof(int32_t))
          << n << " ranks";
    }
  }
}

// Broadcast and reduce of int32 on n thread ranks (threads reach each other's
// heap buffers, so a host rank's offer may be read in place), each rank's
// input and output on the device or the host as `kinds` says (bit 0: the
// input on the device, bit 1: the output), rank r taking kinds[r % size].
void broadcastAndReduceOnThreads(int n, size_t count, const std::vector<int>& kinds) {
  auto comms = initThreadComms(n);
  const int root = 1;
  onThreads(n, [&](int r) {
    const auto value = [](int rank, size_t i) {
      return static_cast<int32_t>(i * 5 + static_cast<size_t>(rank) * 7919);
    };
    const int kind = kinds[static_cast<size_t>(r) % kinds.size()];
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
    const size_t bytes = count * sizeof(int32_t);
    DeviceBuffer din(bytes), dout(bytes);
    din.upload(in.data());
    dout.upload(out.data());
    void* send = (kind & 1) != 0 ? static_cast<void*>(din.data()) : in.data();
    void* recv = (kind & 2) != 0 ? static_cast<void*>(dout.data()) : out.data();
    const auto result = [&] {
      std::vector<int32_t> got(count);
      if ((kind & 2) != 0) {
        dout.download(got.data());
      } else {
        got = out;
      }
      return got;
    };
    loomComm_t comm = comms[static_cast<size_t>(r)];
    ASSERT_EQ(loomBroadcast(send, recv, count, loomInt32, root, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    std::vector<int32_t> got = result();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], value(root, i)) << "broadcast, rank " << r << " kind " << kind << ", element " << i;
    }
    ASSERT_EQ(loomReduce(send, recv, count, loomInt32, loomSum, root, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    if (r != root) return;
    got = result();
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, i);
      ASSERT_EQ(got[i], sum) << "reduce, root " << r << " kind " << kind << ", element " << i;
    }
  });
  destroyAll(comms);
}

TEST(DeviceInPlace, BroadcastAndReduceWithEveryMixOfMemoryKinds) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  // All on the device (read in place), all on the host, and mixes that put a
  // device buffer where it is offered or where it is not (the root's output
  // of a broadcast, a receiver's unused input, a reduce's non-root output).
  for (const std::vector<int>& kinds :
       std::vector<std::vector<int>>{{3}, {0}, {3, 2}, {1, 2, 3}, {2, 1}, {0, 3, 1}, {0, 2}, {2, 0}}) {
    broadcastAndReduceOnThreads(3, kLarge, kinds);
  }
}

// Gather, scatter and all-to-all of int32 on n thread ranks, each rank's
// input and output on the device or the host as `kinds` says (as above).
void movesOnThreads(int n, size_t count, const std::vector<int>& kinds) {
  auto comms = initThreadComms(n);
  const int root = 1;
  const size_t nn = static_cast<size_t>(n);
  onThreads(n, [&](int r) {
    const auto value = [](int rank, size_t i) {
      return static_cast<int32_t>(i * 3 + static_cast<size_t>(rank) * 104729);
    };
    const int kind = kinds[static_cast<size_t>(r) % kinds.size()];
    std::vector<int32_t> in(nn * count), out(nn * count, -1);
    for (size_t i = 0; i < nn * count; ++i) in[i] = value(r, i);
    const size_t bytes = nn * count * sizeof(int32_t);
    DeviceBuffer din(bytes), dout(bytes);
    din.upload(in.data());
    void* send = (kind & 1) != 0 ? static_cast<void*>(din.data()) : in.data();
    void* recv = (kind & 2) != 0 ? static_cast<void*>(dout.data()) : out.data();
    const auto result = [&] {
      std::vector<int32_t> got(nn * count);
      if ((kind & 2) != 0) {
        dout.download(got.data());
      } else {
        got = out;
      }
      return got;
    };
    loomComm_t comm = comms[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r) + " kind " + std::to_string(kind);
    ASSERT_EQ(loomGather(send, recv, count, loomInt32, root, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    if (r == root) {
      const std::vector<int32_t> got = result();
      for (size_t i = 0; i < nn * count; ++i) {
        ASSERT_EQ(got[i], value(static_cast<int>(i / count), i % count)) << "gather, " << where << ", element " << i;
      }
    }
    ASSERT_EQ(loomScatter(send, recv, count, loomInt32, root, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    std::vector<int32_t> got = result();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], value(root, static_cast<size_t>(r) * count + i)) << "scatter, " << where << ", element " << i;
    }
    ASSERT_EQ(loomAlltoAll(send, recv, count, loomInt32, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    got = result();
    for (size_t i = 0; i < nn * count; ++i) {
      ASSERT_EQ(got[i], value(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count))
          << "all-to-all, " << where << ", element " << i;
    }
  });
  destroyAll(comms);
}

TEST(DeviceInPlace, GatherScatterAndAlltoAllWithEveryMixOfMemoryKinds) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (const std::vector<int>& kinds : std::vector<std::vector<int>>{{3}, {0}, {3, 2}, {1, 2, 3}, {2, 1}, {0, 3, 1}}) {
    const uint64_t read = loom::test::counter("host_kernel_bytes");
    movesOnThreads(3, kLarge, kinds);
    // Every buffer on the device: each call read in place; the root of a
    // gather writes 3 blocks, every rank one of a scatter and 3 of an
    // all-to-all: 15 in all.
    if (fake() && kinds == std::vector<int>{3}) {
      EXPECT_EQ(loom::test::counter("host_kernel_bytes") - read, 15 * kLarge * sizeof(int32_t));
    }
  }
}

TEST(DeviceInPlace, ARankOnTheHostSendsEveryRankToTheStagedPath) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3}) {
    for (int hostRank : {0, n - 1}) {
      const uint64_t staged = cuda::fakeBytesStaged();
      const uint64_t read = loom::test::counter("host_kernel_bytes");
      allReduceOnThreads(n, kLarge, hostRank, false);
      if (fake()) {
        EXPECT_GT(cuda::fakeBytesStaged(), staged);
        EXPECT_EQ(loom::test::counter("host_kernel_bytes"), read);
      }
    }
  }
}

TEST(DeviceInPlace, MessagesWithinOneSlotAreStaged) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (size_t count : {size_t{0}, size_t{1}, size_t{5000}, size_t{60000}}) {
    const uint64_t read = loom::test::counter("host_kernel_bytes");
    allReduceOnThreads(3, count, -1, false);
    if (fake()) {
      EXPECT_EQ(loom::test::counter("host_kernel_bytes"), read) << count << " elements";
    }
  }
}

// A program of the build, or of $LOOM_TEST_BUILD_DIR (`folder`/name) where
// that is set: scripts/run-gpu-tests runs this test from a bundle copied to
// the GPU's machine, where the build's own paths do not exist.
std::string program(const std::string& built, const char* folder) {
  const char* root = std::getenv("LOOM_TEST_BUILD_DIR");
  if (root == nullptr || *root == '\0') return built;
  return std::string(root) + "/" + folder + "/" + built.substr(built.rfind('/') + 1);
}

// loomrun -n N loom_test_device_collectives COUNT [host-on-rank-0]: every rank's lines.
ProcessResult runRanks(int n, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {program(LOOMRUN_BIN, "tools"), "-n", std::to_string(n),
                                   program(LOOM_TEST_DEVICE_COLLECTIVES_BIN, "tests")};
  argv.insert(argv.end(), args.begin(), args.end());
  env["LOOM_TIMEOUT_MS"] = "60000";
  return runProcess(argv, env, std::chrono::seconds(120));
}

TEST(DeviceInPlace, ProcessesReadEachOthersDeviceBuffers) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3}) {
    const ProcessResult r = runRanks(n, {std::to_string(kLarge)});
    ASSERT_EQ(r.exitCode, 0) << r.output;
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": collectives ok")) << r.output;
    }
    if (fake()) {
      // Every call read in place (each collective, type, op, averages and
      // PreMulSum too, and placement), two ranks' reduce too: nothing staged.
      EXPECT_EQ(searchAll(r.output, "in place [1-9][0-9]* bytes, staged 0 bytes").size(), static_cast<size_t>(n))
          << r.output;
    }
    // Both rings of sends (8 x kLarge int32 each) went by handle to every rank.
    EXPECT_EQ(searchAll(r.output, "received by handle " + std::to_string(2 * 8 * kLarge * 4) + " bytes").size(),
              static_cast<size_t>(n))
        << r.output;
  }
}

// The resident scratch's size (LOOM_DEVICE_SCRATCH_BYTES) is every rank's:
// at 64 KiB a call of 70001 int32 goes resident in nine pieces, exact; where
// one rank's differs (it would find its peers' slots elsewhere), no rank runs
// resident calls, each says why at init, and the call still comes out exact
// through the host.
TEST(DeviceInPlace, TheResidentScratchSizeIsEveryRanksOrNoneRunsResident) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const auto everyRank = [](const ProcessResult& r, int n, const std::string& said) {
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": " + said)) << said << "\n" << r.output;
    }
  };
  {
    const ProcessResult r = runRanks(3, {"70001", "all-reduce-on-stream"}, {{"LOOM_DEVICE_SCRATCH_BYTES", "65536"}});
    ASSERT_EQ(r.exitCode, 0) << r.output;
    everyRank(r, 3, "on the stream ok");
    everyRank(r, 3, "resident calls 1");
  }
  const ProcessResult r = runRanks(2, {"70001", "scratch-differs-on-rank-1"},
                                   {{"LOOM_DEBUG", "INFO"}, {"LOOM_DEBUG_SUBSYS", "INIT"}});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  everyRank(r, 2, "on the stream ok");
  everyRank(r, 2, "resident calls 0");
  EXPECT_TRUE(contains(r.output, "no resident collectives: rank 1 has 131072 bytes of scratch \\(LOOM_DEVICE_SCRATCH_BYTES\\), "
                                 "this rank 4194304"))
      << r.output;
}

// On CUDA streams across processes: calls whose send buffers lie in
// symmetric windows read the peers' inputs through the windows' IPC views,
// and a ring of sends and receives goes resident on the stream; every
// result checked by the ranks.
TEST(DeviceInPlace, ProcessesOnStreamsReadWindowsAndSendOnTheStream) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3}) {
    const ProcessResult r = runRanks(n, {"70001", "on-stream"});
    ASSERT_EQ(r.exitCode, 0) << r.output;
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": on the stream ok")) << r.output;
      // Four calls read in windows, a send and a receive on the stream.
      EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) +
                                         ": read in windows 4 calls, resident sends and receives 2"))
          << r.output;
    }
  }
}

// On CUDA streams across processes, plain device buffers (no window): a
// rank's peers open its allocations through CUDA IPC (the fake device's
// memfds) once, and read them in place from then on, so from the third
// round of the same buffers every call and every send of more than two
// pieces is read in place with nothing copied into a scratch, every result
// exact (3 ranks with LOOM_DEVICE_TWO_SHOT_BYTES set: the all-reduce in two
// shots, its result read in place too; processes on one GPU run one shot
// unless it is set). With LOOM_CUDA_IPC_CACHE=0 nothing stays open, so
// everything goes through the scratch, exact all the same. Past one slot
// (600001 int32 a block: 3 or 4 pieces), the ranks read in place publish
// each call's pieces at once (a range), exact too; and an all-reduce in
// place in one shot there puts its result aside and is read in place as
// well, where in two shots it goes through the scratch.
TEST(DeviceInPlace, ProcessesReadEachOthersPlainBuffersInPlaceOnTheStream) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  struct Run {
    const char* count;
    const char* cache;
    const char* twoShotFrom = "";  // LOOM_DEVICE_TWO_SHOT_BYTES, unset where empty
  };
  for (int n : {2, 3}) {
    for (const Run run : {Run{"140001", "1"}, Run{"140001", "0"}, Run{"600001", "1"}, Run{"600001", "1", "524288"}}) {
      const std::string cache = run.cache;
      const std::string twoShotFrom = run.twoShotFrom;
      SCOPED_TRACE(std::to_string(n) + " ranks, " + run.count + " elements, LOOM_CUDA_IPC_CACHE=" + cache +
                   ", LOOM_DEVICE_TWO_SHOT_BYTES=" + twoShotFrom);
      std::map<std::string, std::string> env{{"LOOM_CUDA_IPC_CACHE", cache}};
      if (!twoShotFrom.empty()) env["LOOM_DEVICE_TWO_SHOT_BYTES"] = twoShotFrom;
      const ProcessResult r = runRanks(n, {run.count, "in-place-on-stream"}, env);
      ASSERT_EQ(r.exitCode, 0) << r.output;
      // 8 collectives a round, two rounds; the broadcast and the scatter
      // read only the root's (rank 1's) input.
      for (int rank = 0; rank < n; ++rank) {
        const std::string who = "rank " + std::to_string(rank) + ": ";
        EXPECT_TRUE(contains(r.output, who + "on the stream ok")) << r.output;
        const std::string calls = rank == 1 ? "16" : "12";
        const std::string readInPlace = cache == "1" ? calls + " of " + calls + " calls, 2 sends"
                                                     : "0 of " + calls + " calls, 0 sends";
        EXPECT_TRUE(contains(r.output, who + "in place from round 2: " + readInPlace)) << r.output;
        if (fake() && cache == "1") {
          EXPECT_TRUE(contains(r.output, who + "in place from round 2: .*, copied 0 bytes")) << r.output;
        }
        // An all-reduce in place of two pieces in one shot (2 ranks, or 3
        // processes on one GPU by default) puts its result aside: its input
        // read in place, nothing copied but the result back over it (4 x
        // 600001 bytes a call).
        const bool twoShots = n == 3 && !twoShotFrom.empty();
        const bool aside = std::string(run.count) == "600001" && cache == "1" && !twoShots;
        const std::string allReduce =
            who + "all-reduce in place from round 2: " + (aside ? "2" : "0") + " of 2 offered";
        EXPECT_TRUE(contains(r.output, allReduce)) << r.output;
        if (fake() && aside) {
          EXPECT_TRUE(contains(r.output, allReduce + ", copied 4800008 bytes")) << r.output;
        }
      }
    }
  }
}

// Where the GPU's memory is taken (a framework's cache may hold all of it),
// an all-reduce in place of processes finds no room for its result aside:
// it goes through the scratch as before, exact, and nothing fails.
TEST(DeviceInPlace, AnAllReduceInPlaceWithNoRoomAsideGoesThroughTheScratch) {
  if (!fake()) GTEST_SKIP() << "the fake device's allocations are the ones this test can fill";
  const ProcessResult r = runRanks(2, {"600001", "in-place-on-a-full-gpu"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string who = "rank " + std::to_string(rank) + ": ";
    EXPECT_TRUE(contains(r.output, who + "on the stream ok")) << r.output;
    EXPECT_TRUE(contains(r.output, who + "all-reduce in place from round 2: 0 of 2 offered")) << r.output;
  }
}

TEST(DeviceInPlace, ProcessesWithOneRankOnTheHostStageAndAgree) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const ProcessResult r = runRanks(3, {std::to_string(kLarge), "host-on-rank-0"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": collectives ok")) << r.output;
  }
  if (fake()) {
    EXPECT_EQ(searchAll(r.output, "\\(device\\): in place 0 bytes, staged [1-9][0-9]* bytes").size(), 2u) << r.output;
  }
  // Sends from the host rank come as bytes; the device ranks' go by handle, to the host rank's memory too.
  const std::string both = "received by handle " + std::to_string(2 * 8 * kLarge * 4) + " bytes";
  EXPECT_TRUE(contains(r.output, "rank 0: " + both)) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1: received by handle 0 bytes")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 2: " + both)) << r.output;
}

// Forced onto the ring and direct algorithms, which stage device buffers as
// the algorithms across nodes do, every collective runs in pieces on every
// rank, the host rank's too, and stays exact. Of COUNT elements: the
// all-reduces, broadcasts and reduces in 10 pieces of 64 KiB for float32
// and int32 and 5 for bfloat16, over 24 all-reduces, 24 reduces and 6
// broadcasts (every type, op and placement): 450 a rank; the calls in
// blocks in pieces of 21824 bytes of each block (64 KiB / 3, rounded down to
// 64), 28 and 14, over 24 reduce-scatters, 6 all-gathers, gathers and
// scatters and 3 all-to-alls: 1050 more; and the all-reduce after each of
// the two send rings, of 8 x COUNT int32 (4800032 bytes): 74 pieces each.
TEST(DeviceInPlace, ProcessesRunStagedCallsInPiecesAndAgree) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const ProcessResult r =
      runRanks(3, {std::to_string(kLarge), "host-on-rank-0"},
               {{"LOOM_ALGO", "allreduce:ring,reducescatter:ring,allgather:ring,broadcast:ring,reduce:ring,"
                              "alltoall:direct,gather:direct,scatter:direct"},
                {"LOOM_STAGING_PIECE_BYTES", "65536"}});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": collectives ok")) << r.output;
  }
  EXPECT_EQ(searchAll(r.output, "pieces 1648\\n").size(), 3u) << r.output;
}

// Each process on a GPU of its own, as peers (the fake device's GPUs with
// peer access; a GPU machine's, if it has several, as they are): every call
// reads in place as on one GPU, through CUDA IPC (the fake device's memfds).
// The sends of device memory go by handle: a copy between GPUs needs no peer
// access. (Without peer access every rank stages: the threads' test above.)
TEST(DeviceInPlace, ProcessesOnGpusOfTheirOwnReadInPlaceAsPeers) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const ProcessResult r = runRanks(3, {std::to_string(kLarge), "gpu-per-rank"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": collectives ok")) << r.output;
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": received by handle " +
                                       std::to_string(2 * 8 * kLarge * 4) + " bytes"))
        << r.output;
  }
  if (fake()) {
    EXPECT_EQ(searchAll(r.output, "in place [1-9][0-9]* bytes, staged 0 bytes").size(), 3u) << r.output;
  }
}

// One rank cannot map its peers' buffers (as CUDA IPC may refuse, across
// containers): every rank learns it at one more step and stages instead.
TEST(DeviceInPlace, ARankThatCannotMapItsPeersSendsEveryRankToTheStagedPath) {
  if (!fake()) GTEST_SKIP() << "the refusal is the fake device's; a GPU maps what it can";
  const ProcessResult r = runRanks(3, {std::to_string(kLarge), "refuse-ipc-on-rank-2"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": collectives ok")) << r.output;
  }
  EXPECT_EQ(searchAll(r.output, "in place 0 bytes, staged [1-9][0-9]* bytes").size(), 3u) << r.output;
  EXPECT_TRUE(contains(r.output, "the fake device refuses to map the buffer of pid")) << r.output;
  // Its receives too: it refuses rank 1's first handle, whose bytes then
  // follow, and the second message comes staged; the others' go by handle.
  EXPECT_TRUE(contains(r.output, "rank 1's device buffers cannot be mapped here")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 2: received by handle 0 bytes")) << r.output;
  for (int rank : {0, 1}) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + ": received by handle " +
                                       std::to_string(2 * 8 * kLarge * 4) + " bytes"))
        << r.output;
  }
}

TEST(DeviceInPlace, SingleCopyOffStagesDeviceBuffers) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const ProcessResult r = runRanks(2, {std::to_string(kLarge)}, {{"LOOM_SHM_SINGLE_COPY", "0"}});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(searchAll(r.output, "received by handle 0 bytes").size(), 2u) << r.output;
  if (fake()) {
    EXPECT_EQ(searchAll(r.output, "in place 0 bytes, staged [1-9][0-9]* bytes").size(), 2u) << r.output;
  }
}

// A rank SIGKILLed in the middle of device all-reduces (loom_test_fault with
// device buffers): the others fail naming it, no hang, and the survivors
// shrink and all-reduce their device buffers exactly among themselves.
TEST(DeviceInPlace, ARankKilledMidCallFailsTheOthersNamingIt) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  const int n = 3;
  const std::string dir = ::testing::TempDir() + "loom-device-fault-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < n; ++r) {
    argvs.push_back({program(LOOM_TEST_FAULT_BIN, "tests"), "kill", "1", dir, std::to_string(4u << 20)});
    envs.push_back({{"LOOM_RANK", std::to_string(r)},
                    {"LOOM_WORLD_SIZE", std::to_string(n)},
                    {"LOOM_STORE_ADDR", "file://" + dir + "/store"},
                    {"LOOM_TEST_FAULT_DEVICE", "1"}});
  }
  // Within ctest's limit for the test, so that a hang shows each rank's output.
  const auto ranks = runProcesses(argvs, envs, std::chrono::seconds(90));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(ranks[1].exitCode, 128 + SIGKILL) << ranks[1].output;
  for (int r : {0, 2}) {
    const std::string& out = ranks[static_cast<size_t>(r)].output;
    EXPECT_EQ(ranks[static_cast<size_t>(r)].exitCode, 0) << "rank " << r << ":\n" << out;
    EXPECT_TRUE(contains(out, "detected after [0-9.]+ ms: .*rank 1")) << out;
    EXPECT_TRUE(contains(out, "survivors' rank [01] of 2 ok")) << out;
  }
}

}  // namespace
}  // namespace loom::test
