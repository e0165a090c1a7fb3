// The GPU's own checks (ctest label gpu; scripts/run-gpu-tests runs them):
// skipped, saying why, where no CUDA device is visible; on a GPU they must
// pass. The device's reduction kernels against the host's, bit for bit; calls
// on CUDA streams (they return at once, later work on the stream sees their
// result, an abort ends a call whose stream never gets there, graph capture
// is refused by name); every collective on device buffers and CUDA streams.
// The staged path's host-side logic runs everywhere: device_test and
// CollectivesOnDeviceMemory (collectives_test), which use the GPU here too.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/device_buffer.hpp"
#include "base/half.hpp"
#include "collectives/cpu/reduce.hpp"
#include "collectives/cuda/kernels.hpp"
#include "tests/gpu/user_kernels.cuh"
#include "tests/support/counters.hpp"
#include "tests/support/ranks.hpp"
#include "tools/check/collective_call.hpp"
#include "tools/check/collective_check.hpp"

namespace loom::test {
namespace {

using cuda::DeviceBuffer;

#define REQUIRE_GPU()                                                              \
  do {                                                                             \
    if (cuda::deviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";        \
  } while (0)

void ok(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

constexpr loomDataType_t kAllTypes[] = {loomInt8,  loomUint8,   loomInt32,   loomUint32,  loomInt64,
                                        loomUint64, loomFloat16, loomFloat32, loomFloat64, loomBfloat16};
const char* const kOpNames[] = {"sum", "prod", "min", "max", "premulsum"};

size_t sizeOf(loomDataType_t t) {
  switch (t) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    default: return 8;
  }
}

// `count` elements of `type` from `rng`: any bits for integers, finite
// values in [-4, 4] for floats (products of 16 of them stay finite).
std::vector<std::byte> randomElements(loomDataType_t type, size_t count, std::mt19937_64& rng) {
  std::vector<std::byte> out(count * sizeOf(type));
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  for (size_t i = 0; i < count; ++i) {
    std::byte* at = out.data() + i * sizeOf(type);
    const double v = real(rng);
    switch (type) {
      case loomFloat16: { const uint16_t h = cpu::floatToHalf(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
      case loomBfloat16: { const uint16_t h = cpu::floatToBfloat16(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
      case loomFloat32: { const float f = static_cast<float>(v); std::memcpy(at, &f, 4); break; }
      case loomFloat64: std::memcpy(at, &v, 8); break;
      default: { const uint64_t bits = rng(); std::memcpy(at, &bits, sizeOf(type)); break; }
    }
  }
  return out;
}

// The first element whose bits differ, or -1 (NaN equals NaN: payloads may differ).
long long firstDifference(loomDataType_t type, const std::byte* a, const std::byte* b, size_t count) {
  const size_t size = sizeOf(type);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * size, b + i * size, size) == 0) continue;
    if (type == loomFloat32) {
      float x, y;
      std::memcpy(&x, a + i * size, 4);
      std::memcpy(&y, b + i * size, 4);
      if (std::isnan(x) && std::isnan(y)) continue;
    }
    return static_cast<long long>(i);
  }
  return -1;
}

// The device's kernels fold as the host's do: the same bits for every type,
// op, number of sources, count (vector body and element tail) and alignment.
TEST(GpuKernels, ReductionsHaveTheHostsBits) {
  REQUIRE_GPU();
  std::mt19937_64 rng(2026);
  for (loomDataType_t type : kAllTypes) {
    for (int op = 0; op < 5; ++op) {
      for (size_t nsources : {size_t{1}, size_t{2}, size_t{3}, size_t{8}, size_t{16}}) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{4099}, size_t{65539}, (size_t{1} << 20) + 3}) {
          if (count > 65539 && nsources != 2) continue;  // the big one once: the vector body's grid-stride laps
          for (size_t offset : {size_t{0}, size_t{1}}) {  // aligned (16-byte vectors) and not (elements)
            const size_t size = sizeOf(type);
            const size_t bytes = (count + offset) * size;
            std::vector<std::vector<std::byte>> inputs;
            std::vector<std::unique_ptr<DeviceBuffer>> device;
            std::vector<const void*> hostSources, deviceSources;
            for (size_t s = 0; s < nsources; ++s) {
              inputs.push_back(randomElements(type, count + offset, rng));
              device.push_back(std::make_unique<DeviceBuffer>(bytes));
              device.back()->upload(inputs.back().data());
              hostSources.push_back(inputs.back().data() + offset * size);
              deviceSources.push_back(device.back()->data() + offset * size);
            }
            const double scalar = type >= loomFloat16 ? 0.75 : 3.0;  // the float types follow the integers
            const auto reduceOp = static_cast<cpu::ReduceOp>(op);
            std::vector<std::byte> expected(bytes), got(bytes);
            cpu::reduce(type, reduceOp, hostSources, expected.data() + offset * size, count, scalar);
            DeviceBuffer out(bytes);
            coll::cuda::reduce(type, reduceOp, deviceSources, out.data() + offset * size, count, scalar, nullptr);
            ok(cudaDeviceSynchronize(), "the reduction");
            out.download(got.data());
            const long long wrong = firstDifference(type, got.data() + offset * size, expected.data() + offset * size, count);
            ASSERT_EQ(wrong, -1) << check::typeName(type) << " " << kOpNames[op] << " of " << nsources << " sources, "
                                 << count << " elements at offset " << offset;
          }
        }
      }
    }
  }
}

TEST(GpuKernels, IntegerAveragesDivideAsTheHostDoes) {
  REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (loomDataType_t type : {loomInt8, loomUint8, loomInt32, loomUint32, loomInt64, loomUint64}) {
    const size_t count = 100003;
    auto host = randomElements(type, count, rng);
    DeviceBuffer device(host.size());
    device.upload(host.data());
    cpu::divide(type, host.data(), count, 3);
    coll::cuda::divide(type, device.data(), count, 3, nullptr);
    ok(cudaDeviceSynchronize(), "the divide");
    std::vector<std::byte> got(host.size());
    device.download(got.data());
    EXPECT_EQ(firstDifference(type, got.data(), host.data(), count), -1) << check::typeName(type);
  }
}

// Waits for the other ranks' threads on the way out, whatever the way.
struct ArriveOnExit {
  std::barrier<>& barrier;
  ~ArriveOnExit() { barrier.arrive_and_wait(); }
};

// Pinned, mapped host memory that a kernel polls. The test's kernels are
// loaded first: a lazy load while a stream is held could wait for it.
struct HostFlag {
  int* host = nullptr;
  HostFlag() {
    gpu::load();
    EXPECT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host), 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
              cudaSuccess);
    host[0] = 0;
    host[1] = 0;
  }
  ~HostFlag() { cudaFreeHost(host); }
  void set() { __atomic_store_n(host, 1, __ATOMIC_RELEASE); }
  int* go() const { return host; }
  int* timedOut() const { return host + 1; }
};

