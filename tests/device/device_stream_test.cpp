// Calls on a CUDA stream, without a GPU: the fake device's streams
// (base/device/fake_device.hpp) run their work in order on threads of their
// own, so a stream gate (stream_gate.hpp) holds them as it holds a GPU's.
// What a user of NCCL relies on is checked here: the call returns at once,
// before the work queued ahead of it on the stream has run; it reads its
// input only once that work is done; the work queued after it sees its
// result; and an abort lets a stream that waits for a call go on. On a real
// GPU the same is gpu_test's.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/device/fake_device.hpp"
#include "base/device/runtime.hpp"
#include "base/device/staging.hpp"
#include "base/error.hpp"
#include "base/half.hpp"
#include "collectives/device_work.hpp"
#include "collectives/resident_collectives.hpp"
#include "comm/communicator.hpp"
#include "comm/engine/resident_p2p.hpp"
#include "comm/resident_area.hpp"
#include "tests/support/counters.hpp"
#include "tests/support/device_memory.hpp"
#include "tests/support/ranks.hpp"

namespace {

using loom::cuda::runtime;
using loom::cuda::StreamHandle;
using loom::test::DeviceBuffer;
using loom::test::onThreads;
using namespace std::chrono_literals;

bool fake() { return std::string(loom::test::deviceMemoryKind()) == "fake"; }

// Element i of a buffer of `type`, written from and read as a whole number.
void writeValue(loomDataType_t type, std::byte* buffer, size_t i, int v) {
  switch (type) {
    case loomInt8: reinterpret_cast<int8_t*>(buffer)[i] = static_cast<int8_t>(v); break;
    case loomUint8: reinterpret_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(v); break;
    case loomInt32: reinterpret_cast<int32_t*>(buffer)[i] = v; break;
    case loomUint32: reinterpret_cast<uint32_t*>(buffer)[i] = static_cast<uint32_t>(v); break;
    case loomInt64: reinterpret_cast<int64_t*>(buffer)[i] = v; break;
    case loomUint64: reinterpret_cast<uint64_t*>(buffer)[i] = static_cast<uint64_t>(v); break;
    case loomFloat16: reinterpret_cast<uint16_t*>(buffer)[i] = loom::cpu::floatToHalf(static_cast<float>(v)); break;
    case loomBfloat16: reinterpret_cast<uint16_t*>(buffer)[i] = loom::cpu::floatToBfloat16(static_cast<float>(v)); break;
    case loomFloat32: reinterpret_cast<float*>(buffer)[i] = static_cast<float>(v); break;
    case loomFloat64: reinterpret_cast<double*>(buffer)[i] = v; break;
    default: FAIL() << "type " << type;
  }
}

long long readValue(loomDataType_t type, const std::byte* buffer, size_t i) {
  switch (type) {
    case loomInt8: return reinterpret_cast<const int8_t*>(buffer)[i];
    case loomUint8: return reinterpret_cast<const uint8_t*>(buffer)[i];
    case loomInt32: return reinterpret_cast<const int32_t*>(buffer)[i];
    case loomUint32: return reinterpret_cast<const uint32_t*>(buffer)[i];
    case loomInt64: return reinterpret_cast<const int64_t*>(buffer)[i];
    case loomUint64: return static_cast<long long>(reinterpret_cast<const uint64_t*>(buffer)[i]);
    case loomFloat16: return static_cast<long long>(loom::cpu::halfToFloat(reinterpret_cast<const uint16_t*>(buffer)[i]));
    case loomBfloat16:
      return static_cast<long long>(loom::cpu::bfloat16ToFloat(reinterpret_cast<const uint16_t*>(buffer)[i]));
    case loomFloat32: return static_cast<long long>(reinterpret_cast<const float*>(buffer)[i]);
    case loomFloat64: return static_cast<long long>(reinterpret_cast<const double*>(buffer)[i]);
    default: return -1;
  }
}

// Every type, and its element's bytes.
struct TypeCase {
  loomDataType_t type;
  size_t size;
};
const std::vector<TypeCase> kTypes{{loomInt8, 1},    {loomUint8, 1},  {loomInt32, 4},   {loomUint32, 4},
                                   {loomInt64, 8},   {loomUint64, 8}, {loomFloat16, 2}, {loomBfloat16, 2},
                                   {loomFloat32, 4}, {loomFloat64, 8}};

// `op` over the values of ranks 0..n-1, as whole numbers.
long long fold(loomRedOp_t op, int n, const std::function<long long(int rank)>& valueOf) {
  long long folded = valueOf(0);
  for (int q = 1; q < n; ++q) {
    const long long v = valueOf(q);
    folded = op == loomSum    ? folded + v
             : op == loomProd ? folded * v
             : op == loomMin  ? std::min(folded, v)
                              : std::max(folded, v);
  }
  return folded;
}

// A stream of the fake device, destroyed with the object.
class Stream {
 public:
  Stream() : handle_(runtime().createStream()) {}
  ~Stream() { runtime().destroyStream(handle_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle handle() const { return handle_; }
  loomStream_t loom() const { return static_cast<loomStream_t>(handle_); }

  // Whether everything queued is done within `limit`.
  bool finishes(std::chrono::milliseconds limit = 60s) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!runtime().idle(handle_)) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(100us);
    }
    return true;
  }

 private:
  StreamHandle handle_;
};

// Ranks as threads, rank r's communicator made on fake GPU r % gpus (each
// reaching the others' as a peer); GPU 0 current again after.
std::vector<loomComm_t> initThreadCommsOnGpus(int n, int gpus) {
  loom::cuda::fakeDeviceGpus(gpus, true);
  loomUniqueId id;
  EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  onThreads(n, [&](int r) {
    runtime().setCurrentDevice(r % gpus);
    EXPECT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), loomSuccess) << loomGetLastError(nullptr);
  });
  return comms;
}

// Ranks made by this thread in one group (NCCL's idiom for one thread that
// drives several ranks): their driver at the entry gate.
std::vector<loomComm_t> initCommsFromOneThread(int n) {
  loomUniqueId id;
  EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), loomSuccess) << loomGetLastError(nullptr);
  }
  EXPECT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  return comms;
}

struct OneFakeGpuAgain {
  ~OneFakeGpuAgain() { loom::cuda::fakeDeviceGpus(1, true); }
};

// A word a stream waits on, raised by the test (or, so that no failure
// hangs, after `limit` by a thread of its own, which says so).
class Go {
 public:
  explicit Go(std::chrono::milliseconds limit = 20s)
      : guard_([this, limit] {
          const auto end = std::chrono::steady_clock::now() + limit;
          while (__atomic_load_n(&word_, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(1ms);
          }
          if (__atomic_load_n(&word_, __ATOMIC_ACQUIRE) == 0) {
            timedOut_ = true;
            raise();
          }
        }) {}
  ~Go() {
    raise();
    guard_.join();
  }
  const uint64_t* word() const { return &word_; }
  void raise() { __atomic_store_n(&word_, 1, __ATOMIC_RELEASE); }
  bool timedOut() const { return timedOut_; }

 private:
  uint64_t word_ = 0;
  std::atomic<bool> timedOut_{false};
  std::thread guard_;
};

TEST(FakeStreams, RunTheirWorkInOrderAndLater) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  Stream a, b;
  Go go;
  std::vector<int32_t> src(1000, 7), viaA(1000, 0), viaB(1000, 0);
  runtime().waitValue(a.handle(), go.word(), 1);
  runtime().copy(viaA.data(), src.data(), 4000, a.handle());
  const loom::cuda::EventHandle copied = runtime().record(a.handle());
  runtime().waitEvent(b.handle(), copied);
  runtime().copy(viaB.data(), viaA.data(), 4000, b.handle());
  std::this_thread::sleep_for(20ms);
  // Nothing ran: a waits for the word, b for a.
  EXPECT_FALSE(runtime().reached(copied));
  EXPECT_FALSE(runtime().idle(a.handle()));
  EXPECT_FALSE(runtime().idle(b.handle()));
  go.raise();
  ASSERT_TRUE(a.finishes());
  ASSERT_TRUE(b.finishes());
  EXPECT_TRUE(runtime().reached(copied));
  EXPECT_EQ(viaA, src);
  EXPECT_EQ(viaB, src);
  EXPECT_FALSE(go.timedOut());
  runtime().destroyEvent(copied);
}

// A call's staging gives its pinned buffers back once its copies are done,
// and abandons them where its wait gave up with a copy still queued (an
// abort, a deadline): such a buffer is never lent again.
TEST(StagedCopies, AbandonBuffersACopyMayStillWriteInto) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::cuda::StagingArea area;
  Go go;
  const std::vector<std::byte> src(4096, std::byte{7});
  std::byte* finished = nullptr;
  {
    loom::cuda::StagedCopies staging(area, [] {});
    finished = staging.lease(4096);
    staging.stream().copy(finished, src.data(), 4096);
  }
  std::byte* stuck = nullptr;
  {
    loom::cuda::StagedCopies staging(area, [] { throw loom::Error(loomTimeout, "the call gave up"); });
    stuck = staging.lease(4096);
    EXPECT_EQ(stuck, finished) << "a buffer whose copies were done was not lent again";
    runtime().waitValue(staging.stream().handle(), go.word(), 1);  // the device is stuck
    staging.stream().copy(stuck, src.data(), 4096);
  }
  {
    loom::cuda::StagedCopies staging(area, [] {});
    EXPECT_NE(staging.lease(4096), stuck) << "a buffer a copy may still write into was lent again";
  }
  go.raise();  // the stuck copy runs now, from `src`: waited for before `src` goes
  while (!runtime().idle(area.stream().handle())) std::this_thread::sleep_for(100us);
}

// The device's work of a call that fails while it runs (a lost peer revokes
// the communicator) is waited out before the failure returns: its kernels
// read peers' buffers, which their owners free once this rank says it reads
// no more (shm::PeerReads), and write this rank's, which the user reuses.
// Likewise where the call fails before finish(): the work's end waits.
TEST(DeviceWork, AFailingCallWaitsOutTheWorkItQueued) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  auto comms = loom::test::initThreadComms(1);
  auto& comm = static_cast<loom::Communicator&>(*comms[0]);
  const std::vector<std::byte> bytes(1 << 16, std::byte{7});
  DeviceBuffer src(bytes.size()), dst(bytes.size());
  src.upload(bytes.data());
  const StreamHandle stream = comm.staging.stream().handle();
  comm.revoke("rank 1 failed: a test's words");
  for (const bool finishes : {true, false}) {
    SCOPED_TRACE(finishes ? "failing in finish()" : "failing before finish()");
    std::vector<std::byte> zeros(bytes.size(), std::byte{0});
    dst.upload(zeros.data());
    Go go;
    std::thread later;
    {
      loom::coll::DeviceWork work(comm);
      runtime().waitValue(stream, go.word(), 1);  // the device is busy elsewhere
      work.copy(dst.data(), src.data(), bytes.size());
      later = std::thread([&] {
        std::this_thread::sleep_for(100ms);
        go.raise();
      });
      if (finishes) {
        try {
          work.finish();
          ADD_FAILURE() << "finish() on a revoked communicator succeeded";
        } catch (const loom::Error& e) {
          EXPECT_EQ(e.code(), loomRemoteError) << e.what();
          EXPECT_TRUE(runtime().idle(stream)) << "finish() threw with the call's copy still queued";
        }
      }
    }
    EXPECT_TRUE(runtime().idle(stream)) << "the work ended with its copy still queued";
    later.join();
    EXPECT_FALSE(go.timedOut());
    std::vector<std::byte> copied(bytes.size());
    dst.download(copied.data());
    EXPECT_EQ(copied, bytes);
  }
  loom::test::destroyAll(comms);
}

// One rank's call on its stream: `count` int32 in `send` and `recv`.
using Call = std::function<loomResult_t(const void* send, void* recv, size_t count, int rank, loomComm_t comm,
                                        loomStream_t stream)>;

// Each of n ranks (threads) queues on a stream of its own: a wait for the
// test's word, then the copy of its input to the device (the user's kernel
// that makes it), then the call, then the copy of the result back (the
// kernel that reads it). The call must return before the word is raised;
// the result must be `expected(rank, i)` exactly.
// `checked(rank)`: whether the rank's result is checked (not a non-root's
// of a reduce or a gather, which is left as it was).
void onStreams(int n, size_t sendCount, size_t recvCount, const Call& call,
               const std::function<int32_t(int rank, size_t i)>& input,
               const std::function<int32_t(int rank, size_t i)>& expected,
               const std::function<bool(int rank)>& checked = [](int) { return true; }) {
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    Stream stream;
    Go go;
    std::vector<int32_t> in(sendCount), out(recvCount, -1);
    for (size_t i = 0; i < sendCount; ++i) in[i] = input(r, i);
    DeviceBuffer send(sendCount * 4 + 4), recv(recvCount * 4 + 4);
    runtime().waitValue(stream.handle(), go.word(), 1);
    runtime().copy(send.data(), in.data(), sendCount * 4, stream.handle());
    ASSERT_EQ(call(send.data(), recv.data(), sendCount, r, comms[r], stream.loom()), loomSuccess)
        << loomGetLastError(comms[r]);
    runtime().copy(out.data(), recv.data(), recvCount * 4, stream.handle());
    EXPECT_FALSE(go.timedOut()) << "rank " << r << ": the call waited for the work queued before it";
    go.raise();
    ASSERT_TRUE(stream.finishes()) << "rank " << r;
    loomResult_t async = loomInternalError;
    ASSERT_EQ(loomCommGetAsyncError(comms[r], &async), loomSuccess);
    EXPECT_EQ(async, loomSuccess) << "rank " << r << ": " << loomGetLastError(comms[r]);
    size_t wrong = 0;
    for (size_t i = 0; checked(r) && i < recvCount; ++i) {
      if (out[i] != expected(r, i) && wrong++ < 3) {
        ADD_FAILURE() << "rank " << r << " of " << n << ", element " << i << ": " << out[i] << ", expected "
                      << expected(r, i);
      }
    }
  });
  loom::test::destroyAll(comms);
}

// Rank r's PreMulSum, 0.37 (r + 1), made on `comm`.
loomRedOp_t premulOf(int r, loomComm_t comm) {
  float factor = 0.37f * static_cast<float>(r + 1);
  loomRedOp_t premul{};
  EXPECT_EQ(loomRedOpCreatePreMulSum(&premul, &factor, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
  return premul;
}

// `count` floats of up to about 102, drawn from `seed` (a linear congruence).
std::vector<float> randomFloats(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  for (float& x : values) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 8) % 100000) / 977.0f;
  }
  return values;
}

int32_t value(int rank, size_t i) { return static_cast<int32_t>((i * 31 + static_cast<size_t>(rank) * 1000003) % 65521); }

