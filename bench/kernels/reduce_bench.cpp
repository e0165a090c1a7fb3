// Google Benchmark: the reduction kernels in GB/s of memory traffic (two
// sources read, one destination written) beside memcpy (one read, one write)
// on the same buffer sizes: 1 MiB (cache) and 64 MiB (memory). CUDA builds
// add the device's kernels beside cudaMemcpy (cuda_reduce_bench.cpp).
//   loom-bench-kernels [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "base/datatype.hpp"
#include "collectives/cpu/reduce.hpp"

namespace {

using loom::cpu::ReduceOp;

void Reduce(benchmark::State& state, loomDataType_t type, ReduceOp op) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / loom::datatypeSize(type);
  // 0x3c/0x3d bytes are ordinary normal numbers in every float type (no subnormal slow paths).
  std::vector<std::byte> a(bytes, std::byte{0x3c}), b(bytes, std::byte{0x3d}), out(bytes);
  const void* sources[] = {a.data(), b.data()};
  for (auto _ : state) {
    loom::cpu::reduce(type, op, sources, out.data(), count, 1.0);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 3 * bytes));
}

void Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<std::byte> a(bytes, std::byte{1}), out(bytes);
  for (auto _ : state) {
    std::memcpy(out.data(), a.data(), bytes);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

constexpr int64_t kCache = 1 << 20, kMemory = 64 << 20;

BENCHMARK(Memcpy)->Arg(kCache)->Arg(kMemory);
#define LOOM_REDUCE_BENCH(name, type, op) \
  BENCHMARK_CAPTURE(Reduce, name, type, op)->Arg(kCache)->Arg(kMemory)
LOOM_REDUCE_BENCH(float32_sum, loomFloat32, ReduceOp::Sum);
LOOM_REDUCE_BENCH(float32_max, loomFloat32, ReduceOp::Max);
LOOM_REDUCE_BENCH(float64_sum, loomFloat64, ReduceOp::Sum);
LOOM_REDUCE_BENCH(float16_sum, loomFloat16, ReduceOp::Sum);
LOOM_REDUCE_BENCH(bfloat16_sum, loomBfloat16, ReduceOp::Sum);
LOOM_REDUCE_BENCH(int32_sum, loomInt32, ReduceOp::Sum);
LOOM_REDUCE_BENCH(int64_prod, loomInt64, ReduceOp::Prod);
LOOM_REDUCE_BENCH(uint8_min, loomUint8, ReduceOp::Min);
LOOM_REDUCE_BENCH(float32_premulsum, loomFloat32, ReduceOp::PreMulSum);

}  // namespace

BENCHMARK_MAIN();