// The user's stream is held by their own kernel, waiting for this host
// thread: a call on it must return without waiting (or this thread would
// never let the stream go), and a kernel queued after it must see its result.
TEST(GpuStreams, ACallOnACudaStreamReturnsAtOnceAndLaterWorkSeesItsResult) {
  REQUIRE_GPU();
  for (const char* gate : {"kernel", "memop"})  // LOOM_CUDA_GATE
  for (int n : {2, 4}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_GATE=") + gate);
    ScopedEnv how("LOOM_CUDA_GATE", gate);
    auto comms = initThreadComms(n);
    std::barrier ready(n);
    onThreads(n, [&](int r) {
      const size_t count = (size_t{1} << 20) + 3;
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreate(&stream), "cudaStreamCreate");  // a blocking stream: the legacy stream waits for it
      DeviceBuffer in(count * 4), out(count * 4), wrong(8);
      ok(cudaMemset(wrong.data(), 0, 8), "cudaMemset");
      ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      HostFlag flag;
      // No rank allocates while another's stream is held (allocating may wait for the device).
      ready.arrive_and_wait();
      ArriveOnExit freeTogether{ready};  // nor frees (cudaFree waits for the device)
      gpu::holdUntil(stream, flag.go(), flag.timedOut());
      gpu::fill(stream, reinterpret_cast<float*>(in.data()), count, r);
      ASSERT_EQ(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comms[r], reinterpret_cast<loomStream_t>(stream)),
                loomSuccess)
          << loomGetLastError(comms[r]);
      EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the stream went past its user's hold";
      gpu::countWrongSums(stream, reinterpret_cast<float*>(out.data()), count, n, reinterpret_cast<unsigned long long*>(wrong.data()));
      flag.set();
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      EXPECT_EQ(flag.timedOut()[0], 0) << "the user's hold timed out";
      unsigned long long wrongCount = ~0ull;
      wrong.download(&wrongCount);
      EXPECT_EQ(wrongCount, 0u) << "rank " << r << " of " << n;
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    });
    destroyAll(comms);
  }
}