// Rank r of n: all-reduce, reduce (root n - 1) and reduce-scatter of
// `count` random floats a block (drawn from `seed`) through sum, average and
// its PreMulSum, each on `stream` and through the host path (a NULL stream),
// whose results must match bit for bit.
void expectTheHostPathsBits(int r, int n, loomComm_t comm, const Stream& stream, size_t count, uint32_t seed) {
  const loomRedOp_t premul = premulOf(r, comm);
  const std::vector<float> input = randomFloats(count * static_cast<size_t>(n), seed + static_cast<uint32_t>(r) * 7919u);
  DeviceBuffer send(input.size() * 4), viaHost(input.size() * 4), viaStream(input.size() * 4);
  send.upload(input.data());
  using Run = std::function<loomResult_t(loomStream_t, void*)>;
  const int root = n - 1;
  for (loomRedOp_t op : {loomSum, loomAvg, premul}) {
    const std::vector<std::pair<std::string, Run>> calls{
        {"all-reduce", [&](loomStream_t s, void* out) {
           return loomAllReduce(send.data(), out, count, loomFloat32, op, comm, s);
         }},
        {"reduce", [&](loomStream_t s, void* out) {
           return loomReduce(send.data(), out, count, loomFloat32, op, root, comm, s);
         }},
        {"reduce-scatter", [&](loomStream_t s, void* out) {
           return loomReduceScatter(send.data(), out, count, loomFloat32, op, comm, s);
         }}};
    for (const auto& [name, call] : calls) {
      ASSERT_EQ(call(nullptr, viaHost.data()), loomSuccess) << name << ": " << loomGetLastError(comm);
      ASSERT_EQ(call(stream.loom(), viaStream.data()), loomSuccess) << name << ": " << loomGetLastError(comm);
      ASSERT_TRUE(stream.finishes());
      if (name == "reduce" && r != root) continue;
      std::vector<float> host(count), resident(count);
      runtime().copyNow(host.data(), viaHost.data(), count * 4);
      runtime().copyNow(resident.data(), viaStream.data(), count * 4);
      size_t at = 0;
      while (at < count && std::memcmp(&host[at], &resident[at], 4) == 0) ++at;
      EXPECT_EQ(at, count) << name << ", op " << op << ", rank " << r
                           << ": the resident result's bits differ from the host's at element " << at << ": "
                           << (at < count ? resident[at] : 0.0f) << ", the host's " << (at < count ? host[at] : 0.0f);
    }
  }
  EXPECT_EQ(loomRedOpDestroy(premul, comm), loomSuccess);
}

TEST(CallsOnAStream, RunAfterTheWorkBeforeThemAndBeforeTheWorkAfter) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  for (const char* gate : {"memop", "kernel"}) {
    loom::test::ScopedEnv env("LOOM_CUDA_GATE", gate);
    for (int n : {1, 2, 3}) {
      for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}}) {
        SCOPED_TRACE(std::string("gate ") + gate + ", " + std::to_string(n) + " ranks, " + std::to_string(count) +
                     " elements");
        const auto nn = static_cast<size_t>(n);
        onStreams(
            n, count, count,
            [](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
              return loomAllReduce(s, r, c, loomInt32, loomSum, comm, st);
            },
            value,
            [n](int, size_t i) {
              int32_t sum = 0;
              for (int q = 0; q < n; ++q) sum += value(q, i);
              return sum;
            });
        onStreams(
            n, count, count * nn,
            [](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
              return loomAllGather(s, r, c, loomInt32, comm, st);
            },
            value, [count](int, size_t i) { return value(static_cast<int>(i / count), i % count); });
        onStreams(
            n, count, count,
            [](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
              return loomBroadcast(s, r, c, loomInt32, 0, comm, st);
            },
            value, [](int, size_t i) { return value(0, i); });
      }
    }
  }
}

// An all-reduce of several ranks on one node, on a CUDA stream, is queued on
// the stream as device work (collectives/resident_collectives.hpp): every
// type and op exactly, many calls back to back with nothing waited for in
// between (each call's scratch reused only once every rank has read it),
// in place and out of place, and no byte staged.
TEST(ResidentAllReduce, EveryTypeAndOpBackToBackOnTheStream) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  const std::vector<TypeCase>& types = kTypes;
  const std::vector<loomRedOp_t> ops{loomSum, loomProd, loomMin, loomMax};
  constexpr int kCalls = 24;
  constexpr size_t kCount = 1001;
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    auto comms = loom::test::initThreadComms(n);
    const uint64_t resident = loom::test::counter("resident_calls");
    const uint64_t staged = loom::cuda::fakeBytesStaged();
    onThreads(n, [&](int r) {
      Stream stream;
      // Freed only once this rank is through: freeing device memory waits
      // for every stream of the process (cudaFree does), the other ranks'
      // too, which may be waiting for this rank's next call.
      std::vector<std::unique_ptr<DeviceBuffer>> buffers;
      for (const TypeCase& t : types) {
        // Small integers, exact in every type and under every op (the
        // product of up to four values in 1..3 fits an int8).
        const auto valueOf = [&](int rank, int call, size_t i) {
          return static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3 + static_cast<size_t>(call)) % 3) + 1;
        };
        std::vector<std::vector<std::byte>> inputs(kCalls), outputs(kCalls);
        for (int call = 0; call < kCalls; ++call) {
          inputs[call].resize(kCount * t.size);
          outputs[call].resize(kCount * t.size);
          for (size_t i = 0; i < kCount; ++i) writeValue(t.type, inputs[call].data(), i, valueOf(r, call, i));
          buffers.push_back(std::make_unique<DeviceBuffer>(kCount * t.size));
          const bool inPlace = call % 2 == 1;
          auto& send = *buffers.back();
          if (!inPlace) buffers.push_back(std::make_unique<DeviceBuffer>(kCount * t.size));
          auto& recv = *buffers.back();
          runtime().copy(send.data(), inputs[call].data(), inputs[call].size(), stream.handle());
          const loomRedOp_t op = ops[static_cast<size_t>(call) % ops.size()];
          ASSERT_EQ(loomAllReduce(send.data(), recv.data(), kCount, t.type, op, comms[r], stream.loom()),
                    loomSuccess)
              << loomGetLastError(comms[r]);
          runtime().copy(outputs[call].data(), recv.data(), outputs[call].size(), stream.handle());
        }
        ASSERT_TRUE(stream.finishes()) << "rank " << r;
        for (int call = 0; call < kCalls; ++call) {
          const loomRedOp_t op = ops[static_cast<size_t>(call) % ops.size()];
          for (size_t i = 0; i < kCount; ++i) {
            const long long want = fold(op, n, [&](int q) { return valueOf(q, call, i); });
            const long long got = readValue(t.type, outputs[call].data(), i);
            if (got != want) {
              ADD_FAILURE() << "rank " << r << ", type " << t.type << ", call " << call << ", op " << op
                            << ", element " << i << ": " << got << ", expected " << want;
              break;
            }
          }
        }
      }
    });
    EXPECT_EQ(loom::test::counter("resident_calls") - resident, static_cast<uint64_t>(n) * types.size() * kCalls)
        << "calls that took the host's path";
    EXPECT_EQ(loom::cuda::fakeBytesStaged(), staged) << "bytes staged through pinned memory";
    loom::test::destroyAll(comms);
  }
}

// A small resident call's waits and writes go on the stream in batches
// (base/device/memop_batch.hpp), one before its reduction kernel or copies
// (publish, "arrived", the wait for the peers') and one after ("done", the
// wait for its readers, "finished"), not one operation at a time; and where
// the ranks' kernels run at once (threads of one process on one GPU), a
// small call runs those flags inside its one kernel
// (LOOM_DEVICE_ONE_KERNEL_BYTES), with no batch: folds that sum,
// multiply, or take a minimum or maximum, and every gather, broadcast and
// all-to-all. 2 and 3 ranks, two rounds of every kind, interleaved so that
// calls of both forms follow each other on the same flags: all-reduces
// summed and maxed, a reduce-scatter, a reduce, an all-gather, a
// broadcast, an all-to-all, a gather and a scatter (one kernel), an
// all-reduce averaged (batches: an average kernel follows) and one of 96
// KiB (past the default's 64 KiB: batches); every result exact. With 0,
// every call in batches.
TEST(ResidentCollectives, ASmallCallQueuesItsFlagsInTwoBatchesOrRunsThemInItsKernel) {
  if (!fake()) GTEST_SKIP() << "the fake device counts its batches";
  enum Kind { kSum, kMax, kAverage, kLarge, kReduceScatter, kReduce, kAllGather, kBroadcast, kAlltoAll, kGather,
              kScatter, kKinds };
  constexpr int kCalls = 2 * kKinds;
  constexpr size_t kLargeBytes = 96 << 10;
  for (const char* oneKernel : {"65536", "0"}) {
    loom::test::ScopedEnv bytes("LOOM_DEVICE_ONE_KERNEL_BYTES", oneKernel);
    const bool inKernel = std::string(oneKernel) != "0";
    for (int n : {2, 3}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, LOOM_DEVICE_ONE_KERNEL_BYTES=" + oneKernel);
      const int root = n - 1;
      const auto nn = static_cast<size_t>(n);
      auto comms = loom::test::initThreadComms(n);
      const uint64_t batches = loom::cuda::fakeMemopBatches();
      const uint64_t resident = loom::test::counter("resident_calls");
      const auto valueOf = [](int q, size_t i, int call) { return static_cast<int32_t>(i % 13) + 3 * q + call; };
      onThreads(n, [&](int r) {
        Stream stream;
        DeviceBuffer send(kLargeBytes), recv(kLargeBytes);
        for (int call = 0; call < kCalls; ++call) {
          const auto kind = static_cast<Kind>(call % kKinds);
          const size_t count = kind == kLarge ? kLargeBytes / 4 : 2;  // of a block
          const bool blocksIn = kind == kReduceScatter || kind == kAlltoAll || kind == kScatter;
          const bool blocksOut = kind == kAllGather || kind == kAlltoAll || kind == kGather;
          const size_t inputs = blocksIn ? count * nn : count;
          const size_t outputs = blocksOut ? count * nn : count;
          std::vector<int32_t> in(inputs), out(outputs, -1);
          for (size_t i = 0; i < inputs; ++i) in[i] = valueOf(r, i, call);
          runtime().copyNow(send.data(), in.data(), inputs * 4);
          runtime().copyNow(recv.data(), out.data(), outputs * 4);
          const loomRedOp_t op = kind == kMax ? loomMax : kind == kAverage ? loomAvg : loomSum;
          const loomComm_t comm = comms[static_cast<size_t>(r)];
          const loomStream_t on = stream.loom();
          loomResult_t result = loomSuccess;
          switch (kind) {
            case kReduceScatter: result = loomReduceScatter(send.data(), recv.data(), count, loomInt32, op, comm, on); break;
            case kReduce: result = loomReduce(send.data(), recv.data(), count, loomInt32, op, root, comm, on); break;
            case kAllGather: result = loomAllGather(send.data(), recv.data(), count, loomInt32, comm, on); break;
            case kBroadcast: result = loomBroadcast(send.data(), recv.data(), count, loomInt32, root, comm, on); break;
            case kAlltoAll: result = loomAlltoAll(send.data(), recv.data(), count, loomInt32, comm, on); break;
            case kGather: result = loomGather(send.data(), recv.data(), count, loomInt32, root, comm, on); break;
            case kScatter: result = loomScatter(send.data(), recv.data(), count, loomInt32, root, comm, on); break;
            default: result = loomAllReduce(send.data(), recv.data(), count, loomInt32, op, comm, on); break;
          }
          ASSERT_EQ(result, loomSuccess) << loomGetLastError(comm);
          ASSERT_TRUE(stream.finishes());
          runtime().copyNow(out.data(), recv.data(), outputs * 4);
          for (size_t e = 0; e < outputs; ++e) {
            const size_t q = e / count;  // the block
            const size_t i = e % count;
            int32_t sum = 0;
            const size_t at = kind == kReduceScatter ? static_cast<size_t>(r) * count + i : e;
            for (int p = 0; p < n; ++p) sum += valueOf(p, at, call);
            int32_t want = -1;
            switch (kind) {
              case kMax: want = valueOf(n - 1, e, call); break;
              case kAverage: want = sum / n; break;
              case kReduce: want = r == root ? sum : -1; break;
              case kAllGather: want = valueOf(static_cast<int>(q), i, call); break;
              case kBroadcast: want = valueOf(root, e, call); break;
              case kAlltoAll: want = valueOf(static_cast<int>(q), static_cast<size_t>(r) * count + i, call); break;
              case kGather: want = r == root ? valueOf(static_cast<int>(q), i, call) : -1; break;
              case kScatter: want = valueOf(root, static_cast<size_t>(r) * count + e, call); break;
              default: want = sum; break;
            }
            ASSERT_EQ(out[e], want) << "rank " << r << ", call " << call << ", element " << e;
          }
        }
      });
      // Per rank: 2 batches for each call in batches; none for one kernel's.
      const uint64_t inBatches = inKernel ? 2 * 2 : kCalls;  // the average and the large all-reduce, twice
      EXPECT_EQ(loom::cuda::fakeMemopBatches() - batches, uint64_t{2} * static_cast<uint64_t>(n) * inBatches);
      EXPECT_EQ(loom::test::counter("resident_calls") - resident, static_cast<uint64_t>(n) * kCalls);
      loom::test::destroyAll(comms);
    }
  }
}

// Every collective on a stream of several ranks, resident, exact, with a
// root other than 0; inputs past one scratch slot (2 MiB) run as pieces.
TEST(ResidentCollectives, EveryCollectiveIsExact) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  for (int n : {2, 3, 4}) {
    const int root = n - 1;
    const auto nn = static_cast<size_t>(n);
    // Sanitizer builds (LOOM_TEST_FULL_MATRIX=0) leave out the largest, to fit CI's time.
    std::vector<size_t> counts{1, 1000, 65539, 300001};
    if (LOOM_TEST_FULL_MATRIX) counts.push_back(1600003);
    for (size_t count : counts) {
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(count) + " elements");
      const uint64_t before = loom::test::counter("resident_calls");
      const auto sum = [n](size_t i) {
        int32_t s = 0;
        for (int q = 0; q < n; ++q) s += value(q, i);
        return s;
      };
      onStreams(n, count, count,
                [root](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                  return loomReduce(s, r, c, loomInt32, loomSum, root, comm, st);
                },
                value, [&](int, size_t i) { return sum(i); }, [root](int r) { return r == root; });
      onStreams(n, count * nn, count,
                [nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                  return loomReduceScatter(s, r, c / nn, loomInt32, loomSum, comm, st);
                },
                value, [&](int rank, size_t i) { return sum(static_cast<size_t>(rank) * count + i); });
      onStreams(n, count * nn, count * nn,
                [nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                  return loomAlltoAll(s, r, c / nn, loomInt32, comm, st);
                },
                value, [count](int rank, size_t i) {
                  return value(static_cast<int>(i / count), static_cast<size_t>(rank) * count + i % count);
                });
      onStreams(n, count, count * nn,
                [root](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                  return loomGather(s, r, c, loomInt32, root, comm, st);
                },
                value, [count](int, size_t i) { return value(static_cast<int>(i / count), i % count); },
                [root](int r) { return r == root; });
      onStreams(n, count * nn, count,
                [root, nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                  return loomScatter(s, r, c / nn, loomInt32, root, comm, st);
                },
                value, [root, count](int rank, size_t i) { return value(root, static_cast<size_t>(rank) * count + i); });
      EXPECT_EQ(loom::test::counter("resident_calls") - before, 5 * nn) << "calls that took the host's path";
    }
  }
}

