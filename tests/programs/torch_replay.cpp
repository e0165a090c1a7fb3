// PyTorch 2.x's ProcessGroupNCCL replayed without PyTorch: the sequences of
// NCCL calls that its ProcessGroupNCCL.cpp and NCCLUtils.cpp make (read
// there; line numbers drift between versions), over Loom's libnccl.so.2
// through NCCL's names only. One process a rank; a directory stands in for
// PyTorch's store. Every result is checked exactly; every wait has a
// deadline, so a hang is a failure here, not a stuck test.
//
//   loom_test_torch_replay RANK NRANKS DIR MEMORY
//
// MEMORY: "host" (malloc'd buffers), "device" (the fake device's buffers:
// device memory to Loom, which goes by handle between the ranks of a node
// past the FIFO, as a GPU's does over CUDA IPC; the calls on the NULL
// stream), or "stream": the fake device's buffers, and every call on its
// communicator's stream (a fake CUDA stream each, as ProcessGroupNCCL keeps
// one per communicator), waited for before the results are read.
//
// The replay, in PyTorch's order:
//  1. init: ncclGetVersion first; rank 0's ncclGetUniqueId through the store;
//     ncclCommInitRankConfig with blocking = 0 (ncclInProgress, then a poll
//     of ncclCommGetAsyncError every 2 ms until ready); new_group as
//     ncclCommSplit of that communicator (the last rank not in it), polled;
//  2. an unbatched send/recv between ranks 0 and 1: a lazily created 2-rank
//     communicator (key "0:1", rank 0's id), each op in its own group;
//  3. batch_isend_irecv on a group whose communicator does not exist yet:
//     an outer group; the lazy init closes it (PyTorch's "Group Start/End
//     Note"), creates the communicator and reopens it; every rank sends
//     8 MiB to the next rank and receives 8 MiB from the one before, each
//     op in an inner group (depth 2), sends first; the outer end launches;
//  4. coalesced all-gather and reduce-scatter: four of each in one group,
//     each in an inner group;
//  5. all along, a watchdog thread polls ncclCommGetAsyncError every
//     100 ms on every communicator made so far;
//  6. teardown: ncclCommFinalize of two communicators in an order that
//     differs between ranks, a poll, ncclCommDestroy; the other two aborted
//     inside a group.
// Prints "rank R ok" and exits 0 when everything held.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/device/runtime.hpp"
#include "tests/support/counters.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(60);

int gRank = 0;

