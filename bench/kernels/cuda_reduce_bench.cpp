// Google Benchmark, CUDA builds: the device's reduction kernels
// (collectives/cuda) beside cudaMemcpy device-to-device on the same buffer
// sizes, each in GB/s of memory traffic counted as the host's are (a copy
// reads and writes its bytes; a reduction of k sources reads k and writes
// one), timed with CUDA events. Skipped, saying so, without a device.
//   loom-bench-kernels --benchmark_filter=Cuda --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "base/datatype.hpp"
#include "base/device/cuda.hpp"
#include "base/device/device_buffer.hpp"
#include "collectives/cuda/kernels.hpp"

namespace {

using loom::cpu::ReduceOp;

// Times `body` with events on the legacy stream, per iteration (manual time).
template <class Body>
void timeOnDevice(benchmark::State& state, size_t trafficBytes, Body&& body) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  body();  // warm: first launch loads the module
  cudaDeviceSynchronize();
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    body();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) state.SkipWithError(cudaGetErrorString(e));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * trafficBytes));
}

bool noDevice(benchmark::State& state) {
  if (loom::cuda::deviceCount() > 0) return false;
  state.SkipWithError("no CUDA device visible");
  return true;
}

void CudaMemcpyD2D(benchmark::State& state) {
  if (noDevice(state)) return;
  const auto bytes = static_cast<size_t>(state.range(0));
  loom::cuda::DeviceBuffer a(bytes), out(bytes);
  cudaMemset(a.data(), 0x3c, bytes);
  timeOnDevice(state, 2 * bytes, [&] { cudaMemcpyAsync(out.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, nullptr); });
}

void CudaReduce(benchmark::State& state, loomDataType_t type, ReduceOp op, int sources) {
  if (noDevice(state)) return;
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / loom::datatypeSize(type);
  std::vector<std::unique_ptr<loom::cuda::DeviceBuffer>> in;
  std::vector<const void*> pointers;
  for (int s = 0; s < sources; ++s) {
    in.push_back(std::make_unique<loom::cuda::DeviceBuffer>(bytes));
    cudaMemset(in.back()->data(), 0x3c + s % 2, bytes);  // normal numbers in every float type
    pointers.push_back(in.back()->data());
  }
  loom::cuda::DeviceBuffer out(bytes);
  timeOnDevice(state, (static_cast<size_t>(sources) + 1) * bytes,
               [&] { loom::coll::cuda::reduce(type, op, pointers, out.data(), count, 1.0, nullptr); });
}

constexpr int64_t kL2 = 16 << 20, kMemory = 256 << 20;

BENCHMARK(CudaMemcpyD2D)->Arg(kL2)->Arg(kMemory)->UseManualTime();
#define LOOM_CUDA_BENCH(name, type, op, sources) \
  BENCHMARK_CAPTURE(CudaReduce, name, type, op, sources)->Arg(kL2)->Arg(kMemory)->UseManualTime()
LOOM_CUDA_BENCH(float32_sum_2, loomFloat32, ReduceOp::Sum, 2);
LOOM_CUDA_BENCH(bfloat16_sum_2, loomBfloat16, ReduceOp::Sum, 2);
LOOM_CUDA_BENCH(float16_sum_2, loomFloat16, ReduceOp::Sum, 2);
LOOM_CUDA_BENCH(float32_sum_4, loomFloat32, ReduceOp::Sum, 4);
LOOM_CUDA_BENCH(bfloat16_sum_8, loomBfloat16, ReduceOp::Sum, 8);
LOOM_CUDA_BENCH(float64_max_2, loomFloat64, ReduceOp::Max, 2);
LOOM_CUDA_BENCH(int8_sum_2, loomInt8, ReduceOp::Sum, 2);
LOOM_CUDA_BENCH(float32_premulsum_2, loomFloat32, ReduceOp::PreMulSum, 2);

}  // namespace