// A resident reduction gives the host path's bits (LOOM_DETERMINISTIC: both
// fold in rank order): random floats through sum, average and a PreMulSum
// whose scalar differs by rank, all-reduce, reduce and reduce-scatter, on a
// CUDA stream (resident) and on the NULL stream (the host path), compared
// bit for bit; and integer averages divide as the host's do.
TEST(ResidentCollectives, ReductionsHaveTheHostPathsBits) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  constexpr size_t kCount = 70001;
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    auto comms = loom::test::initThreadComms(n);
    const uint64_t before = loom::test::counter("resident_calls");
    onThreads(n, [&](int r) {
      Stream stream;
      expectTheHostPathsBits(r, n, comms[r], stream, kCount, 12345u);
      std::vector<int32_t> integers(kCount);
      for (size_t i = 0; i < kCount; ++i) integers[i] = static_cast<int32_t>(i % 1000) - 500 + r * 7;
      // Integer averages truncate toward zero, as the host's do.
      DeviceBuffer ints(kCount * 4), average(kCount * 4);
      ints.upload(integers.data());
      ASSERT_EQ(loomAllReduce(ints.data(), average.data(), kCount, loomInt32, loomAvg, comms[r], stream.loom()),
                loomSuccess);
      ASSERT_TRUE(stream.finishes());
      std::vector<int32_t> got(kCount);
      average.download(got.data());
      for (size_t i = 0; i < kCount; ++i) {
        int64_t sum = 0;
        for (int q = 0; q < n; ++q) sum += static_cast<int32_t>(i % 1000) - 500 + q * 7;
        if (got[i] != static_cast<int32_t>(sum / n)) {
          ADD_FAILURE() << "rank " << r << ", element " << i << ": " << got[i] << ", expected " << sum / n;
          break;
        }
      }
    });
    EXPECT_EQ(loom::test::counter("resident_calls") - before, static_cast<uint64_t>(n) * 10) << "calls that took the host's path";
    loom::test::destroyAll(comms);
  }
}

// Ranks that are threads of one process on one GPU run a call past one
// scratch slot as one piece, every rank reading every other's buffers where
// they lie (a slot of 32 KiB here, the least, so that small calls pass it): every type
// under sum, product, min and max, all-reduces in place and out of place
// back to back, exact; floats through sum, average and a per-rank PreMulSum
// (whose input is scaled into memory of the call's own, allocated on the
// stream) in all-reduce, reduce and reduce-scatter, with the host path's
// bits; and a send buffer on another GPU, which the peers' kernels may not
// read, copied into such memory. Every call counted as one piece.
TEST(ResidentCollectives, CallsPastOneSlotOfRanksOnOneGpuRunAsOnePieceWithTheHostPathsBits) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  const std::vector<TypeCase>& types = kTypes;
  const std::vector<loomRedOp_t> ops{loomSum, loomProd, loomMin, loomMax};
  constexpr size_t kCount = 40001;   // past a slot of 32 KiB in every type
  constexpr size_t kFloats = 10001;  // per block
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<loomComm_t> comms;
    {
      loom::test::ScopedEnv scratch("LOOM_DEVICE_SCRATCH_BYTES", "65536");
      comms = loom::test::initThreadComms(n);
    }
    const uint64_t resident = loom::test::counter("resident_calls");
    const uint64_t whole = loom::test::counter("resident_whole_calls");
    const uint64_t allocated = loom::cuda::fakeStreamAllocations();
    onThreads(n, [&](int r) {
      Stream stream;
      std::vector<std::unique_ptr<DeviceBuffer>> buffers;  // freed once the rank is through (cudaFree waits for every stream)
      // Small integers, exact in every type and under every op (a product
      // of up to four values in 1..3 fits an int8).
      const auto valueOf = [](int rank, size_t call, size_t i) {
        return static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3 + call) % 3) + 1;
      };
      for (const TypeCase& t : types) {
        std::vector<std::vector<std::byte>> inputs(ops.size() * 2), outputs(ops.size() * 2);  // the stream copies them
        for (size_t call = 0; call < outputs.size(); ++call) {
          std::vector<std::byte>& input = inputs[call];
          input.resize(kCount * t.size);
          for (size_t i = 0; i < kCount; ++i) writeValue(t.type, input.data(), i, valueOf(r, call, i));
          auto& send = *buffers.emplace_back(std::make_unique<DeviceBuffer>(kCount * t.size));
          auto& recv = call % 2 == 1 ? send : *buffers.emplace_back(std::make_unique<DeviceBuffer>(kCount * t.size));
          runtime().copy(send.data(), input.data(), input.size(), stream.handle());
          ASSERT_EQ(loomAllReduce(send.data(), recv.data(), kCount, t.type, ops[call / 2], comms[r], stream.loom()),
                    loomSuccess)
              << loomGetLastError(comms[r]);
          outputs[call].resize(kCount * t.size);
          runtime().copy(outputs[call].data(), recv.data(), outputs[call].size(), stream.handle());
        }
        ASSERT_TRUE(stream.finishes()) << "rank " << r;
        for (size_t call = 0; call < outputs.size(); ++call) {
          const loomRedOp_t op = ops[call / 2];
          for (size_t i = 0; i < kCount; ++i) {
            const long long want = fold(op, n, [&](int q) { return valueOf(q, call, i); });
            if (readValue(t.type, outputs[call].data(), i) != want) {
              ADD_FAILURE() << "rank " << r << ", type " << t.type << ", op " << op << (call % 2 ? ", in place" : "")
                            << ", element " << i << ": " << readValue(t.type, outputs[call].data(), i)
                            << ", expected " << want;
              break;
            }
          }
        }
      }
      // Floats against the host path, bit for bit.
      expectTheHostPathsBits(r, n, comms[r], stream, kFloats, 4242u);
    });
    const uint64_t onStreams = static_cast<uint64_t>(n) * (types.size() * ops.size() * 2 + 9);
    EXPECT_EQ(loom::test::counter("resident_calls") - resident, onStreams) << "calls that took the host's path";
    EXPECT_EQ(loom::test::counter("resident_whole_calls") - whole, onStreams) << "calls that ran in pieces";
    // A PreMulSum's scaled input, on every rank, in each of its three calls.
    EXPECT_EQ(loom::cuda::fakeStreamAllocations() - allocated, static_cast<uint64_t>(n) * 3);
    loom::test::destroyAll(comms);
  }

  // Rank 0's send buffer and rank 1's result on a second GPU that the
  // ranks' own (GPU 0) does not read in place: the input copied into memory
  // of the call's own, and rank 1's reduced share put there for rank 0 to
  // read, exact.
  OneFakeGpuAgain again;
  loom::cuda::fakeDeviceGpus(2, false);
  std::vector<loomComm_t> comms;
  {
    loom::test::ScopedEnv scratch("LOOM_DEVICE_SCRATCH_BYTES", "65536");
    comms = loom::test::initThreadComms(2);
  }
  const uint64_t allocated = loom::cuda::fakeStreamAllocations();
  const uint64_t whole = loom::test::counter("resident_whole_calls");
  onThreads(2, [&](int r) {
    Stream stream;
    runtime().setCurrentDevice(r == 0 ? 1 : 0);
    DeviceBuffer send(kCount * 4);
    runtime().setCurrentDevice(r == 1 ? 1 : 0);
    DeviceBuffer recv(kCount * 4);
    runtime().setCurrentDevice(0);
    std::vector<int32_t> in(kCount), out(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) in[i] = value(r, i);
    runtime().copyNow(send.data(), in.data(), kCount * 4);
    ASSERT_EQ(loomAllReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, comms[r], stream.loom()),
              loomSuccess)
        << loomGetLastError(comms[r]);
    ASSERT_TRUE(stream.finishes());
    runtime().copyNow(out.data(), recv.data(), kCount * 4);
    for (size_t i = 0; i < kCount; ++i) {
      if (out[i] != value(0, i) + value(1, i)) {
        ADD_FAILURE() << "rank " << r << ", element " << i << ": " << out[i];
        break;
      }
    }
  });
  EXPECT_EQ(loom::test::counter("resident_whole_calls") - whole, 2u);
  EXPECT_EQ(loom::cuda::fakeStreamAllocations() - allocated, 2u) << "rank 0's input, rank 1's share of the result";
  loom::test::destroyAll(comms);
}

// A resident all-reduce of 3 or more ranks at LOOM_DEVICE_TWO_SHOT_BYTES or
// more runs in two shots (each rank reduces its share, then copies the
// others'), with the host path's bits: random floats through sum, average and
// a per-rank PreMulSum, and exact integers, at counts from 1 (shares of no
// element) past one scratch slot (pieces); below the threshold, one shot. A
// rank's own "reduced" word in its flag line says which ran.
TEST(ResidentAllReduce, LargeCallsOfThreeOrMoreRanksRunInTwoShotsWithTheHostPathsBits) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  std::vector<size_t> counts{1, 2, 7, 70001};
  if (LOOM_TEST_FULL_MATRIX) counts.push_back(1200007);  // three pieces of a 2 MiB slot
  const auto twoShotsRan = [](loomComm_t comm) {
    const loom::ResidentArea* area = comm->resident();
    return area != nullptr && runtime().loadValue(area->reducedFrom(area->rank(), area->rank())) != 0;
  };
  for (int n : {3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<loomComm_t> comms;
    {
      loom::test::ScopedEnv from("LOOM_DEVICE_TWO_SHOT_BYTES", "4");  // every call of a 4-byte element or more
      comms = loom::test::initThreadComms(n);
    }
    const uint64_t before = loom::test::counter("resident_calls");
    onThreads(n, [&](int r) {
      Stream stream;
      const loomRedOp_t premul = premulOf(r, comms[r]);
      const std::vector<loomRedOp_t> ops{loomSum, loomAvg, premul};
      // Every buffer lives to the end, and every host-path call comes before
      // the calls on the stream: freeing device or pinned memory waits for
      // every stream of the process (cudaFree does), the other ranks' too,
      // which may be waiting for this rank's next call.
      std::vector<std::unique_ptr<DeviceBuffer>> sends, viaHost, viaStream, inPlace;
      std::vector<std::vector<float>> inputs;
      for (size_t count : counts) {
        const std::vector<float>& input =
            inputs.emplace_back(randomFloats(count, 777u + static_cast<uint32_t>(r) * 7919u + static_cast<uint32_t>(count)));
        sends.push_back(std::make_unique<DeviceBuffer>(count * 4));
        sends.back()->upload(input.data());
        for (loomRedOp_t op : ops) {
          viaHost.push_back(std::make_unique<DeviceBuffer>(count * 4));
          viaStream.push_back(std::make_unique<DeviceBuffer>(count * 4));
          ASSERT_EQ(loomAllReduce(sends.back()->data(), viaHost.back()->data(), count, loomFloat32, op, comms[r],
                                  nullptr),
                    loomSuccess)
              << loomGetLastError(comms[r]);
        }
        std::vector<int32_t> ints(count);
        for (size_t i = 0; i < count; ++i) ints[i] = static_cast<int32_t>(i % 1000) - 500 + r * 7;
        inPlace.push_back(std::make_unique<DeviceBuffer>(count * 4));
        inPlace.back()->upload(ints.data());
      }
      for (size_t k = 0; k < counts.size(); ++k) {
        for (size_t o = 0; o < ops.size(); ++o) {
          ASSERT_EQ(loomAllReduce(sends[k]->data(), viaStream[k * ops.size() + o]->data(), counts[k], loomFloat32,
                                  ops[o], comms[r], stream.loom()),
                    loomSuccess)
              << loomGetLastError(comms[r]);
        }
        // Integers, exact, in place.
        ASSERT_EQ(loomAllReduce(inPlace[k]->data(), inPlace[k]->data(), counts[k], loomInt32, loomMax, comms[r],
                                stream.loom()),
                  loomSuccess);
      }
      ASSERT_TRUE(stream.finishes()) << "rank " << r;
      for (size_t k = 0; k < counts.size(); ++k) {
        const size_t count = counts[k];
        SCOPED_TRACE(std::to_string(count) + " elements");
        for (size_t o = 0; o < ops.size(); ++o) {
          std::vector<float> host(count), resident(count);
          viaHost[k * ops.size() + o]->download(host.data());
          viaStream[k * ops.size() + o]->download(resident.data());
          size_t at = 0;
          while (at < count && std::memcmp(&host[at], &resident[at], 4) == 0) ++at;
          EXPECT_EQ(at, count) << "op " << ops[o] << ", rank " << r
                               << ": the two-shot result's bits differ from the host's at element " << at;
        }
        std::vector<int32_t> got(count);
        inPlace[k]->download(got.data());
        for (size_t i = 0; i < count; ++i) {
          if (got[i] != static_cast<int32_t>(i % 1000) - 500 + (n - 1) * 7) {
            ADD_FAILURE() << "rank " << r << ", element " << i << ": " << got[i];
            break;
          }
        }
      }
      EXPECT_TRUE(twoShotsRan(comms[r])) << "rank " << r << ": no call ran in two shots";
      EXPECT_EQ(loomRedOpDestroy(premul, comms[r]), loomSuccess);
    });
    EXPECT_EQ(loom::test::counter("resident_calls") - before, static_cast<uint64_t>(n) * counts.size() * 4)
        << "calls that took the host's path";
    loom::test::destroyAll(comms);
    // The default threshold (512 KiB): a call of 4 KiB runs in one shot.
    comms = loom::test::initThreadComms(n);
    onThreads(n, [&](int r) {
      Stream stream;
      DeviceBuffer buffer(4096);
      ASSERT_EQ(loomAllReduce(buffer.data(), buffer.data(), 1024, loomInt32, loomSum, comms[r], stream.loom()),
                loomSuccess);
      ASSERT_TRUE(stream.finishes());
      EXPECT_FALSE(twoShotsRan(comms[r])) << "rank " << r << ": a 4 KiB call ran in two shots";
    });
    loom::test::destroyAll(comms);
  }
}