[[noreturn]] void die(int line, const std::string& what) {
  std::printf("FAIL rank %d line %d: %s\n", gRank, line, what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

#define EXPECT(cond, what)            \
  do {                                \
    if (!(cond)) die(__LINE__, what); \
  } while (0)

// A call that must return one of two results (ncclSuccess, or
// ncclInProgress for a non-blocking communicator).
#define NCCL_OK(call)                                                                                     \
  do {                                                                                                    \
    const ncclResult_t r_ = (call);                                                                       \
    if (r_ != ncclSuccess && r_ != ncclInProgress) {                                                      \
      die(__LINE__, std::string(#call) + ": " + ncclGetErrorString(r_) + " (" + ncclGetLastError(nullptr) + \
                        ")");                                                                             \
    }                                                                                                     \
  } while (0)

// PyTorch's store: a key is a file, written whole by rename.
struct Store {
  std::string dir;
  void set(const std::string& key, const void* data, size_t bytes) const {
    const std::string tmp = dir + "/" + key + ".tmp" + std::to_string(gRank);
    std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    std::filesystem::rename(tmp, dir + "/" + key);
  }
  void get(const std::string& key, void* data, size_t bytes) const {
    const auto until = Clock::now() + kDeadline;
    for (;;) {
      std::ifstream in(dir + "/" + key, std::ios::binary);
      if (in && in.read(static_cast<char*>(data), static_cast<std::streamsize>(bytes))) return;
      EXPECT(Clock::now() < until, "the store never got " + key);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
};

// PyTorch's wait for a non-blocking communicator: a poll every 2 ms.
void awaitReady(ncclComm_t comm, int line) {
  const auto until = Clock::now() + kDeadline;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) die(line, std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(r));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      die(line, std::string("the communicator failed: ") + ncclGetErrorString(state) + " (" + ncclGetLastError(comm) +
                    ")");
    }
    if (Clock::now() > until) die(line, "the communicator was not ready within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// MEMORY=stream: each communicator's stream, made at its first call.
bool gOnStreams = false;
std::mutex gStreamsMutex;
std::vector<std::pair<ncclComm_t, void*>> gStreams;

// The stream `comm`'s calls go on (NULL unless MEMORY=stream).
cudaStream_t streamOf(ncclComm_t comm) {
  if (!gOnStreams) return nullptr;
  std::lock_guard lock(gStreamsMutex);
  for (const auto& [c, s] : gStreams) {
    if (c == comm) return static_cast<cudaStream_t>(s);
  }
  gStreams.emplace_back(comm, loom::cuda::runtime().createStream());
  return static_cast<cudaStream_t>(gStreams.back().second);
}

// Returns once `comm`'s stream has done everything queued on it (PyTorch's
// work.wait() and a read on the host: cudaStreamSynchronize), within the deadline.
void sync(ncclComm_t comm, int line) {
  if (!gOnStreams) return;
  void* stream = streamOf(comm);
  const auto end = Clock::now() + kDeadline;
  while (!loom::cuda::runtime().idle(stream)) {
    if (Clock::now() > end) die(line, "the communicator's stream did not finish within 60 s");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Buffers of the replay's memory kind.
struct Buffer {
  Buffer(size_t size, bool onDevice) : bytes(size), device(onDevice) {
    data = static_cast<int32_t*>(device ? loom::cuda::fakeDeviceAlloc(bytes) : std::malloc(bytes));
    EXPECT(data != nullptr, "out of memory");
  }
  ~Buffer() {
    if (device) loom::cuda::fakeDeviceFree(data);
    else std::free(data);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  size_t count() const { return bytes / sizeof(int32_t); }
  int32_t* data;
  size_t bytes;
  bool device;
};

int32_t pattern(int rank, size_t i, int salt) {
  return static_cast<int32_t>((static_cast<uint32_t>(rank + 1) * 2654435761u) ^ static_cast<uint32_t>(i * 31 + salt));
}

// PyTorch's watchdog: every 100 ms, each communicator's async error.
class Watchdog {
 public:
  Watchdog() : thread_([this] { run(); }) {}
  ~Watchdog() { stop(); }
  void watch(ncclComm_t comm) {
    std::lock_guard lock(mutex_);
    comms_.push_back(comm);
  }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    comms_.clear();
  }
  int polls() const { return polls_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      {
        std::lock_guard lock(mutex_);
        for (ncclComm_t comm : comms_) {
          ncclResult_t state = ncclSuccess;
          const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
          if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
            die(__LINE__, std::string("the watchdog saw ") + ncclGetErrorString(r) + " / " + ncclGetErrorString(state));
          }
          polls_.fetch_add(1);
        }
      }
      // PyTorch's watchdog sleeps 100 ms between rounds; this one polls more
      // often, so that its polls meet the calls of a run that takes less.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::mutex mutex_;
  std::vector<ncclComm_t> comms_;
  std::atomic<bool> stop_{false};
  std::atomic<int> polls_{0};
  std::thread thread_;
};

ncclConfig_t nonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// ProcessGroupNCCL's initNCCLComm: the lowest rank's id through the store
// under `key`, then a non-blocking init, polled until ready.
ncclComm_t lazyInit(const Store& store, const std::string& key, int nranks, int rank) {
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    store.set(key, &id, sizeof id);
  } else {
    store.get(key, &id, sizeof id);
  }
  ncclComm_t comm = nullptr;
  ncclConfig_t config = nonBlocking();
  const ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
  EXPECT(r == ncclInProgress, std::string("a non-blocking init returned ") + ncclGetErrorString(r));
  awaitReady(comm, __LINE__);
  return comm;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s RANK NRANKS DIR host|device|stream\n", argv[0]);
    return 2;
  }
  const int rank = gRank = std::atoi(argv[1]);
  const int n = std::atoi(argv[2]);
  const Store store{argv[3]};
  gOnStreams = std::strcmp(argv[4], "stream") == 0;
  const bool device = gOnStreams || std::strcmp(argv[4], "device") == 0;
  if (device) loom::cuda::useFakeDevice(true);

  // 1. init.
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  EXPECT(version >= NCCL_VERSION(2, 27, 0), "ncclGetVersion answered " + std::to_string(version));
  Watchdog watchdog;
  ncclComm_t world = lazyInit(store, "world", n, rank);
  watchdog.watch(world);
  int count = 0, me = -1;
  NCCL_OK(ncclCommCount(world, &count));
  NCCL_OK(ncclCommUserRank(world, &me));
  EXPECT(count == n && me == rank, "the world communicator has the wrong rank or size");

  ncclComm_t sub = nullptr;
  ncclConfig_t subConfig = nonBlocking();
  const int color = rank < n - 1 ? 0 : NCCL_SPLIT_NOCOLOR;
  NCCL_OK(ncclCommSplit(world, color, rank, &sub, &subConfig));
  EXPECT((sub != nullptr) == (color == 0), "ncclCommSplit's newcomm does not match the color");
  if (sub != nullptr) {
    awaitReady(sub, __LINE__);
    watchdog.watch(sub);
    Buffer x(4096, device);
    for (size_t i = 0; i < x.count(); ++i) x.data[i] = static_cast<int32_t>(rank + i);
    NCCL_OK(ncclAllReduce(x.data, x.data, x.count(), ncclInt32, ncclSum, sub, streamOf(sub)));
    sync(sub, __LINE__);
    const int members = n - 1;
    for (size_t i = 0; i < x.count(); ++i) {
      EXPECT(x.data[i] == static_cast<int32_t>(members * (members - 1) / 2 + members * i), "new_group's all-reduce");
    }
  }

  // DDP's gradient buckets: all-reduces back to back on the world's stream,
  // nothing waited for in between, then read (on streams, every rank of the
  // node on one device: queued on the stream as device work).
  {
    constexpr int kBuckets = 16;
    constexpr size_t kBucketBytes = 8192 * sizeof(int32_t);
    std::vector<Buffer*> buckets;
    for (int k = 0; k < kBuckets; ++k) {
      buckets.push_back(new Buffer(kBucketBytes, device));
      for (size_t i = 0; i < buckets.back()->count(); ++i) buckets.back()->data[i] = pattern(rank, i, 100 + k);
    }
    const uint64_t resident = loom::test::counter("resident_calls");
    for (Buffer* b : buckets) {
      NCCL_OK(ncclAllReduce(b->data, b->data, b->count(), ncclInt32, ncclSum, world, streamOf(world)));
    }
    sync(world, __LINE__);
    if (gOnStreams) {
      EXPECT(loom::test::counter("resident_calls") - resident == kBuckets,
             "an all-reduce on a stream went through the host (resident calls: " +
                 std::to_string(loom::test::counter("resident_calls") - resident) + ")");
    }
    for (int k = 0; k < kBuckets; ++k) {
      for (size_t i = 0; i < buckets[k]->count(); ++i) {
        uint32_t want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<uint32_t>(pattern(r, i, 100 + k));
        EXPECT(buckets[k]->data[i] == static_cast<int32_t>(want), "bucket " + std::to_string(k) + "'s all-reduce");
      }
      delete buckets[k];
    }
  }

  // 2. an unbatched send/recv between ranks 0 and 1, on their own 2-rank communicator.
  ncclComm_t pair = nullptr;
  if (rank < 2) {
    pair = lazyInit(store, "0:1", 2, rank);
    watchdog.watch(pair);
    for (size_t bytes : {size_t{1} << 20, size_t{8} << 20}) {
      Buffer b(bytes, device);
      for (int from = 0; from < 2; ++from) {
        NCCL_OK(ncclGroupStart());
        if (rank == from) {
          for (size_t i = 0; i < b.count(); ++i) b.data[i] = pattern(from, i, 1);
          NCCL_OK(ncclSend(b.data, b.count(), ncclInt32, 1 - rank, pair, streamOf(pair)));
        } else {
          std::memset(b.data, 0, b.bytes);
          NCCL_OK(ncclRecv(b.data, b.count(), ncclInt32, 1 - rank, pair, streamOf(pair)));
        }
        NCCL_OK(ncclGroupEnd());
        sync(pair, __LINE__);
        for (size_t i = 0; rank != from && i < b.count(); ++i) {
          EXPECT(b.data[i] == pattern(from, i, 1), "the unbatched receive of " + std::to_string(bytes) + " bytes");
        }
      }
    }
  }

  // 3. batch_isend_irecv on a group whose communicator is made lazily in the middle.
  {
    constexpr size_t kBytes = size_t{8} << 20;
    Buffer out(kBytes, device), in(kBytes, device);
    for (size_t i = 0; i < out.count(); ++i) out.data[i] = pattern(rank, i, 3);
    std::memset(in.data, 0, in.bytes);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    NCCL_OK(ncclGroupStart());  // startCoalescing
    // The first op finds no communicator: every open group is closed, the
    // communicator made, the groups opened again.
    NCCL_OK(ncclGroupEnd());
    ncclComm_t batch = lazyInit(store, "batch", n, rank);
    watchdog.watch(batch);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(out.data, out.count(), ncclInt32, next, batch, streamOf(batch)));
    NCCL_OK(ncclGroupEnd());  // depth 2 to 1: nothing may run yet
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclRecv(in.data, in.count(), ncclInt32, prev, batch, streamOf(batch)));
    NCCL_OK(ncclGroupEnd());
    NCCL_OK(ncclGroupEnd());  // endCoalescing: everything runs
    sync(batch, __LINE__);
    for (size_t i = 0; i < in.count(); ++i) {
      EXPECT(in.data[i] == pattern(prev, i, 3), "batch_isend_irecv's receive from rank " + std::to_string(prev));
    }

    // 4. coalesced all-gather and reduce-scatter, four of each.
    constexpr size_t kCount = 3001;
    std::vector<Buffer*> inputs, outputs;
    for (int k = 0; k < 8; ++k) {
      inputs.push_back(new Buffer(kCount * n * sizeof(int32_t), device));
      outputs.push_back(new Buffer(kCount * n * sizeof(int32_t), device));
      for (size_t i = 0; i < inputs.back()->count(); ++i) inputs.back()->data[i] = pattern(rank, i, k);
    }
    NCCL_OK(ncclGroupStart());
    for (int k = 0; k < 8; ++k) {
      NCCL_OK(ncclGroupStart());
      if (k < 4) {
        NCCL_OK(ncclAllGather(inputs[k]->data, outputs[k]->data, kCount, ncclInt32, batch, streamOf(batch)));
      } else {
        NCCL_OK(ncclReduceScatter(inputs[k]->data, outputs[k]->data, kCount, ncclInt32, ncclSum, batch,
                                  streamOf(batch)));
      }
      NCCL_OK(ncclGroupEnd());
    }
    NCCL_OK(ncclGroupEnd());
    sync(batch, __LINE__);
    for (int k = 0; k < 8; ++k) {
      for (size_t i = 0; i < kCount * (k < 4 ? n : 1); ++i) {
        int32_t want = 0;
        if (k < 4) {
          want = pattern(static_cast<int>(i / kCount), i % kCount, k);
        } else {
          for (int r = 0; r < n; ++r) want = static_cast<int32_t>(static_cast<uint32_t>(want) + static_cast<uint32_t>(pattern(r, rank * kCount + i, k)));
        }
        EXPECT(outputs[k]->data[i] == want, std::string(k < 4 ? "coalesced all-gather " : "coalesced reduce-scatter ") +
                                                 std::to_string(k) + " at " + std::to_string(i));
      }
      delete inputs[k];
      delete outputs[k];
    }

    // 6. teardown: finalize in an order that differs by rank, then destroy;
    // the rest aborted inside a group.
    // A poll may still be due on a fast machine; one that never comes means
    // ncclCommGetAsyncError blocked behind the calls.
    for (int i = 0; i < 200 && watchdog.polls() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT(watchdog.polls() > 0, "the watchdog never ran");
    watchdog.stop();
    std::vector<ncclComm_t> finalized{world, batch};
    if (rank % 2 == 1) std::swap(finalized[0], finalized[1]);
    for (ncclComm_t comm : finalized) NCCL_OK(ncclCommFinalize(comm));
    for (ncclComm_t comm : finalized) awaitReady(comm, __LINE__);
    for (ncclComm_t comm : finalized) NCCL_OK(ncclCommDestroy(comm));
    NCCL_OK(ncclGroupStart());
    if (sub != nullptr) NCCL_OK(ncclCommAbort(sub));
    if (pair != nullptr) NCCL_OK(ncclCommAbort(pair));
    NCCL_OK(ncclGroupEnd());
  }
  std::printf("rank %d ok\n", rank);
  return 0;
}