// Every collective and a grouped send/receive, each rank on a stream of its
// own, buffers on the device, results checked after cudaStreamSynchronize;
// the ranks are threads, so out of place their inputs are read where they lie.
TEST(GpuStreams, EveryCollectiveRunsOnCudaStreams) {
  REQUIRE_GPU();
  using check::Coll;
  for (int n : {2, 3}) {
    auto comms = initThreadComms(n);
    std::barrier done(n);
    const uint64_t offered = loom::test::counter("resident_calls_offered_in_place");
    onThreads(n, [&](int r) {
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      // Allocated once: cudaFree waits for the whole device, where another
      // rank's stream may be held for a call that needs this rank's next one.
      const size_t most = static_cast<size_t>(n) * ((size_t{1} << 20) + 3) * 8 + 1;
      DeviceBuffer dsend(most), drecv(most);
      ArriveOnExit freeTogether{done};  // nobody frees while a peer's stream may still be held
      for (Coll coll : {Coll::Broadcast, Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                        Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::SendRecv}) {
        for (loomDataType_t type : {loomFloat32, loomBfloat16, loomInt64}) {
          for (size_t count : {size_t{0}, size_t{7}, (size_t{1} << 20) + 3}) {
            const check::Case c{coll, type, check::Op::Sum, n, r, n - 1, count};
            std::vector<std::byte> send(check::sendElements(c) * sizeOf(type) + 1), recv(check::recvElements(c) * sizeOf(type) + 1);
            check::fillSend(c, send.data());
            cuda::copyToDevice(dsend.data(), send.data(), send.size());
            const bool pair = coll == Coll::SendRecv;
            if (pair) {
              ASSERT_EQ(loomGroupStart(), loomSuccess);
            }
            ASSERT_EQ(check::callCollective(c, dsend.data(), drecv.data(), loomSum, comms[r], reinterpret_cast<loomStream_t>(stream)),
                      loomSuccess)
                << loomGetLastError(comms[r]);
            if (pair) {
              ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
            }
            ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
            cuda::copyFromDevice(recv.data(), drecv.data(), recv.size());
            if (check::hasResult(c)) {
              ASSERT_EQ(check::checkResult(c, recv.data()), "")
                  << check::collName(coll) << " " << check::typeName(type) << " count " << count << " rank " << r << "/" << n;
            }
          }
        }
      }
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    });
    // Threads of one process: the out-of-place calls read their inputs where
    // they lie (the kernels that load published places), not through the scratch.
    EXPECT_GT(loom::test::counter("resident_calls_offered_in_place") - offered, 0u) << n << " ranks";
    destroyAll(comms);
  }
}