// Ranks that are threads of one process publish where each piece's input
// lies, and a rank whose send buffer does not overlap its result offers it
// to be read in place: every collective, out of place, past one scratch slot
// (2 MiB; 600001 int32), each as one piece, exact, with nothing copied into a
// scratch (the fake's stream copies count them) and every rank that has an
// input counted as offering it; ranks that mix in place and out of place in
// one all-reduce, exact: within one slot the ranks in place go through their
// scratch, past it every rank reads in place (two shots); and an input read
// in place stays its readers' until they are done: each rank overwrites its
// send buffer on its stream right after the call, and every result is still
// exact.
TEST(ResidentCollectives, RanksOfOneProcessReadEachOthersInputsInPlace) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  constexpr size_t kCount = 600001;
  const auto sum = [](int n, size_t i) {
    int32_t s = 0;
    for (int q = 0; q < n; ++q) s += value(q, i);
    return s;
  };
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const auto nn = static_cast<size_t>(n);
    const int root = n - 1;
    const uint64_t copied = loom::cuda::fakeBytesCopied();
    const uint64_t offered = loom::test::counter("resident_calls_offered_in_place");
    const uint64_t before = loom::test::counter("resident_calls");
    const uint64_t whole = loom::test::counter("resident_whole_calls");
    // The stream copies onStreams itself makes: each rank's input in, its result out.
    uint64_t ownCopies = 0;
    const auto run = [&](size_t sendCount, size_t recvCount, auto&&... rest) {
      ownCopies += nn * (sendCount + recvCount) * 4;
      onStreams(n, sendCount, recvCount, rest...);
    };
    run(kCount, kCount,
              [](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomAllReduce(s, r, c, loomInt32, loomSum, comm, st);
              },
              value, [&](int, size_t i) { return sum(n, i); });
    run(kCount, kCount,
              [root](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomReduce(s, r, c, loomInt32, loomSum, root, comm, st);
              },
              value, [&](int, size_t i) { return sum(n, i); }, [root](int r) { return r == root; });
    run(kCount * nn, kCount,
              [nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomReduceScatter(s, r, c / nn, loomInt32, loomSum, comm, st);
              },
              value, [&](int rank, size_t i) { return sum(n, static_cast<size_t>(rank) * kCount + i); });
    run(kCount, kCount * nn,
              [](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomAllGather(s, r, c, loomInt32, comm, st);
              },
              value, [](int, size_t i) { return value(static_cast<int>(i / kCount), i % kCount); });
    run(kCount, kCount,
              [root](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomBroadcast(s, r, c, loomInt32, root, comm, st);
              },
              value, [root](int, size_t i) { return value(root, i); });
    run(kCount * nn, kCount * nn,
              [nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomAlltoAll(s, r, c / nn, loomInt32, comm, st);
              },
              value, [](int rank, size_t i) {
                return value(static_cast<int>(i / kCount), static_cast<size_t>(rank) * kCount + i % kCount);
              });
    run(kCount, kCount * nn,
              [root](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomGather(s, r, c, loomInt32, root, comm, st);
              },
              value, [](int, size_t i) { return value(static_cast<int>(i / kCount), i % kCount); },
              [root](int r) { return r == root; });
    run(kCount * nn, kCount,
              [root, nn](const void* s, void* r, size_t c, int, loomComm_t comm, loomStream_t st) {
                return loomScatter(s, r, c / nn, loomInt32, root, comm, st);
              },
              value, [root](int rank, size_t i) { return value(root, static_cast<size_t>(rank) * kCount + i); });
    EXPECT_EQ(loom::test::counter("resident_calls") - before, 8 * nn) << "calls that took the host's path";
    EXPECT_EQ(loom::test::counter("resident_whole_calls") - whole, 8 * nn) << "calls that ran in pieces";
    // Every rank of the six calls where every rank sends; the root alone of
    // a broadcast's and a scatter's.
    EXPECT_EQ(loom::test::counter("resident_calls_offered_in_place") - offered, 6 * nn + 2);
    EXPECT_EQ(loom::cuda::fakeBytesCopied() - copied, ownCopies) << "bytes copied into a scratch";

    // Even ranks in place, odd ones out of place: within one slot (100001
    // int32) the even ranks go through their scratch, past it none does.
    auto comms = loom::test::initThreadComms(n);
    for (const size_t count : {size_t{100001}, kCount}) {
      SCOPED_TRACE(std::to_string(count) + " elements");
      const uint64_t mixed = loom::test::counter("resident_calls_offered_in_place");
      onThreads(n, [&](int r) {
        Stream stream;
        std::vector<int32_t> in(count), out(count, -1);
        for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
        DeviceBuffer send(count * 4), recv(count * 4);
        void* result = r % 2 == 0 ? send.data() : recv.data();
        runtime().copy(send.data(), in.data(), count * 4, stream.handle());
        ASSERT_EQ(loomAllReduce(send.data(), result, count, loomInt32, loomSum, comms[r], stream.loom()), loomSuccess);
        runtime().copy(out.data(), result, count * 4, stream.handle());
        ASSERT_TRUE(stream.finishes());
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          if (out[i] != sum(n, i) && wrong++ < 3) ADD_FAILURE() << "rank " << r << ", element " << i << ": " << out[i];
        }
      });
      EXPECT_EQ(loom::test::counter("resident_calls_offered_in_place") - mixed, count == kCount ? nn : nn / 2)
          << "ranks that offered their own buffers";
    }

    // The input is overwritten on the rank's stream right after each call: a
    // reduce, where the ranks that read nothing go on at once while the root
    // still reads, and an all-reduce.
    onThreads(n, [&](int r) {
      Stream stream;
      std::vector<int32_t> in(kCount), out(kCount, -1);
      const std::vector<int32_t> garbage(kCount, -7);
      DeviceBuffer send(kCount * 4), recv(kCount * 4);
      for (int round = 0; round < 10; ++round) {
        const bool reduce = round % 2 == 0;
        for (size_t i = 0; i < kCount; ++i) in[i] = value(r, i + static_cast<size_t>(round));
        runtime().copy(send.data(), in.data(), kCount * 4, stream.handle());
        ASSERT_EQ(reduce ? loomReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, root, comms[r], stream.loom())
                         : loomAllReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, comms[r], stream.loom()),
                  loomSuccess);
        runtime().copy(send.data(), garbage.data(), kCount * 4, stream.handle());
        runtime().copy(out.data(), recv.data(), kCount * 4, stream.handle());
        ASSERT_TRUE(stream.finishes());
        size_t wrong = 0;
        for (size_t i = 0; (!reduce || r == root) && i < kCount; ++i) {
          if (out[i] != sum(n, i + static_cast<size_t>(round)) && wrong++ < 3) {
            ADD_FAILURE() << "rank " << r << ", round " << round << ", element " << i << ": " << out[i]
                          << ": a peer overwrote its input while this rank read it";
          }
        }
      }
    });
    loom::test::destroyAll(comms);
  }
}

// In place (NCCL's layouts), ranks of one process still offer their inputs
// where no peer reads what they write: all-gather, reduce-scatter,
// broadcast, reduce, gather and scatter, past one slot, exact, counted as
// offered and copying nothing into a scratch; an all-reduce in place, whose
// result overwrites what every peer reads, reads in place too in two shots
// (each rank overwrites a share only once its peers have read it), past one
// slot; within one slot it goes through the scratch (one shot). Exact.
TEST(ResidentCollectives, CallsInPlaceOfRanksOfOneProcessReadInPlaceWhereNoPeerReadsWhatTheyWrite) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  constexpr size_t kCount = 600001;
  constexpr size_t kOneSlot = 100001;
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const auto nn = static_cast<size_t>(n);
    const int root = n - 1;
    const auto sum = [n](size_t i) {
      int32_t s = 0;
      for (int q = 0; q < n; ++q) s += value(q, i);
      return s;
    };
    // One call in place: the buffer's elements, where the input lies in it
    // and where the call reads and writes (elements), and what the result's
    // element i must be (checked on `checked` ranks).
    struct InPlace {
      std::string name;
      size_t elements;
      std::function<size_t(int r)> send, recv;  // offsets in the buffer
      size_t inputCount;                        // elements of input at send
      std::function<int32_t(int r, size_t i)> input;
      std::function<loomResult_t(void* send, void* recv, loomComm_t, loomStream_t)> call;
      size_t resultCount;
      std::function<int32_t(int r, size_t i)> expected;
      std::function<bool(int r)> checked;
      bool offered;  // by every rank that has an input
    };
    const auto all = [](int) { return true; };
    const auto atRoot = [root](int r) { return r == root; };
    const auto at = [](size_t elements) { return [elements](int r) { return static_cast<size_t>(r) * elements; }; };
    const auto zero = [](int) { return size_t{0}; };
    const std::vector<InPlace> cases{
        {"all-gather", kCount * nn, at(kCount), zero, kCount, value,
         [](void* s, void* r, loomComm_t c, loomStream_t st) { return loomAllGather(s, r, kCount, loomInt32, c, st); },
         kCount * nn, [](int, size_t i) { return value(static_cast<int>(i / kCount), i % kCount); }, all, true},
        {"reduce-scatter", kCount * nn, zero, at(kCount), kCount * nn, value,
         [](void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomReduceScatter(s, r, kCount, loomInt32, loomSum, c, st);
         },
         kCount, [&](int r, size_t i) { return sum(static_cast<size_t>(r) * kCount + i); }, all, true},
        {"broadcast", kCount, zero, zero, kCount, value,
         [root](void* s, void* r, loomComm_t c, loomStream_t st) { return loomBroadcast(s, r, kCount, loomInt32, root, c, st); },
         kCount, [root](int, size_t i) { return value(root, i); }, all, true},
        {"reduce", kCount, zero, zero, kCount, value,
         [root](void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomReduce(s, r, kCount, loomInt32, loomSum, root, c, st);
         },
         kCount, [&](int, size_t i) { return sum(i); }, atRoot, true},
        {"gather", kCount * nn, at(kCount), zero, kCount, value,
         [root](void* s, void* r, loomComm_t c, loomStream_t st) { return loomGather(s, r, kCount, loomInt32, root, c, st); },
         kCount * nn, [](int, size_t i) { return value(static_cast<int>(i / kCount), i % kCount); }, atRoot, true},
        {"scatter", kCount * nn, zero, at(kCount), kCount * nn, value,
         [root](void* s, void* r, loomComm_t c, loomStream_t st) { return loomScatter(s, r, kCount, loomInt32, root, c, st); },
         kCount, [root](int r, size_t i) { return value(root, static_cast<size_t>(r) * kCount + i); }, all, true},
        {"all-reduce", kCount, zero, zero, kCount, value,
         [](void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomAllReduce(s, r, kCount, loomInt32, loomSum, c, st);
         },
         kCount, [&](int, size_t i) { return sum(i); }, all, true},
        {"all-reduce within one slot", kOneSlot, zero, zero, kOneSlot, value,
         [](void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomAllReduce(s, r, kOneSlot, loomInt32, loomSum, c, st);
         },
         kOneSlot, [&](int, size_t i) { return sum(i); }, all, false}};
    auto comms = loom::test::initThreadComms(n);
    for (const InPlace& k : cases) {
      SCOPED_TRACE(k.name);
      const uint64_t offered = loom::test::counter("resident_calls_offered_in_place");
      const uint64_t copied = loom::cuda::fakeBytesCopied();
      onThreads(n, [&](int r) {
        Stream stream;
        std::vector<int32_t> in(k.inputCount), out(k.resultCount, -1);
        for (size_t i = 0; i < k.inputCount; ++i) in[i] = k.input(r, i);
        DeviceBuffer buffer(k.elements * 4);
        auto* base = reinterpret_cast<int32_t*>(buffer.data());
        runtime().copyNow(base + k.send(r), in.data(), k.inputCount * 4);
        ASSERT_EQ(k.call(base + k.send(r), base + k.recv(r), comms[r], stream.loom()), loomSuccess)
            << loomGetLastError(comms[r]);
        ASSERT_TRUE(stream.finishes());
        if (!k.checked(r)) return;
        runtime().copyNow(out.data(), base + (k.name == "all-gather" || k.name == "gather" ? 0 : k.recv(r)),
                          k.resultCount * 4);
        size_t wrong = 0;
        for (size_t i = 0; i < k.resultCount; ++i) {
          if (out[i] != k.expected(r, i) && wrong++ < 3) {
            ADD_FAILURE() << "rank " << r << ", element " << i << ": " << out[i] << ", expected " << k.expected(r, i);
          }
        }
      });
      // The rooted calls' inputs: every rank's for reduce and gather, the
      // root's alone for broadcast and scatter.
      const bool rootAlone = k.name == "broadcast" || k.name == "scatter";
      const uint64_t offerers = k.offered ? (rootAlone ? 1 : nn) : 0;
      EXPECT_EQ(loom::test::counter("resident_calls_offered_in_place") - offered, offerers);
      if (k.offered) {
        EXPECT_EQ(loom::cuda::fakeBytesCopied(), copied) << "bytes copied into a scratch";
      }
    }
    loom::test::destroyAll(comms);
  }
}

// One out-of-place all-reduce of `n` ranks as threads, rank r on fake GPU r
// % gpus: rank 0's input on the last GPU, the others' on their own; exact,
// resident, and `offering` ranks offered their inputs in place.
void runOneAllReduceOnGpus(int gpus, int n, size_t count, uint64_t offering) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  onThreads(n, [&](int r) {
    runtime().setCurrentDevice(r % gpus);
    EXPECT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), loomSuccess)
        << loomGetLastError(nullptr);
  });
  const uint64_t offered = loom::test::counter("resident_calls_offered_in_place");
  const uint64_t resident = loom::test::counter("resident_calls");
  onThreads(n, [&](int r) {
    runtime().setCurrentDevice(r % gpus);
    Stream stream;
    runtime().setCurrentDevice(r == 0 ? gpus - 1 : r % gpus);
    DeviceBuffer send(count * 4);
    runtime().setCurrentDevice(r % gpus);
    DeviceBuffer recv(count * 4);
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
    runtime().copyNow(send.data(), in.data(), count * 4);
    ASSERT_EQ(loomAllReduce(send.data(), recv.data(), count, loomInt32, loomSum, comms[static_cast<size_t>(r)],
                            stream.loom()),
              loomSuccess)
        << loomGetLastError(comms[static_cast<size_t>(r)]);
    ASSERT_TRUE(stream.finishes());
    runtime().copyNow(out.data(), recv.data(), count * 4);
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, i);
      if (out[i] != sum) {
        ADD_FAILURE() << "rank " << r << ", element " << i << ": " << out[i];
        break;
      }
    }
  });
  EXPECT_EQ(loom::test::counter("resident_calls") - resident, static_cast<uint64_t>(n)) << "calls that took the host's path";
  EXPECT_EQ(loom::test::counter("resident_calls_offered_in_place") - offered, offering);
  loom::test::destroyAll(comms);
}

// Ranks of one process on GPUs of their own that reach each other as peers:
// a rank offers its input in place only where it lies on the rank's own GPU
// (its area's, which every rank's kernels reach); a buffer on another GPU
// goes through the scratch, and so does one from a memory pool
// (cudaMallocAsync's), which peer access does not open to other GPUs; on
// one GPU a pool's buffer is read in place. Exact every time.
TEST(ResidentCollectives, ARankOffersInPlaceOnlyABufferEveryPeerReaches) {
  if (!fake()) GTEST_SKIP() << "the fake device's GPUs";
  struct OneGpuAgain {
    ~OneGpuAgain() {
      loom::cuda::fakeDeviceGpus(1, true);
      loom::cuda::fakeMemoryPools(false);
    }
  } again;
  constexpr int kRanks = 2;
  constexpr size_t kCount = 70001;
  // GPUs, whether buffers come from pools, and the ranks expected to offer.
  struct Case {
    int gpus;
    bool pools;
    uint64_t offering;
  };
  for (const Case& k : {Case{2, false, 1}, Case{2, true, 0}, Case{1, true, 2}}) {
    SCOPED_TRACE(std::to_string(k.gpus) + " GPUs, pools " + std::to_string(k.pools));
    loom::cuda::fakeDeviceGpus(k.gpus, true);
    loom::cuda::fakeMemoryPools(k.pools);
    runOneAllReduceOnGpus(k.gpus, kRanks, kCount, k.offering);
  }
}


// Ranks whose buffers are read in place but who still go in pieces (threads
// on GPUs of their own, as processes do) publish every piece of a call at
// once, as a range in one entry, with "arrived" up to its last piece: its
// readers never wait for it between pieces. Six collectives and a ring of
// sends (five 512 KiB pieces each) of 2 and 3 ranks past one slot (three
// pieces of 600001 int32 a block at most), five rounds with new values, each
// rank overwriting its input on its stream right after the call: exact.
// Rank 0's input on another GPU goes through its scratch, piece by piece,
// beside the ranges of the others.
TEST(ResidentCollectives, RanksReadInPlaceInPiecesPublishEveryPieceAtOnce) {
  if (!fake()) GTEST_SKIP() << "the fake device's GPUs";
  OneFakeGpuAgain again;
  constexpr size_t kCount = 600001;
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const auto nn = static_cast<size_t>(n);
    auto comms = initThreadCommsOnGpus(n, 2);
    // Each call: input and result elements, the call, and what rank r's
    // result holds at i in round k (checked where `checked`).
    struct Case {
      std::string name;
      size_t sendCount, recvCount;
      std::function<loomResult_t(const void*, void*, loomComm_t, loomStream_t)> run;
      std::function<int32_t(int r, size_t i, int k)> expected;
      bool rootOnly = false;
    };
    const int root = n - 1;
    const auto input = [](int r, size_t i, int k) { return value(r, i + static_cast<size_t>(k) * 7); };
    const auto sum = [&](size_t i, int k) {
      int32_t total = 0;
      for (int q = 0; q < n; ++q) total += input(q, i, k);
      return total;
    };
    const std::vector<Case> calls{
        {"all-reduce", kCount, kCount,
         [](const void* s, void* r, loomComm_t c, loomStream_t st) { return loomAllReduce(s, r, kCount, loomInt32, loomSum, c, st); },
         [&](int, size_t i, int k) { return sum(i, k); }},
        {"reduce", kCount, kCount,
         [root](const void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomReduce(s, r, kCount, loomInt32, loomSum, root, c, st);
         },
         [&](int, size_t i, int k) { return sum(i, k); }, true},
        {"reduce-scatter", kCount * nn, kCount,
         [](const void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomReduceScatter(s, r, kCount, loomInt32, loomSum, c, st);
         },
         [&](int r, size_t i, int k) { return sum(static_cast<size_t>(r) * kCount + i, k); }},
        {"all-gather", kCount, kCount * nn,
         [](const void* s, void* r, loomComm_t c, loomStream_t st) { return loomAllGather(s, r, kCount, loomInt32, c, st); },
         [&](int, size_t i, int k) { return input(static_cast<int>(i / kCount), i % kCount, k); }},
        {"broadcast", kCount, kCount,
         [root](const void* s, void* r, loomComm_t c, loomStream_t st) {
           return loomBroadcast(s, r, kCount, loomInt32, root, c, st);
         },
         [&](int, size_t i, int k) { return input(root, i, k); }},
        {"all-to-all", kCount * nn, kCount * nn,
         [](const void* s, void* r, loomComm_t c, loomStream_t st) { return loomAlltoAll(s, r, kCount, loomInt32, c, st); },
         [&](int r, size_t i, int k) { return input(static_cast<int>(i / kCount), static_cast<size_t>(r) * kCount + i % kCount, k); }},
        {"a ring of sends", kCount, kCount,
         [n](const void* s, void* r, loomComm_t c, loomStream_t st) {
           int me = 0;
           if (const loomResult_t e = loomCommUserRank(c, &me); e != loomSuccess) return e;
           if (const loomResult_t e = loomGroupStart(); e != loomSuccess) return e;
           loomSend(s, kCount, loomInt32, (me + 1) % n, c, st);
           loomRecv(r, kCount, loomInt32, (me + n - 1) % n, c, st);
           return loomGroupEnd();
         },
         [&](int r, size_t i, int k) { return input((r + n - 1) % n, i, k); }}};
    for (const Case& call : calls) {
      SCOPED_TRACE(call.name);
      onThreads(n, [&](int r) {
        runtime().setCurrentDevice(r % 2);
        Stream stream;
        runtime().setCurrentDevice(r == 0 ? 1 : r % 2);  // rank 0's input off its GPU: its scratch
        DeviceBuffer send(call.sendCount * 4);
        runtime().setCurrentDevice(r % 2);
        DeviceBuffer recv(call.recvCount * 4);
        std::vector<int32_t> in(call.sendCount), out(call.recvCount);
        const std::vector<int32_t> garbage(call.sendCount, -7);
        for (int k = 0; k < 5; ++k) {
          for (size_t i = 0; i < call.sendCount; ++i) in[i] = input(r, i, k);
          runtime().copy(send.data(), in.data(), call.sendCount * 4, stream.handle());
          ASSERT_EQ(call.run(send.data(), recv.data(), comms[static_cast<size_t>(r)], stream.loom()), loomSuccess)
              << loomGetLastError(comms[static_cast<size_t>(r)]);
          runtime().copy(send.data(), garbage.data(), call.sendCount * 4, stream.handle());
          runtime().copy(out.data(), recv.data(), call.recvCount * 4, stream.handle());
          ASSERT_TRUE(stream.finishes()) << "rank " << r;
          if (call.rootOnly && r != root) continue;
          for (size_t i = 0; i < call.recvCount; ++i) {
            if (out[i] != call.expected(r, i, k)) {
              ADD_FAILURE() << "rank " << r << ", round " << k << ", element " << i << ": " << out[i] << ", expected "
                            << call.expected(r, i, k);
              break;
            }
          }
        }
      });
    }
    // The last collective's range, in rank 1's line: an all-to-all of 3
    // pieces a block with 2 ranks (1 slot / 2 ranks a piece), 4 with 3.
    const loom::ResidentArea& area = *comms[1]->resident();
    const uint64_t last = runtime().loadValue(area.finished());
    const uint64_t pieces = n == 2 ? 3 : 4;
    const loom::PublishedPiece* entry = area.published(1, last - pieces + 1);
    EXPECT_EQ(runtime().loadValue(&entry->sequence), last - pieces + 1);
    EXPECT_EQ(runtime().loadValue(&entry->regions) >> 32, pieces - 1) << "pieces published with the first";
    loom::test::destroyAll(comms);
  }
}

// A rank of one process whose call is let go (its communicator aborted, a
// peer never came) reads nothing from places its peers published for calls
// before: its result is left as it was, not filled from a stale place.
TEST(ResidentCollectives, AReleasedCallReadsNoPlaceLeftFromAnEarlierCall) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  // Ranks on GPUs of their own: the entry gate (comm/entry_gate.hpp) holds a
  // call for a peer on its GPU at the host; here the stream waits.
  OneFakeGpuAgain again;
  auto comms = initThreadCommsOnGpus(2, 2);
  constexpr size_t kCount = 1024;
  std::vector<std::unique_ptr<DeviceBuffer>> sends, recvs;
  for (int r = 0; r < 2; ++r) {
    sends.push_back(std::make_unique<DeviceBuffer>(kCount * 4));
    recvs.push_back(std::make_unique<DeviceBuffer>(kCount * 4));
  }
  // Two calls that both ranks make (one for each published entry).
  onThreads(2, [&](int r) {
    Stream stream;
    const std::vector<int32_t> ones(kCount, 1);
    runtime().copy(sends[r]->data(), ones.data(), kCount * 4, stream.handle());
    for (int call = 0; call < 2; ++call) {
      ASSERT_EQ(loomAllReduce(sends[r]->data(), recvs[r]->data(), kCount, loomInt32, loomSum, comms[r], stream.loom()),
                loomSuccess);
    }
    ASSERT_TRUE(stream.finishes());
  });
  // A third that rank 1 never makes, of 0's, into a result of -1's.
  Stream stream;
  const std::vector<int32_t> zeros(kCount, 0), marks(kCount, -1);
  runtime().copyNow(sends[0]->data(), zeros.data(), kCount * 4);
  runtime().copyNow(recvs[0]->data(), marks.data(), kCount * 4);
  for (int call = 0; call < 2; ++call) {
    ASSERT_EQ(loomAllReduce(sends[0]->data(), recvs[0]->data(), kCount, loomInt32, loomSum, comms[0], stream.loom()),
              loomSuccess);
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(runtime().idle(stream.handle())) << "the stream went past a call whose peer never came";
  EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess);
  EXPECT_TRUE(stream.finishes()) << "the stream still waits for an aborted call";
  std::vector<int32_t> got(kCount);
  runtime().copyNow(got.data(), recvs[0]->data(), kCount * 4);
  EXPECT_EQ(got, marks) << "the released calls read rank 1's places from the calls before";
  EXPECT_EQ(loomCommAbort(comms[1]), loomSuccess);
}

// Symmetric windows (loomCommWindowRegister): a call on a stream whose send
// buffer lies in one, at the same offset on every rank, reads its peers'
// inputs where they lie, copying nothing into the scratch: all-reduce (sum,
// average, max; floats with the host path's bits), all-gather,
// reduce-scatter and all-to-all, exact; in place, through the scratch as
// before; a window whose size differs on one rank is refused on every rank,
// naming it.
TEST(SymmetricWindows, CallsReadTheirPeersInputsInPlaceWithTheHostPathsResults) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  constexpr size_t kCount = 70001;
  constexpr size_t kOffset = 4096;  // bytes into the window, the same on every rank
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const auto nn = static_cast<size_t>(n);
    auto comms = loom::test::initThreadComms(n);
    const uint64_t inWindows = loom::test::counter("resident_calls_in_windows");
    onThreads(n, [&](int r) {
      Stream stream;
      const size_t windowBytes = kOffset + kCount * nn * 4;
      DeviceBuffer window(windowBytes), viaHost(kCount * nn * 4), viaStream(kCount * nn * 4);
      loomWindow_t win = nullptr;
      ASSERT_EQ(loomCommWindowRegister(comms[r], window.data(), windowBytes, &win, LOOM_WIN_COLL_SYMMETRIC), loomSuccess)
          << loomGetLastError(comms[r]);
      void* back = nullptr;
      ASSERT_EQ(loomWinGetUserPtr(comms[r], win, &back), loomSuccess);
      EXPECT_EQ(back, window.data());
      auto* send = static_cast<std::byte*>(window.data()) + kOffset;
      const std::vector<float> floats = randomFloats(kCount * nn, 99u + static_cast<uint32_t>(r) * 31u);
      runtime().copyNow(send, floats.data(), floats.size() * 4);
      using Run = std::function<loomResult_t(loomStream_t, void*)>;
      const std::vector<std::pair<std::string, Run>> calls{
          {"all-reduce sum", [&](loomStream_t st, void* out) {
             return loomAllReduce(send, out, kCount, loomFloat32, loomSum, comms[r], st);
           }},
          {"all-reduce avg", [&](loomStream_t st, void* out) {
             return loomAllReduce(send, out, kCount, loomFloat32, loomAvg, comms[r], st);
           }},
          {"all-reduce max", [&](loomStream_t st, void* out) {
             return loomAllReduce(send, out, kCount, loomInt32, loomMax, comms[r], st);
           }},
          {"all-gather", [&](loomStream_t st, void* out) {
             return loomAllGather(send, out, kCount, loomFloat32, comms[r], st);
           }},
          {"reduce-scatter", [&](loomStream_t st, void* out) {
             return loomReduceScatter(send, out, kCount, loomFloat32, loomSum, comms[r], st);
           }},
          {"all-to-all", [&](loomStream_t st, void* out) {
             return loomAlltoAll(send, out, kCount, loomFloat32, comms[r], st);
           }}};
      for (const auto& [name, call] : calls) {
        ASSERT_EQ(call(nullptr, viaHost.data()), loomSuccess) << name << ": " << loomGetLastError(comms[r]);
        const uint64_t copied = loom::cuda::fakeBytesCopied();
        ASSERT_EQ(call(stream.loom(), viaStream.data()), loomSuccess) << name << ": " << loomGetLastError(comms[r]);
        ASSERT_TRUE(stream.finishes()) << name;
        if (name.starts_with("all-reduce")) {
          EXPECT_EQ(loom::cuda::fakeBytesCopied(), copied) << name << ": bytes copied, where the peers' inputs are read in place";
        }
        std::vector<std::byte> host(kCount * nn * 4), resident(kCount * nn * 4);
        viaHost.download(host.data());
        viaStream.download(resident.data());
        const size_t bytes = name == "reduce-scatter" || name.starts_with("all-reduce") ? kCount * 4 : kCount * nn * 4;
        EXPECT_EQ(std::memcmp(host.data(), resident.data(), bytes), 0) << name << ", rank " << r
                                                                       << ": the result differs from the host path's";
      }
      // In place: through the scratch, with the same result.
      DeviceBuffer inPlace(kCount * 4);
      runtime().copyNow(inPlace.data(), send, kCount * 4);
      ASSERT_EQ(loomAllReduce(send, send, kCount, loomFloat32, loomSum, comms[r], stream.loom()), loomSuccess);
      ASSERT_TRUE(stream.finishes());
      std::vector<std::byte> host(kCount * nn * 4), resident(kCount * 4);
      ASSERT_EQ(loomAllReduce(inPlace.data(), viaHost.data(), kCount, loomFloat32, loomSum, comms[r], nullptr), loomSuccess);
      viaHost.download(host.data());
      runtime().copyNow(resident.data(), send, kCount * 4);
      EXPECT_EQ(std::memcmp(host.data(), resident.data(), kCount * 4), 0) << "in place, rank " << r;
      ASSERT_EQ(loomCommWindowDeregister(comms[r], win), loomSuccess) << loomGetLastError(comms[r]);
      EXPECT_EQ(loomWinGetUserPtr(comms[r], win, &back), loomInvalidArgument);
      // A size that differs on the last rank: refused everywhere, naming it.
      const size_t size = r == n - 1 ? 8192 : 4096;
      EXPECT_EQ(loomCommWindowRegister(comms[r], window.data(), size, &win, LOOM_WIN_COLL_SYMMETRIC),
                loomInvalidArgument);
      EXPECT_NE(std::string(loomGetLastError(comms[r])).find("rank " + std::to_string(n - 1) + ": 8192 bytes"),
                std::string::npos)
          << loomGetLastError(comms[r]);
      EXPECT_EQ(win, nullptr);
    });
    // Six calls a rank read in place (the in-place one did not).
    EXPECT_EQ(loom::test::counter("resident_calls_in_windows") - inWindows, 6 * nn);
    loom::test::destroyAll(comms);
  }
}

// An all-reduce of 3 or more ranks from the two-shot size whose send and
// receive buffers both lie in symmetric windows reads in two shots straight
// from them (each rank reduces its share of every input into its own result,
// the others copy it out of there): the host path's bits for floats (sum,
// average), exact integers, from 1 element (shares of none) up.
TEST(SymmetricWindows, LargeAllReducesOfThreeOrMoreRanksRunInTwoShotsFromTheWindows) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  constexpr size_t kMost = 70001;
  constexpr size_t kOffset = 4096;
  for (int n : {3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<loomComm_t> comms;
    {
      loom::test::ScopedEnv from("LOOM_DEVICE_TWO_SHOT_BYTES", "4");
      comms = loom::test::initThreadComms(n);
    }
    const uint64_t inWindows = loom::test::counter("resident_calls_in_windows");
    size_t calls = 0;
    onThreads(n, [&](int r) {
      Stream stream;
      const size_t windowBytes = kOffset + kMost * 4;
      DeviceBuffer in(windowBytes), out(windowBytes), viaHost(kMost * 4);
      loomWindow_t inWin = nullptr, outWin = nullptr;
      ASSERT_EQ(loomCommWindowRegister(comms[r], in.data(), windowBytes, &inWin, LOOM_WIN_COLL_SYMMETRIC), loomSuccess);
      ASSERT_EQ(loomCommWindowRegister(comms[r], out.data(), windowBytes, &outWin, LOOM_WIN_COLL_SYMMETRIC), loomSuccess);
      auto* send = static_cast<std::byte*>(in.data()) + kOffset;
      auto* recv = static_cast<std::byte*>(out.data()) + kOffset;
      const std::vector<float> floats = randomFloats(kMost, 5u + static_cast<uint32_t>(r) * 131u);
      runtime().copyNow(send, floats.data(), kMost * 4);
      size_t mine = 0;
      // Every host-path call first: one frees pinned memory, which waits for
      // every stream of the process, the other ranks' too, which may be
      // waiting for this rank's next call on its stream.
      const std::vector<size_t> counts{1, 2, 7, kMost};
      const std::vector<loomRedOp_t> ops{loomSum, loomAvg};
      std::vector<std::vector<float>> host;
      for (size_t count : counts) {
        for (loomRedOp_t op : ops) {
          ASSERT_EQ(loomAllReduce(send, viaHost.data(), count, loomFloat32, op, comms[r], nullptr), loomSuccess);
          host.emplace_back(kMost);
          viaHost.download(host.back().data());
        }
      }
      for (size_t k = 0; k < counts.size(); ++k) {
        for (size_t o = 0; o < ops.size(); ++o) {
          ASSERT_EQ(loomAllReduce(send, recv, counts[k], loomFloat32, ops[o], comms[r], stream.loom()), loomSuccess)
              << loomGetLastError(comms[r]);
          ++mine;
          ASSERT_TRUE(stream.finishes());
          std::vector<float> resident(counts[k]);
          runtime().copyNow(resident.data(), recv, counts[k] * 4);
          EXPECT_EQ(std::memcmp(host[k * ops.size() + o].data(), resident.data(), counts[k] * 4), 0)
              << counts[k] << " elements, op " << ops[o] << ", rank " << r << ": the bits differ from the host path's";
        }
      }
      // Integers, exact: the max of every rank's.
      std::vector<int32_t> ints(kMost);
      for (size_t i = 0; i < kMost; ++i) ints[i] = static_cast<int32_t>(i % 1000) + r * 7;
      runtime().copyNow(send, ints.data(), kMost * 4);
      ASSERT_EQ(loomAllReduce(send, recv, kMost, loomInt32, loomMax, comms[r], stream.loom()), loomSuccess);
      ++mine;
      ASSERT_TRUE(stream.finishes());
      std::vector<int32_t> got(kMost);
      runtime().copyNow(got.data(), recv, kMost * 4);
      for (size_t i = 0; i < kMost; ++i) {
        if (got[i] != static_cast<int32_t>(i % 1000) + (n - 1) * 7) {
          ADD_FAILURE() << "rank " << r << ", element " << i << ": " << got[i];
          break;
        }
      }
      const loom::ResidentArea* area = comms[r]->resident();
      ASSERT_NE(area, nullptr);
      EXPECT_NE(runtime().loadValue(area->reducedFrom(r, r)), 0u) << "rank " << r << ": no call ran in two shots";
      if (r == 0) calls = mine;
      EXPECT_EQ(loomCommWindowDeregister(comms[r], inWin), loomSuccess);
      EXPECT_EQ(loomCommWindowDeregister(comms[r], outWin), loomSuccess);
    });
    EXPECT_EQ(loom::test::counter("resident_calls_in_windows") - inWindows, static_cast<uint64_t>(n) * calls);
    loom::test::destroyAll(comms);
  }
}