// Threads on one GPU run a small all-reduce's flags inside its one kernel
// (LOOM_DEVICE_ONE_KERNEL_BYTES): every type under sum, product, minimum and
// maximum, 7 and 4099 elements, back to back on each rank's stream with no
// synchronization between (so each kernel polls for the peers' next call
// while the last may still run), a call past the size in batches between
// them; every result exact (small whole numbers, which every type holds).
TEST(GpuStreams, SmallAllReducesOfThreadsRunTheirFlagsInOneKernel) {
  REQUIRE_GPU();
  constexpr loomRedOp_t kOps[] = {loomSum, loomProd, loomMin, loomMax};
  const auto value = [](int r, size_t i, int call) { return static_cast<int>((i + static_cast<size_t>(r + call)) % 3); };
  for (int n : {2, 4}) {
    auto comms = initThreadComms(n);
    std::barrier done(n);
    onThreads(n, [&](int r) {
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      constexpr size_t kLarge = 20000;  // 80 KB of floats: past the default, in batches
      DeviceBuffer large(kLarge * 4);
      std::vector<std::unique_ptr<DeviceBuffer>> sends, recvs;
      struct Call {
        loomDataType_t type;
        loomRedOp_t op;
        size_t count;
        int index;
      };
      std::vector<Call> calls;
      int index = 0;
      for (loomDataType_t type : kAllTypes) {
        for (loomRedOp_t op : kOps) {
          for (size_t count : {size_t{7}, size_t{4099}}) calls.push_back({type, op, count, index++});
        }
      }
      for (const Call& c : calls) {
        std::vector<std::byte> in(c.count * sizeOf(c.type));
        for (size_t i = 0; i < c.count; ++i) {
          const int v = value(r, i, c.index);
          std::byte* at = in.data() + i * sizeOf(c.type);
          switch (c.type) {
            case loomFloat16: { const uint16_t h = cpu::floatToHalf(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
            case loomBfloat16: { const uint16_t h = cpu::floatToBfloat16(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
            case loomFloat32: { const float f = static_cast<float>(v); std::memcpy(at, &f, 4); break; }
            case loomFloat64: { const double d = v; std::memcpy(at, &d, 8); break; }
            default: { const uint64_t bits = static_cast<uint64_t>(v); std::memcpy(at, &bits, sizeOf(c.type)); break; }
          }
        }
        sends.push_back(std::make_unique<DeviceBuffer>(in.size()));
        recvs.push_back(std::make_unique<DeviceBuffer>(in.size()));
        sends.back()->upload(in.data());
      }
      ok(cudaMemset(large.data(), 0, kLarge * 4), "cudaMemset");
      ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      done.arrive_and_wait();  // nobody allocates while a peer's stream may be held
      ArriveOnExit freeTogether{done};
      const auto on = reinterpret_cast<loomStream_t>(stream);
      for (size_t k = 0; k < calls.size(); ++k) {
        const Call& c = calls[k];
        ASSERT_EQ(loomAllReduce(sends[k]->data(), recvs[k]->data(), c.count, c.type, c.op, comms[r], on), loomSuccess)
            << loomGetLastError(comms[r]);
        if (k % 10 == 9) {
          ASSERT_EQ(loomAllReduce(large.data(), large.data(), kLarge, loomFloat32, loomSum, comms[r], on), loomSuccess)
              << loomGetLastError(comms[r]);
        }
      }
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      for (size_t k = 0; k < calls.size(); ++k) {
        const Call& c = calls[k];
        std::vector<std::byte> got(c.count * sizeOf(c.type));
        recvs[k]->download(got.data());
        for (size_t i = 0; i < c.count; ++i) {
          long long want = value(0, i, c.index);
          for (int q = 1; q < n; ++q) {
            const int v = value(q, i, c.index);
            want = c.op == loomSum ? want + v : c.op == loomProd ? want * v : c.op == loomMin ? std::min<long long>(want, v)
                                                                                              : std::max<long long>(want, v);
          }
          const std::byte* at = got.data() + i * sizeOf(c.type);
          double seen = 0;
          switch (c.type) {
            case loomFloat16: { uint16_t h; std::memcpy(&h, at, 2); seen = cpu::halfToFloat(h); break; }
            case loomBfloat16: { uint16_t h; std::memcpy(&h, at, 2); seen = cpu::bfloat16ToFloat(h); break; }
            case loomFloat32: { float f; std::memcpy(&f, at, 4); seen = f; break; }
            case loomFloat64: std::memcpy(&seen, at, 8); break;
            default: { uint64_t bits = 0; std::memcpy(&bits, at, sizeOf(c.type)); seen = static_cast<double>(bits); break; }
          }
          ASSERT_EQ(seen, static_cast<double>(want)) << check::typeName(c.type) << " op " << c.op << " count " << c.count
                                                     << ", rank " << r << " of " << n << ", element " << i;
        }
      }
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    });
    destroyAll(comms);
  }
}

// Threads on one GPU run an all-reduce past one scratch slot as one piece,
// reading each other's buffers where they lie in two shots: in place, out of
// place with a PreMulSum (its input scaled into memory of the call's own,
// cudaMallocAsync's), and an average in place, back to back on each rank's
// stream; exact (halves and quarters of small whole numbers).
TEST(GpuStreams, AllReducesPastOneSlotOfThreadsRunAsOnePiece) {
  REQUIRE_GPU();
  const size_t count = (size_t{4} << 20) + 5;  // 16 MiB of floats: eight slots
  for (int n : {2, 4}) {
    auto comms = initThreadComms(n);
    std::barrier done(n);
    const uint64_t whole = loom::test::counter("resident_whole_calls");
    onThreads(n, [&](int r) {
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      DeviceBuffer a(count * 4), b(count * 4), c(count * 4);
      ArriveOnExit freeTogether{done};  // nobody frees while a peer's stream may still be held
      std::vector<float> input(count);
      for (size_t i = 0; i < count; ++i) input[i] = static_cast<float>(i % 13 + static_cast<size_t>(r));
      for (DeviceBuffer* buffer : {&a, &b, &c}) cuda::copyToDevice(buffer->data(), input.data(), count * 4);
      float half = 0.5f;
      loomRedOp_t premul{};
      ASSERT_EQ(loomRedOpCreatePreMulSum(&premul, &half, loomFloat32, loomScalarHostImmediate, comms[r]), loomSuccess);
      const auto on = reinterpret_cast<loomStream_t>(stream);
      ASSERT_EQ(loomAllReduce(a.data(), a.data(), count, loomFloat32, loomSum, comms[r], on), loomSuccess)
          << loomGetLastError(comms[r]);
      ASSERT_EQ(loomAllReduce(b.data(), c.data(), count, loomFloat32, premul, comms[r], on), loomSuccess)
          << loomGetLastError(comms[r]);
      ASSERT_EQ(loomAllReduce(b.data(), b.data(), count, loomFloat32, loomAvg, comms[r], on), loomSuccess)
          << loomGetLastError(comms[r]);
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const auto nf = static_cast<float>(n);
      const auto expect = [&](DeviceBuffer& buffer, float scale, const char* what) {
        std::vector<float> got(count);
        cuda::copyFromDevice(got.data(), buffer.data(), count * 4);
        for (size_t i = 0; i < count; ++i) {
          const float sum = nf * static_cast<float>(i % 13) + nf * (nf - 1) / 2;
          if (got[i] != sum * scale) {
            ADD_FAILURE() << what << ", rank " << r << " of " << n << ", element " << i << ": " << got[i]
                          << ", expected " << sum * scale;
            return;
          }
        }
      };
      expect(a, 1.0f, "sum in place");
      expect(c, 0.5f, "PreMulSum out of place");
      expect(b, 1.0f / nf, "average in place");
      EXPECT_EQ(loomRedOpDestroy(premul, comms[r]), loomSuccess);
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    });
    EXPECT_EQ(loom::test::counter("resident_whole_calls") - whole, static_cast<uint64_t>(n) * 3) << "calls that ran in pieces";
    destroyAll(comms);
  }
}

// Symmetric windows on the GPU: every rank's send buffer in a window it
// registered (the same offset everywhere), so that the resident path reads
// its peers' inputs in place (CUDA's pointers between threads): all-reduce,
// all-gather, reduce-scatter and all-to-all, checked.
TEST(GpuStreams, CallsInSymmetricWindowsReadTheirPeersInPlace) {
  REQUIRE_GPU();
  using check::Coll;
  for (int n : {2, 3}) {
    auto comms = initThreadComms(n);
    std::barrier done(n);
    const uint64_t before = loom::test::counter("resident_calls_in_windows");
    onThreads(n, [&](int r) {
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      constexpr size_t kOffset = 4096;
      const size_t most = static_cast<size_t>(n) * ((size_t{1} << 20) + 3) * 4 + 1;
      DeviceBuffer window(kOffset + most), drecv(most);
      ArriveOnExit freeTogether{done};
      loomWindow_t win = nullptr;
      ASSERT_EQ(loomCommWindowRegister(comms[r], window.data(), kOffset + most, &win, LOOM_WIN_COLL_SYMMETRIC), loomSuccess)
          << loomGetLastError(comms[r]);
      auto* dsend = static_cast<std::byte*>(window.data()) + kOffset;
      for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll}) {
        for (size_t count : {size_t{7}, (size_t{1} << 20) + 3}) {
          const check::Case c{coll, loomFloat32, check::Op::Sum, n, r, 0, count};
          std::vector<std::byte> send(check::sendElements(c) * 4 + 1), recv(check::recvElements(c) * 4 + 1);
          check::fillSend(c, send.data());
          cuda::copyToDevice(dsend, send.data(), send.size());
          ASSERT_EQ(check::callCollective(c, dsend, drecv.data(), loomSum, comms[r], reinterpret_cast<loomStream_t>(stream)),
                    loomSuccess)
              << loomGetLastError(comms[r]);
          ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          cuda::copyFromDevice(recv.data(), drecv.data(), recv.size());
          ASSERT_EQ(check::checkResult(c, recv.data()), "") << check::collName(coll) << " count " << count << " rank " << r;
        }
      }
      EXPECT_EQ(loomCommWindowDeregister(comms[r], win), loomSuccess) << loomGetLastError(comms[r]);
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    });
    EXPECT_EQ(loom::test::counter("resident_calls_in_windows") - before, static_cast<uint64_t>(n) * 8) << "calls that did not read in place";
    destroyAll(comms);
  }
}

// A call whose stream never reaches it (the user's kernel before it waits
// forever) still ends when the communicator is aborted, and the stream goes
// on once the user's kernel does.
void abortBeforeTheStreamGetsThere() {
  auto comms = initThreadComms(1);
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  DeviceBuffer data(4096);
  HostFlag flag;
  gpu::holdUntil(stream, flag.go(), flag.timedOut());
  ASSERT_EQ(loomAllReduce(data.data(), data.data(), 1024, loomFloat32, loomSum, comms[0], reinterpret_cast<loomStream_t>(stream)),
            loomSuccess);
  EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess);  // returns once the call's task gave up
  flag.set();
  ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // Loom's gate let the stream go
  EXPECT_EQ(flag.timedOut()[0], 0);
  ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

TEST(GpuStreams, AnAbortEndsACallWhoseStreamNeverGetsThere) {
  REQUIRE_GPU();
  for (const char* gate : {"kernel", "memop"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_GATE=") + gate);
    ScopedEnv how("LOOM_CUDA_GATE", gate);
    abortBeforeTheStreamGetsThere();
  }
}

// Capturing a call into a CUDA graph is refused by name where the call meets
// its peers at run time (it would replay without them); one rank's call,
// only a copy on the stream, is captured and replays.
TEST(GpuStreams, GraphCaptureIsRefusedByNameWhereTheCallMeetsItsPeers) {
  REQUIRE_GPU();
  std::vector<int32_t> in(1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 7 + 1);
  DeviceBuffer a(4096);
  DeviceBuffer b(4096);
  a.upload(in.data());
  {
    auto one = initThreadComms(1);
    cudaStream_t stream = nullptr;
    ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    EXPECT_EQ(loomAllReduce(a.data(), b.data(), 1024, loomInt32, loomSum, one[0], reinterpret_cast<loomStream_t>(stream)),
              loomSuccess)
        << loomGetLastError(one[0]);
    cudaGraph_t graph = nullptr;
    ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::vector<int32_t> out(in.size(), 0);
    b.download(out.data());
    EXPECT_EQ(out, in) << "the replayed one-rank all-reduce";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    destroyAll(one);
  }
  auto comms = initThreadComms(2);
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  const auto refused = [&](loomResult_t result, const char* what) {
    EXPECT_EQ(result, loomInvalidUsage) << what;
    EXPECT_NE(std::string(loomGetLastError(comms[0])).find("CUDA graph"), std::string::npos)
        << what << ": " << loomGetLastError(comms[0]);
  };
  const auto s = reinterpret_cast<loomStream_t>(stream);
  refused(loomAllReduce(a.data(), a.data(), 1024, loomFloat32, loomSum, comms[0], s), "all-reduce");
  refused(loomSend(a.data(), 1024, loomFloat32, 1, comms[0], s), "send");
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
  destroyAll(comms);
}

}  // namespace
}  // namespace loom::test