// PyTorch's batch_isend_irecv as it reached Loom's NCCL: every rank sends
// first, then receives, in one group, on its communicator's stream; larger
// than the FIFO, so the receives take the sends' device buffers by handle.
TEST(CallsOnAStream, AGroupOfSendsBeforeReceivesCompletes) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  for (int n : {2, 3}) {
    for (size_t count : {size_t{257}, size_t{2} << 20}) {  // 8 MiB: past the FIFO
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(count) + " elements");
      onStreams(
          n, count, count,
          [n](const void* s, void* r, size_t c, int rank, loomComm_t comm, loomStream_t st) {
            if (loomGroupStart() != loomSuccess) return loomInternalError;
            const loomResult_t sent = loomSend(s, c, loomInt32, (rank + 1) % n, comm, st);
            const loomResult_t received = loomRecv(r, c, loomInt32, (rank + n - 1) % n, comm, st);
            const loomResult_t ended = loomGroupEnd();
            return sent != loomSuccess ? sent : received != loomSuccess ? received : ended;
          },
          value, [n](int rank, size_t i) { return value((rank + n - 1) % n, i); });
    }
  }
}

// Sends and receives of device memory on streams between ranks whose
// devices reach each other go resident (comm/engine/resident_p2p.hpp):
// exact at 1 element, one slot and several pieces, however each side groups
// its calls: a ring sending first in one group; rank 0 sending and
// receiving in one group while rank 1 receives first, alone (NCCL's
// per-peer channels let rank 0's receive run beside its send); a message
// sent as three in one group and received as three calls; a rank sending to
// itself. Nothing is staged through pinned memory.
TEST(ResidentSendRecv, EveryGroupingOfEverySizeGoesOnTheStreamExact) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  const auto group = [](const std::function<loomResult_t()>& calls) {
    if (loomGroupStart() != loomSuccess) return loomInternalError;
    const loomResult_t made = calls();
    const loomResult_t ended = loomGroupEnd();
    return made != loomSuccess ? made : ended;
  };
  const auto firstOf = [](loomResult_t a, loomResult_t b) { return a != loomSuccess ? a : b; };
  for (size_t count : {size_t{1}, size_t{257}, size_t{131075}, size_t{600001}}) {  // 1 piece to 5 of 512 KiB
    SCOPED_TRACE(std::to_string(count) + " elements");
    const uint64_t ops = loom::test::counter("resident_p2p_ops");
    const uint64_t staged = loom::cuda::fakeBytesStaged();
    for (int n : {2, 3}) {
      onStreams(
          n, count, count,
          [&](const void* s, void* r, size_t c, int rank, loomComm_t comm, loomStream_t st) {
            return group([&] {
              return firstOf(loomSend(s, c, loomInt32, (rank + 1) % n, comm, st),
                             loomRecv(r, c, loomInt32, (rank + n - 1) % n, comm, st));
            });
          },
          value, [n](int rank, size_t i) { return value((rank + n - 1) % n, i); });
    }
    onStreams(
        2, count, count,
        [&](const void* s, void* r, size_t c, int rank, loomComm_t comm, loomStream_t st) {
          if (rank == 0) {
            return group([&] { return firstOf(loomSend(s, c, loomInt32, 1, comm, st), loomRecv(r, c, loomInt32, 1, comm, st)); });
          }
          return firstOf(loomRecv(r, c, loomInt32, 0, comm, st), loomSend(s, c, loomInt32, 0, comm, st));
        },
        value, [](int rank, size_t i) { return value(1 - rank, i); });
    onStreams(
        2, count, count,
        [&](const void* s, void* r, size_t c, int rank, loomComm_t comm, loomStream_t st) {
          const size_t cut[] = {0, c / 3, 2 * c / 3, c};
          const auto* in = static_cast<const int32_t*>(s);
          auto* out = static_cast<int32_t*>(r);
          if (rank == 0) {
            return group([&] {
              loomResult_t result = loomRecv(r, c, loomInt32, 1, comm, st);
              for (int part = 0; part < 3; ++part)
                result = firstOf(result, loomSend(in + cut[part], cut[part + 1] - cut[part], loomInt32, 1, comm, st));
              return result;
            });
          }
          loomResult_t result = loomSuccess;
          for (int part = 0; part < 3; ++part)
            result = firstOf(result, loomRecv(out + cut[part], cut[part + 1] - cut[part], loomInt32, 0, comm, st));
          return firstOf(result, loomSend(s, c, loomInt32, 0, comm, st));
        },
        value, [](int rank, size_t i) { return value(1 - rank, i); });
    onStreams(
        2, count, count,
        [&](const void* s, void* r, size_t c, int rank, loomComm_t comm, loomStream_t st) {
          return group([&] {
            return firstOf(loomRecv(r, c, loomInt32, rank, comm, st), loomSend(s, c, loomInt32, rank, comm, st));
          });
        },
        value, value);
    // Ring: 2 + 3 ranks x 2 ops; 2 ranks x 2 ops, three times, of which one
    // sends and receives in three parts.
    EXPECT_EQ(loom::test::counter("resident_p2p_ops") - ops, 10u + 4u + 8u + 4u) << "ops that took the host's path";
    EXPECT_EQ(loom::cuda::fakeBytesStaged(), staged) << "bytes staged through pinned memory";
  }
}

// Ranks as threads: a message of more than two 512 KiB pieces is copied by
// its receiver straight from the sender's buffer in one piece (nothing
// copied into a slot; the sender's "sent" word counts one piece a message),
// and stays the receiver's until it has taken all of it: the sender
// overwrites its buffer on its stream right after the send, and the
// receiver still gets what was sent. A message of two pieces or fewer goes
// through the slots as before, so that two ranks that each send first and
// then receive, ungrouped on one stream, both finish (as NCCL's eager sends
// do). A large send from a buffer on another GPU, which the receiver's
// kernels may not read, goes as one piece from a copy of the call's own.
TEST(ResidentSendRecv, RanksOfOneProcessReadLargeMessagesInPlace) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  constexpr size_t kLargeCount = 600001;  // 5 pieces of int32
  constexpr size_t kSmallCount = 262144;  // 1 MiB: two pieces
  auto comms = loom::test::initThreadComms(2);
  const uint64_t inPlace = loom::test::counter("resident_sends_read_in_place");
  const uint64_t copied = loom::cuda::fakeBytesCopied();
  onThreads(2, [&](int r) {
    Stream stream;
    const int peer = 1 - r;
    std::vector<int32_t> in(kLargeCount), out(kLargeCount, -1);
    const std::vector<int32_t> garbage(kLargeCount, -7);
    DeviceBuffer send(kLargeCount * 4), recv(kLargeCount * 4);
    for (int round = 0; round < 5; ++round) {
      for (size_t i = 0; i < kLargeCount; ++i) in[i] = value(r, i + static_cast<size_t>(round));
      runtime().copyNow(send.data(), in.data(), kLargeCount * 4);
      // Rank 0 sends, rank 1 receives: one way.
      const loomResult_t result = r == 0 ? loomSend(send.data(), kLargeCount, loomInt32, peer, comms[r], stream.loom())
                                         : loomRecv(recv.data(), kLargeCount, loomInt32, peer, comms[r], stream.loom());
      ASSERT_EQ(result, loomSuccess) << loomGetLastError(comms[r]);
      if (r == 0) runtime().copy(send.data(), garbage.data(), kLargeCount * 4, stream.handle());
      ASSERT_TRUE(stream.finishes(20s)) << "rank " << r;
      if (r == 1) {
        runtime().copyNow(out.data(), recv.data(), kLargeCount * 4);
        size_t wrong = 0;
        for (size_t i = 0; i < kLargeCount; ++i) {
          if (out[i] != value(0, i + static_cast<size_t>(round)) && wrong++ < 3) {
            ADD_FAILURE() << "round " << round << ", element " << i << ": " << out[i]
                          << ": the sender overwrote its buffer before the receiver took it";
          }
        }
      }
    }
  });
  EXPECT_EQ(loom::test::counter("resident_sends_read_in_place") - inPlace, 5u);
  // Only the garbage the sender wrote over its buffer, five times: nothing into a slot.
  EXPECT_EQ(loom::cuda::fakeBytesCopied() - copied, 5 * kLargeCount * 4);
  EXPECT_EQ(runtime().loadValue(comms[0]->resident()->sent(1)), 5u) << "pieces of five messages";
  // Both send first, then receive, ungrouped on one stream: two pieces each, eager.
  onThreads(2, [&](int r) {
    Stream stream;
    DeviceBuffer send(kSmallCount * 4), recv(kSmallCount * 4);
    std::vector<int32_t> in(kSmallCount), out(kSmallCount, -1);
    for (size_t i = 0; i < kSmallCount; ++i) in[i] = value(r, i);
    runtime().copyNow(send.data(), in.data(), kSmallCount * 4);
    ASSERT_EQ(loomSend(send.data(), kSmallCount, loomInt32, 1 - r, comms[r], stream.loom()), loomSuccess);
    ASSERT_EQ(loomRecv(recv.data(), kSmallCount, loomInt32, 1 - r, comms[r], stream.loom()), loomSuccess);
    ASSERT_TRUE(stream.finishes(20s)) << "rank " << r << ": a send of two pieces waited for its receiver";
    runtime().copyNow(out.data(), recv.data(), kSmallCount * 4);
    for (size_t i = 0; i < kSmallCount; ++i) {
      if (out[i] != value(1 - r, i)) {
        ADD_FAILURE() << "rank " << r << ", element " << i << ": " << out[i];
        break;
      }
    }
  });
  EXPECT_EQ(loom::test::counter("resident_sends_read_in_place") - inPlace, 5u) << "a message of two pieces read in place";
  loom::test::destroyAll(comms);

  OneFakeGpuAgain again;
  loom::cuda::fakeDeviceGpus(2, false);
  comms = loom::test::initThreadComms(2);
  const uint64_t allocated = loom::cuda::fakeStreamAllocations();
  onThreads(2, [&](int r) {
    Stream stream;
    runtime().setCurrentDevice(1);
    DeviceBuffer elsewhere(kLargeCount * 4);
    runtime().setCurrentDevice(0);
    DeviceBuffer recv(kLargeCount * 4);
    std::vector<int32_t> in(kLargeCount), out(kLargeCount, -1);
    for (size_t i = 0; i < kLargeCount; ++i) in[i] = value(3, i);
    runtime().copyNow(elsewhere.data(), in.data(), kLargeCount * 4);
    const loomResult_t result = r == 0 ? loomSend(elsewhere.data(), kLargeCount, loomInt32, 1, comms[r], stream.loom())
                                       : loomRecv(recv.data(), kLargeCount, loomInt32, 0, comms[r], stream.loom());
    ASSERT_EQ(result, loomSuccess) << loomGetLastError(comms[r]);
    ASSERT_TRUE(stream.finishes(20s)) << "rank " << r;
    if (r == 0) return;
    runtime().copyNow(out.data(), recv.data(), kLargeCount * 4);
    EXPECT_EQ(out, in);
  });
  EXPECT_EQ(loom::cuda::fakeStreamAllocations() - allocated, 1u) << "the sender's copy";
  EXPECT_EQ(runtime().loadValue(comms[0]->resident()->sent(1)), 1u) << "one piece";
  loom::test::destroyAll(comms);
}


// Rank 0's resident call `call` whose peer, rank 1, never makes its part.
// Rank 1 on another GPU: no host thread waits for the call, so the
// watchdog's turn finds it past LOOM_TIMEOUT_MS, revokes the communicator
// with `byTheWatchdog`, and the stream goes on. Rank 1 a thread on the same
// GPU: the call waits at the entry gate (comm/entry_gate.hpp) for the peer to
// make its part, and past LOOM_TIMEOUT_MS fails there with `atTheGate`,
// nothing queued (`queued` counts what was).
void expectAMissingPeerNamed(const std::function<loomResult_t(loomComm_t, void*, loomStream_t)>& call,
                             const std::function<uint64_t()>& queued, const std::string& atTheGate,
                             const std::string& byTheWatchdog) {
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "1500");
  OneFakeGpuAgain again;
  for (int gpus : {2, 1}) {
    SCOPED_TRACE(std::to_string(gpus) + " GPUs");
    auto comms = initThreadCommsOnGpus(2, gpus);
    Stream stream;
    DeviceBuffer buffer(4096);
    const uint64_t before = queued();
    const auto start = std::chrono::steady_clock::now();
    if (gpus == 2) {
      ASSERT_EQ(call(comms[0], buffer.data(), stream.loom()), loomSuccess) << loomGetLastError(comms[0]);
      EXPECT_EQ(queued() - before, 1u);
      EXPECT_TRUE(stream.finishes(20s)) << "the stream still waits for a rank that never came";
    } else {
      EXPECT_EQ(call(comms[0], buffer.data(), stream.loom()), loomRemoteError);
      EXPECT_EQ(queued() - before, 0u) << "queued though the peer never came";
      const std::string why = loomGetLastError(comms[0]);
      EXPECT_NE(why.find(atTheGate), std::string::npos) << why;
      EXPECT_TRUE(stream.finishes(1s));
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 1s) << "given up before the deadline";
    loomResult_t async = loomSuccess;
    ASSERT_EQ(loomCommGetAsyncError(comms[0], &async), loomSuccess);
    EXPECT_EQ(async, loomRemoteError);
    // The next call says why.
    EXPECT_EQ(call(comms[0], buffer.data(), stream.loom()), loomRemoteError);
    const std::string why = loomGetLastError(comms[0]);
    if (gpus == 2) {
      EXPECT_NE(why.find(byTheWatchdog), std::string::npos) << why;
    }
    loom::test::destroyAll(comms);
  }
}

// A resident receive whose sender never sends (expectAMissingPeerNamed).
TEST(ResidentSendRecv, ASenderThatNeverSendsIsNamedAndTheStreamGoesOn) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  expectAMissingPeerNamed(
      [](loomComm_t comm, void* buffer, loomStream_t stream) {
        return loomRecv(buffer, 1024, loomInt32, 1, comm, stream);
      },
      [] { return loom::test::counter("resident_p2p_ops"); },
      "to queue its receive from rank 1 (piece 1): rank(s) 1, thread(s) of this process on its GPU, never made its send",
      "resident receive from rank 1 on the stream (piece 1): rank 1 never sent");
}

// nccl-tests' flows on device buffers and CUDA streams (-t and -g, on the
// fake device): one thread creates every rank inside a group, each under its
// device; then each rank's thread runs an all-reduce in a group of its own
// (-t), and one thread runs every rank's in one group on each rank's stream
// (-g). Both go resident, and every rank's result is exact.
TEST(CallsOnAStream, NcclTestsFlowsOnDeviceBuffersGoResidentAndExact) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: nccl-tests itself runs there (run-gpu-tests)";
  constexpr int kRanks = 3;
  constexpr size_t kCount = 70001;  // past a piece of the scratch: several pieces
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(kRanks, nullptr);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < kRanks; ++r) {
    runtime().setCurrentDevice(0);  // nccl-tests: cudaSetDevice before each rank's init
    ASSERT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], kRanks, id, r), loomSuccess) << loomGetLastError(nullptr);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  const auto valueOf = [](int r, size_t i, int round) { return static_cast<int32_t>((i * 5 + static_cast<size_t>(r) * 11 + static_cast<size_t>(round)) % 97); };
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int r = 0; r < kRanks; ++r) {
    send.push_back(std::make_unique<DeviceBuffer>(kCount * 4));
    recv.push_back(std::make_unique<DeviceBuffer>(kCount * 4));
    streams.push_back(std::make_unique<Stream>());
  }
  const auto expectExact = [&](int round) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(streams[static_cast<size_t>(r)]->finishes()) << "rank " << r << ", round " << round;
      std::vector<int32_t> got(kCount);
      recv[static_cast<size_t>(r)]->download(got.data());
      for (size_t i = 0; i < kCount; ++i) {
        int32_t sum = 0;
        for (int q = 0; q < kRanks; ++q) sum += valueOf(q, i, round);
        ASSERT_EQ(got[i], sum) << "rank " << r << ", element " << i << ", round " << round;
      }
    }
  };
  const auto fill = [&](int round) {
    for (int r = 0; r < kRanks; ++r) {
      std::vector<int32_t> in(kCount);
      for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(r, i, round);
      send[static_cast<size_t>(r)]->upload(in.data());
    }
  };
  const uint64_t resident = loom::test::counter("resident_calls");
  // -t: a thread per rank, each call in a group of its own.
  fill(0);
  onThreads(kRanks, [&](int r) {
    const auto i = static_cast<size_t>(r);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomAllReduce(send[i]->data(), recv[i]->data(), kCount, loomInt32, loomSum, comms[i], streams[i]->loom()),
              loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[i]);
  });
  expectExact(0);
  // -g: one thread, every rank's call in one group, each on its rank's stream.
  fill(1);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < kRanks; ++r) {
    const auto i = static_cast<size_t>(r);
    ASSERT_EQ(loomAllReduce(send[i]->data(), recv[i]->data(), kCount, loomInt32, loomSum, comms[i], streams[i]->loom()),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  expectExact(1);
  EXPECT_EQ(loom::test::counter("resident_calls") - resident, 2u * kRanks);
  loom::test::destroyAll(comms);
}

// nccl-tests' -t rhythm (4 threads), which the H200 run found waiting out LOOM_TIMEOUT_MS:
// each rank's thread synchronizes the device between calls (its data checks
// call cudaDeviceSynchronize), and a thread running ahead queues its next
// call, whose stream waits for its peers, before a slower one's
// synchronization; that synchronization waits for the fast rank's stream,
// which waits for the slow rank's next call. The slow rank here is rank 0,
// which sleeps before each synchronization. Every call of every kind, rings
// of sends in groups (of one piece, which waits for nothing, and of three),
// and an all-to-all of sends (nccl-tests' own), complete exact, and no
// synchronization waits on a peer's stream. In the ring of one piece, a
// rank's receive would wait for a peer that entered its group but is itself
// held by rank 0: the gate passes no thread until every peer its waits
// reach, transitively, has entered what they need. The same through the
// host (LOOM_DEVICE_RESIDENT=0), where each call holds its stream behind a
// gate until its host worker has met the peers.
TEST(CallsOnAStream, ThreadsThatSynchronizeTheDeviceBetweenCallsNeverWaitOnEachOther) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: nccl-tests -t runs there (run-gpu-tests)";
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  // Resident, and through the host behind each stream's gate (whose worker
  // waits for its peers as the resident call's stream does).
  for (const bool onTheStream : {true, false}) {
    SCOPED_TRACE(onTheStream ? "resident" : "LOOM_DEVICE_RESIDENT=0");
    loom::test::ScopedEnv how("LOOM_DEVICE_RESIDENT", onTheStream ? "1" : "0");
    constexpr int kRanks = 4;  // in a ring, rank 2 waits on neither rank 0 nor a rank 0 waits on
    constexpr size_t kCount = 300001;  // several pieces of the scratch, and sends past two slots
    loomUniqueId id;
    ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
    std::vector<loomComm_t> comms(kRanks, nullptr);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], kRanks, id, r), loomSuccess) << loomGetLastError(nullptr);
    }
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int r = 0; r < kRanks; ++r) {
      send.push_back(std::make_unique<DeviceBuffer>(kCount * kRanks * 4));
      recv.push_back(std::make_unique<DeviceBuffer>(kCount * kRanks * 4));
      streams.push_back(std::make_unique<Stream>());
    }
    const auto valueOf = [](int r, size_t i) { return static_cast<int32_t>((i * 7 + static_cast<size_t>(r) * 13) % 101); };
    for (int r = 0; r < kRanks; ++r) {
      std::vector<int32_t> in(kCount * kRanks);
      for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(r, i);
      send[static_cast<size_t>(r)]->upload(in.data());
    }
    enum Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kRing, kSmallRing, kAlltoAllBySends, kKinds };
    constexpr size_t kSmall = 1000;  // one piece: a send that waits for nothing
    const uint64_t resident = loom::test::counter("resident_calls");
    const uint64_t messages = loom::test::counter("resident_p2p_ops");
    std::atomic<int> stuck{0};
    onThreads(kRanks, [&](int r) {
      const auto i = static_cast<size_t>(r);
      const loomStream_t stream = streams[i]->loom();
      for (int round = 0; round < 2 * kKinds; ++round) {
        std::byte* in = send[i]->data();
        std::byte* out = recv[i]->data();
        loomResult_t result = loomSuccess;
        switch (static_cast<Kind>(round % kKinds)) {
          case kAllReduce: result = loomAllReduce(in, out, kCount, loomInt32, loomSum, comms[i], stream); break;
          case kAllGather: result = loomAllGather(in, out, kCount, loomInt32, comms[i], stream); break;
          case kReduceScatter: result = loomReduceScatter(in, out, kCount, loomInt32, loomSum, comms[i], stream); break;
          case kBroadcast: result = loomBroadcast(in, out, kCount, loomInt32, 1, comms[i], stream); break;
          case kRing:
            ASSERT_EQ(loomGroupStart(), loomSuccess);
            ASSERT_EQ(loomSend(in, kCount, loomInt32, (r + 1) % kRanks, comms[i], stream), loomSuccess);
            ASSERT_EQ(loomRecv(out, kCount, loomInt32, (r + kRanks - 1) % kRanks, comms[i], stream), loomSuccess);
            result = loomGroupEnd();
            break;
          case kAlltoAllBySends:  // nccl-tests' alltoall: a send and a receive with every rank, itself too
            ASSERT_EQ(loomGroupStart(), loomSuccess);
            for (int p = 0; p < kRanks; ++p) {
              const size_t block = static_cast<size_t>(p) * kSmall * 4;
              ASSERT_EQ(loomSend(in + block, kSmall, loomInt32, p, comms[i], stream), loomSuccess);
              ASSERT_EQ(loomRecv(out + block, kSmall, loomInt32, p, comms[i], stream), loomSuccess);
            }
            result = loomGroupEnd();
            break;
          case kSmallRing:
            ASSERT_EQ(loomGroupStart(), loomSuccess);
            ASSERT_EQ(loomSend(in, kSmall, loomInt32, (r + 1) % kRanks, comms[i], stream), loomSuccess);
            ASSERT_EQ(loomRecv(out, kSmall, loomInt32, (r + kRanks - 1) % kRanks, comms[i], stream), loomSuccess);
            result = loomGroupEnd();
            break;
          case kKinds: break;
        }
        ASSERT_EQ(result, loomSuccess) << "rank " << r << ", round " << round << ": " << loomGetLastError(comms[i]);
        // nccl-tests' data check: the device synchronized, then the result read.
        if (r == 0) std::this_thread::sleep_for(50ms);
        if (!loom::cuda::fakeSynchronizeDevice(15s)) {
          stuck.fetch_add(1);
          ADD_FAILURE() << "rank " << r << ", round " << round << ": the device synchronization waited on a peer's stream";
          return;
        }
        std::vector<int32_t> got(kCount * kRanks);
        recv[i]->download(got.data());
        const auto sumOf = [&](size_t at) {
          int32_t sum = 0;
          for (int q = 0; q < kRanks; ++q) sum += valueOf(q, at);
          return sum;
        };
        const auto kind = static_cast<Kind>(round % kKinds);
        const size_t results = kind == kAllGather ? kCount * kRanks
                               : kind == kSmallRing ? kSmall
                               : kind == kAlltoAllBySends ? kSmall * kRanks
                                                         : kCount;
        for (size_t e = 0; e < results; ++e) {
          int32_t want = 0;
          switch (static_cast<Kind>(round % kKinds)) {
            case kAllReduce: want = sumOf(e); break;
            case kAllGather: want = valueOf(static_cast<int>(e / kCount), e % kCount); break;
            case kReduceScatter: want = sumOf(i * kCount + e); break;
            case kBroadcast: want = valueOf(1, e); break;
            case kRing:
            case kSmallRing: want = valueOf((r + kRanks - 1) % kRanks, e); break;
            case kAlltoAllBySends: want = valueOf(static_cast<int>(e / kSmall), i * kSmall + e % kSmall); break;
            case kKinds: break;
          }
          ASSERT_EQ(got[e], want) << "rank " << r << ", round " << round << ", element " << e;
        }
      }
    });
    EXPECT_EQ(stuck.load(), 0);
    const uint64_t residentOnes = onTheStream ? 1 : 0;  // through the host: none
    EXPECT_EQ(loom::test::counter("resident_calls") - resident, residentOnes * 2 * 4 * kRanks) << "collectives went resident";
    EXPECT_EQ(loom::test::counter("resident_p2p_ops") - messages, residentOnes * 2 * (4 + 2 * kRanks) * kRanks)
        << "messages went resident";
    loom::test::destroyAll(comms);
  }
}

// Every call of ranks that are threads on one GPU is numbered at their
// entry gate, also one that holds no CUDA stream (a blocking call): a
// rank's call on a CUDA stream waits at the gate for its peers' call of the
// same number, which a peer making that call blocking must have entered
// too, else the two wait on each other until LOOM_TIMEOUT_MS. Rank 0 makes
// each call blocking, rank 1 on a CUDA stream (host memory there: through
// the host, behind the stream's gate), collectives, sends and receives
// alike; every result exact.
// nccl-tests' alltoall_perf -t 2 (ranks as threads of one process on one
// GPU, which the H200 run saw stop without a word), on the fake device: each
// thread's calls in a group of a send and a receive with every rank, itself
// too, on its stream, from 8 bytes to 8 MiB of buffer as -b 8 -e 8M -f 4
// walks them (blocks of one piece to past two 512 KiB pieces, read in
// place), warm-up and timed calls back to back, the device synchronized
// before each size's check; resident, and through the host. Every block
// lands exact and no synchronization waits on a peer's stream.
TEST(CallsOnAStream, NcclTestsAlltoAllOfTwoThreadsAtEverySizeIsExact) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: nccl-tests -t runs there (run-gpu-tests)";
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  for (const bool onTheStream : {true, false}) {
    SCOPED_TRACE(onTheStream ? "resident" : "LOOM_DEVICE_RESIDENT=0");
    loom::test::ScopedEnv how("LOOM_DEVICE_RESIDENT", onTheStream ? "1" : "0");
    constexpr int kRanks = 2;
    constexpr size_t kMostBytes = size_t{8} << 20;  // each rank's whole buffer, as nccl-tests sizes it
    const uint64_t messages = loom::test::counter("resident_p2p_ops");
    auto comms = initThreadCommsOnGpus(kRanks, 1);
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int r = 0; r < kRanks; ++r) {
      send.push_back(std::make_unique<DeviceBuffer>(kMostBytes));
      recv.push_back(std::make_unique<DeviceBuffer>(kMostBytes));
      streams.push_back(std::make_unique<Stream>());
    }
    const auto valueOf = [](int r, size_t i, size_t bytes) {
      return static_cast<int32_t>((i * 3 + static_cast<size_t>(r) * 7919 + bytes) % 100003);
    };
    std::atomic<int> stuck{0};
    onThreads(kRanks, [&](int r) {
      const auto i = static_cast<size_t>(r);
      const loomStream_t on = streams[i]->loom();
      for (size_t bytes = 8; bytes <= kMostBytes; bytes *= 4) {
        const size_t count = bytes / 4 / kRanks;  // elements of each block
        std::vector<int32_t> in(kMostBytes / 4);
        for (size_t e = 0; e < count * kRanks; ++e) in[e] = valueOf(r, e, bytes);
        send[i]->upload(in.data());
        for (int call = 0; call < 4; ++call) {  // warm-up and timed calls, back to back
          ASSERT_EQ(loomGroupStart(), loomSuccess);
          for (int p = 0; p < kRanks; ++p) {
            const size_t block = static_cast<size_t>(p) * count * 4;
            ASSERT_EQ(loomSend(send[i]->data() + block, count, loomInt32, p, comms[i], on), loomSuccess);
            ASSERT_EQ(loomRecv(recv[i]->data() + block, count, loomInt32, p, comms[i], on), loomSuccess);
          }
          ASSERT_EQ(loomGroupEnd(), loomSuccess)
              << "rank " << r << ", " << bytes << " bytes: " << loomGetLastError(comms[i]);
        }
        if (!loom::cuda::fakeSynchronizeDevice(15s)) {
          stuck.fetch_add(1);
          ADD_FAILURE() << "rank " << r << ", " << bytes << " bytes: the device synchronization waited on a peer";
          return;
        }
        std::vector<int32_t> got(kMostBytes / 4);
        recv[i]->download(got.data());
        for (size_t e = 0; e < count * kRanks; ++e) {
          const int from = static_cast<int>(e / count);
          ASSERT_EQ(got[e], valueOf(from, i * count + e % count, bytes))
              << "rank " << r << ", " << bytes << " bytes, element " << e;
        }
      }
    });
    EXPECT_EQ(stuck.load(), 0);
    // 11 sizes x 4 calls x 2 ranks x 4 ops, every one on the stream (or none).
    EXPECT_EQ(loom::test::counter("resident_p2p_ops") - messages, onTheStream ? 11u * 4 * 2 * 4 : 0u);
    loom::test::destroyAll(comms);
  }
}

TEST(CallsOnAStream, BlockingCallsAreNumberedAtTheGateBesideCallsOnStreams) {
  if (!fake()) GTEST_SKIP() << "the fake device's GPU shared by thread ranks";
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "5000");
  constexpr size_t kCount = 4099;
  auto comms = initThreadCommsOnGpus(2, 1);
  Stream stream;
  onThreads(2, [&](int r) {
    const auto i = static_cast<size_t>(r);
    const loomStream_t on = r == 0 ? nullptr : stream.loom();
    std::vector<int32_t> in(kCount), out(kCount);
    for (int round = 0; round < 6; ++round) {
      for (size_t e = 0; e < kCount; ++e) in[e] = static_cast<int32_t>(e % 89) + r * 1000 + round;
      const int kind = round % 3;
      loomResult_t result = loomSuccess;
      if (kind == 0) {
        result = loomAllReduce(in.data(), out.data(), kCount, loomInt32, loomSum, comms[i], on);
      } else if (kind == 1) {
        result = loomBroadcast(in.data(), out.data(), kCount, loomInt32, 0, comms[i], on);
      } else {
        ASSERT_EQ(loomGroupStart(), loomSuccess);
        ASSERT_EQ(loomSend(in.data(), kCount, loomInt32, 1 - r, comms[i], on), loomSuccess);
        ASSERT_EQ(loomRecv(out.data(), kCount, loomInt32, 1 - r, comms[i], on), loomSuccess);
        result = loomGroupEnd();
      }
      ASSERT_EQ(result, loomSuccess) << "rank " << r << ", round " << round << ": " << loomGetLastError(comms[i]);
      if (r == 1) {
        ASSERT_TRUE(stream.finishes(20s)) << "round " << round;
      }
      for (size_t e = 0; e < kCount; ++e) {
        const auto base = static_cast<int32_t>(e % 89) + round;
        const int32_t want = kind == 0 ? 2 * base + 1000 : kind == 1 ? base : base + (1 - r) * 1000;
        ASSERT_EQ(out[e], want) << "rank " << r << ", round " << round << ", element " << e;
      }
    }
  });
  loom::test::destroyAll(comms);
}

// A stream being captured into a CUDA graph: a call that meets its peers at
// run time (resident, or behind a gate) would replay without them, so it is
// refused by name, sends and receives too; one rank's call, only a copy on
// the stream, is taken.
TEST(CallsOnAStream, CaptureIntoAGraphIsRefusedByNameWhereTheCallMeetsItsPeers) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  const auto refused = [](loomResult_t result, loomComm_t comm, const char* what) {
    EXPECT_EQ(result, loomInvalidUsage) << what;
    const std::string why = loomGetLastError(comm);
    EXPECT_NE(why.find("captured into a CUDA graph"), std::string::npos) << what << ": " << why;
  };
  OneFakeGpuAgain again;
  struct EndCapture {
    ~EndCapture() { loom::cuda::fakeCapture(nullptr); }
  } endCapture;
  DeviceBuffer a(4096);
  DeviceBuffer b(4096);
  DeviceBuffer c(4096);  // rank 1's own: ranks that are threads must not share a buffer
  {
    auto one = loom::test::initThreadComms(1);
    Stream stream;
    loom::cuda::fakeCapture(stream.handle());
    EXPECT_EQ(loomAllReduce(a.data(), b.data(), 1024, loomInt32, loomSum, one[0], stream.loom()), loomSuccess)
        << loomGetLastError(one[0]);
    loom::cuda::fakeCapture(nullptr);
    EXPECT_TRUE(stream.finishes());
    loom::test::destroyAll(one);
  }
  for (const char* resident : {"1", "0"}) {
    SCOPED_TRACE(std::string("LOOM_DEVICE_RESIDENT=") + resident);
    loom::test::ScopedEnv how("LOOM_DEVICE_RESIDENT", resident);
    // On GPUs of their own, so that rank 0's taken call is not held at the
    // entry gate (comm/entry_gate.hpp) for rank 1's, which this thread makes after.
    auto comms = initThreadCommsOnGpus(2, 2);
    Stream stream;
    Stream other0;  // a stream per rank: one rank's call waits for the other's on the device
    Stream other1;
    const uint64_t calls = loom::test::counter("resident_calls");
    loom::cuda::fakeCapture(stream.handle());
    refused(loomAllReduce(a.data(), b.data(), 1024, loomInt32, loomSum, comms[0], stream.loom()), comms[0],
            "all-reduce");
    refused(loomSend(a.data(), 1024, loomInt32, 1, comms[0], stream.loom()), comms[0], "send");
    refused(loomRecv(b.data(), 1024, loomInt32, 1, comms[0], stream.loom()), comms[0], "receive");
    // Another stream of the same communicator is not captured: its calls are taken.
    EXPECT_EQ(loomBroadcast(a.data(), a.data(), 1024, loomInt32, 0, comms[0], other0.loom()), loomSuccess)
        << loomGetLastError(comms[0]);
    loom::cuda::fakeCapture(nullptr);
    EXPECT_EQ(loomBroadcast(c.data(), c.data(), 1024, loomInt32, 0, comms[1], other1.loom()), loomSuccess)
        << loomGetLastError(comms[1]);
    EXPECT_TRUE(other0.finishes());
    EXPECT_TRUE(other1.finishes());
    EXPECT_EQ(loom::test::counter("resident_calls") - calls, std::string(resident) == "1" ? 2u : 0u);
    loom::test::destroyAll(comms);
  }
}

// The user's next work queued on `stream` behind a call that waits for a
// peer that never comes: it does not run until `comm` is aborted, and then
// it does (`waiting` says what the stream waits in, for the messages).
void expectAnAbortLetsTheStreamGoOn(loomComm_t comm, const Stream& stream, const char* waiting) {
  std::vector<int32_t> after(1, 0);
  const std::vector<int32_t> marker(1, 42);
  runtime().copy(after.data(), marker.data(), 4, stream.handle());  // the user's next kernel
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(runtime().idle(stream.handle())) << waiting << " went past a peer that never came";
  EXPECT_EQ(loomCommAbort(comm), loomSuccess);
  EXPECT_TRUE(stream.finishes()) << waiting << " still waits after the abort";
  EXPECT_EQ(after[0], 42);
}

// A call whose peer never comes holds its stream at the gate; an abort ends
// the call, and the stream goes on.
TEST(CallsOnAStream, AnAbortLetsAWaitingStreamGoOn) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  // Ranks on GPUs of their own: the entry gate (comm/entry_gate.hpp) holds a
  // call for a peer on its GPU at the host; here the stream waits.
  OneFakeGpuAgain again;
  auto comms = initThreadCommsOnGpus(2, 2);
  Stream stream;
  DeviceBuffer buffer(4096);
  ASSERT_EQ(loomAllReduce(buffer.data(), buffer.data(), 1024, loomInt32, loomSum, comms[0], stream.loom()),
            loomSuccess);
  expectAnAbortLetsTheStreamGoOn(comms[0], stream, "the stream");
  EXPECT_EQ(loomCommAbort(comms[1]), loomSuccess);
}

// The same where the call's flags are polled inside its kernel (threads on
// one GPU, a small all-reduce: LOOM_DEVICE_ONE_KERNEL_BYTES): rank 1 makes
// its call, so both pass the entry gate, but its stream holds it back, and
// rank 0's kernel polls for it. An abort of rank 0 raises the words it
// polls: its stream goes on, and its result is left alone (rank 1's place
// is not yet there to read). Let go, rank 1's call completes on what rank
// 0 had published.
TEST(CallsOnAStream, AnAbortLetsAKernelThatPollsItsFlagsGoOn) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  auto comms = loom::test::initThreadComms(2);
  Stream stream0, stream1;
  DeviceBuffer send0(8), recv0(8), send1(8), recv1(8);
  const std::array<int32_t, 2> in0{1, 2}, in1{10, 20}, marks{-1, -1};
  runtime().copyNow(send0.data(), in0.data(), 8);
  runtime().copyNow(send1.data(), in1.data(), 8);
  runtime().copyNow(recv0.data(), marks.data(), 8);
  runtime().copyNow(recv1.data(), marks.data(), 8);
  const uint64_t batches = loom::cuda::fakeMemopBatches();
  Go go;
  runtime().waitValue(stream1.handle(), go.word(), 1);  // rank 1's stream, held
  onThreads(2, [&](int r) {
    DeviceBuffer& send = r == 0 ? send0 : send1;
    DeviceBuffer& recv = r == 0 ? recv0 : recv1;
    const Stream& stream = r == 0 ? stream0 : stream1;
    ASSERT_EQ(loomAllReduce(send.data(), recv.data(), 2, loomInt32, loomSum, comms[static_cast<size_t>(r)],
                            stream.loom()),
              loomSuccess);
  });
  expectAnAbortLetsTheStreamGoOn(comms[0], stream0, "rank 0's kernel");
  std::array<int32_t, 2> got{};
  runtime().copyNow(got.data(), recv0.data(), 8);
  EXPECT_EQ(got, marks) << "the released call read a place rank 1 never published";
  go.raise();
  EXPECT_TRUE(stream1.finishes());
  runtime().copyNow(got.data(), recv1.data(), 8);
  EXPECT_EQ(got, (std::array<int32_t, 2>{11, 22}));
  EXPECT_FALSE(go.timedOut());
  EXPECT_EQ(loom::cuda::fakeMemopBatches() - batches, 0u) << "the flags went in batches, not in the kernel";
  EXPECT_EQ(loomCommAbort(comms[1]), loomSuccess);
}

// One thread driving two ranks through one stream: rank 0's part of the
// all-reduce, queued first, waits for rank 1's, which the stream would run
// only after it. Rank 1's call is refused at once, naming both ranks and
// the way out, instead of hanging until LOOM_TIMEOUT_MS; an abort lets
// rank 0's part go. The same calls on a stream each, and the same stream
// for calls of different sequence (one rank's after the other's), run.
TEST(ResidentCollectives, TwoRanksQueueingOneCallOnOneStreamAreRefusedByName) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  {
    auto comms = initCommsFromOneThread(2);
    Stream shared;
    DeviceBuffer a(4096), b(4096);
    ASSERT_EQ(loomAllReduce(a.data(), a.data(), 1024, loomInt32, loomSum, comms[0], shared.loom()), loomSuccess);
    EXPECT_EQ(loomAllReduce(b.data(), b.data(), 1024, loomInt32, loomSum, comms[1], shared.loom()), loomInvalidUsage);
    const std::string said = loomGetLastError(comms[1]);
    EXPECT_NE(said.find("rank 1 queues resident call #1 on the CUDA stream on which rank 0 queued its part of the "
                        "same call"),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("give each rank its own stream"), std::string::npos) << said;
    EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess);
    EXPECT_TRUE(shared.finishes()) << "the stream still waits for an aborted call";
    EXPECT_EQ(loomCommAbort(comms[1]), loomSuccess);
  }
  auto comms = initCommsFromOneThread(2);
  Stream first, second;
  DeviceBuffer a(4096), b(4096);
  loomGroupStart();
  loomAllReduce(a.data(), a.data(), 1024, loomInt32, loomSum, comms[0], first.loom());
  loomAllReduce(b.data(), b.data(), 1024, loomInt32, loomSum, comms[1], second.loom());
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[0]) << " / " << loomGetLastError(comms[1]);
  // Each rank's next call reads what its first wrote, on the other stream:
  // the first calls done before (the user's ordering, as NCCL's).
  ASSERT_TRUE(first.finishes());
  ASSERT_TRUE(second.finishes());
  // Rank 1's second call on rank 0's stream, after rank 0's first: another call.
  ASSERT_EQ(loomAllReduce(b.data(), b.data(), 1024, loomInt32, loomSum, comms[1], first.loom()), loomSuccess)
      << loomGetLastError(comms[1]);
  ASSERT_EQ(loomAllReduce(a.data(), a.data(), 1024, loomInt32, loomSum, comms[0], second.loom()), loomSuccess)
      << loomGetLastError(comms[0]);
  EXPECT_TRUE(first.finishes());
  EXPECT_TRUE(second.finishes());
  loom::test::destroyAll(comms);
}

// Point-to-point alike (ResidentArea::claimPointToPoint), one thread driving
// two ranks through one stream: a receive queued before its send on that
// stream, or a send of more than two pieces before its receive, would wait
// for what waits behind it. Refused by name, nothing queued: the matching
// end queued on another stream then completes the message exactly. A send
// of one piece completes alone, so its receive may follow it on the stream.
TEST(ResidentSendRecv, BothEndsOnOneStreamAreRefusedByNameWhereOneWouldWaitForTheOther) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  auto comms = initCommsFromOneThread(2);
  Stream shared, other;
  const size_t large = 3 * (size_t{512} << 10) / 4;  // three pieces: its sender waits for its receiver
  std::vector<int32_t> values(large);
  for (size_t i = 0; i < large; ++i) values[i] = value(0, i);
  DeviceBuffer in(large * 4), out(large * 4);
  in.upload(values.data());
  const auto expectReceived = [&](size_t count) {
    ASSERT_TRUE(shared.finishes()) << "a stream still waits";
    ASSERT_TRUE(other.finishes()) << "a stream still waits";
    std::vector<int32_t> got(large, -1);
    out.download(got.data());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], values[i]) << "element " << i << " of " << count;
    const std::vector<int32_t> zeros(large, 0);
    out.upload(zeros.data());
  };

  ASSERT_EQ(loomRecv(out.data(), large, loomInt32, 0, comms[1], shared.loom()), loomSuccess);
  EXPECT_EQ(loomSend(in.data(), large, loomInt32, 1, comms[0], shared.loom()), loomInvalidUsage);
  std::string said = loomGetLastError(comms[0]);
  EXPECT_NE(said.find("rank 0 queues its send to rank 1 on the CUDA stream on which rank 1 queued its receive of it"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("give each rank its own stream"), std::string::npos) << said;
  ASSERT_EQ(loomSend(in.data(), large, loomInt32, 1, comms[0], other.loom()), loomSuccess) << loomGetLastError(comms[0]);
  expectReceived(large);

  ASSERT_EQ(loomSend(in.data(), large, loomInt32, 1, comms[0], shared.loom()), loomSuccess);
  EXPECT_EQ(loomRecv(out.data(), large, loomInt32, 0, comms[1], shared.loom()), loomInvalidUsage);
  said = loomGetLastError(comms[1]);
  EXPECT_NE(said.find("rank 1 queues its receive from rank 0 on the CUDA stream on which rank 0 queued a send to it "
                      "that waits for that receive"),
            std::string::npos)
      << said;
  ASSERT_EQ(loomRecv(out.data(), large, loomInt32, 0, comms[1], other.loom()), loomSuccess) << loomGetLastError(comms[1]);
  expectReceived(large);

  ASSERT_EQ(loomSend(in.data(), 1000, loomInt32, 1, comms[0], shared.loom()), loomSuccess);
  ASSERT_EQ(loomRecv(out.data(), 1000, loomInt32, 0, comms[1], shared.loom()), loomSuccess) << loomGetLastError(comms[1]);
  expectReceived(1000);
  loom::test::destroyAll(comms);
}

// A resident all-reduce whose peer is alive but never makes it
// (expectAMissingPeerNamed).
TEST(ResidentAllReduce, APeerThatNeverComesIsNamedAndTheStreamGoesOn) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: gpu_test checks its streams";
  expectAMissingPeerNamed(
      [](loomComm_t comm, void* buffer, loomStream_t stream) {
        return loomAllReduce(buffer, buffer, 1024, loomInt32, loomSum, comm, stream);
      },
      [] { return loom::test::counter("resident_calls"); },
      "to queue its call #1: rank(s) 1, thread(s) of this process on its GPU, never made that call",
      "resident collective #1 on the stream: rank(s) 1 never arrived");
}

}  // namespace
