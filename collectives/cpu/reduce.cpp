#include "collectives/cpu/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/error.hpp"
#include "base/half.hpp"
#include "collectives/cpu/fold.hpp"
#include "collectives/cpu/half_block.hpp"

namespace loom::cpu {
namespace {

// Element types (fold.hpp); float16 has its own block-converting body below,
// which converts through F16C a block at a time instead of Element<Half>.

// One pass: a block of every source is folded into an accumulator that stays
// in L1, then written once. dst may be a source: a block is read before it is written.
// float16: each block is converted through half_block (F16C) into float32,
// combined there, and converted back once.
template <ReduceOp Op>
[[gnu::always_inline]] inline void reduceHalfBody(const void* const* sources, size_t nsources, void* dst, size_t count,
                                                  double scalar) {
  constexpr size_t kBlock = 512;
  const auto factor = static_cast<float>(scalar);
  float acc[kBlock], in[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    halfToFloatBlock(static_cast<const std::byte*>(sources[0]) + 2 * base, acc, n);
    if constexpr (Op == ReduceOp::PreMulSum) {
      for (size_t j = 0; j < n; ++j) acc[j] *= factor;
    }
    for (size_t s = 1; s < nsources; ++s) {
      halfToFloatBlock(static_cast<const std::byte*>(sources[s]) + 2 * base, in, n);
      if constexpr (Op == ReduceOp::PreMulSum) {
        for (size_t j = 0; j < n; ++j) acc[j] = combine<Op>(acc[j], in[j] * factor);
      } else {
        for (size_t j = 0; j < n; ++j) acc[j] = combine<Op>(acc[j], in[j]);
      }
    }
    floatToHalfBlock(acc, static_cast<std::byte*>(dst) + 2 * base, n);
  }
}

template <class T, ReduceOp Op>
[[gnu::always_inline]] inline void reduceBody(const void* const* sources, size_t nsources, void* dst, size_t count,
                                              double scalar) {
  using E = Element<T>;
  using S = typename E::Stored;
  using A = typename E::Acc;
  constexpr size_t kBlock = 512;
  const A factor = static_cast<A>(scalar);
  auto load = [&](const std::byte* p, size_t j) {
    S v;
    std::memcpy(&v, p + j * sizeof(S), sizeof(S));  // any alignment
    A a = E::load(v);
    if constexpr (Op == ReduceOp::PreMulSum) a = static_cast<A>(a * factor);
    return a;
  };
  A acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    const auto* first = static_cast<const std::byte*>(sources[0]) + base * sizeof(S);
    for (size_t j = 0; j < n; ++j) acc[j] = load(first, j);
    for (size_t s = 1; s < nsources; ++s) {
      const auto* src = static_cast<const std::byte*>(sources[s]) + base * sizeof(S);
      for (size_t j = 0; j < n; ++j) acc[j] = combine<Op>(acc[j], load(src, j));
    }
    auto* out = static_cast<std::byte*>(dst) + base * sizeof(S);
    for (size_t j = 0; j < n; ++j) {
      S v = E::store(acc[j]);
      std::memcpy(out + j * sizeof(S), &v, sizeof(S));
    }
  }
}

template <class T, ReduceOp Op>
[[gnu::always_inline]] inline void reduceAny(const void* const* sources, size_t nsources, void* dst, size_t count,
                                             double scalar) {
  if constexpr (std::is_same_v<T, Half>) reduceHalfBody<Op>(sources, nsources, dst, count, scalar);
  else reduceBody<T, Op>(sources, nsources, dst, count, scalar);
}

// Not under ThreadSanitizer: its instrumented ifunc resolvers run before its
// runtime is up and crash at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define LOOM_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LOOM_MULTIVERSION
#endif

using Kernel = void (*)(const void* const*, size_t, void*, size_t, double);

#define LOOM_KERNEL(T, OP)                                                                                        \
  LOOM_MULTIVERSION void reduce_##T##_##OP(const void* const* s, size_t n, void* d, size_t c, double k) {        \
    reduceAny<T, ReduceOp::OP>(s, n, d, c, k);                                                                   \
  }
#define LOOM_KERNELS(T) \
  LOOM_KERNEL(T, Sum) LOOM_KERNEL(T, Prod) LOOM_KERNEL(T, Min) LOOM_KERNEL(T, Max) LOOM_KERNEL(T, PreMulSum)
LOOM_KERNELS(int8_t)
LOOM_KERNELS(uint8_t)
LOOM_KERNELS(int32_t)
LOOM_KERNELS(uint32_t)
LOOM_KERNELS(int64_t)
LOOM_KERNELS(uint64_t)
LOOM_KERNELS(Half)
LOOM_KERNELS(float)
LOOM_KERNELS(double)
LOOM_KERNELS(Bfloat16)
#define LOOM_ROW(T) {reduce_##T##_Sum, reduce_##T##_Prod, reduce_##T##_Min, reduce_##T##_Max, reduce_##T##_PreMulSum}

// Indexed by loomDataType_t, then ReduceOp.
constexpr Kernel kKernels[loomNumTypes][5] = {LOOM_ROW(int8_t),  LOOM_ROW(uint8_t), LOOM_ROW(int32_t),
                                              LOOM_ROW(uint32_t), LOOM_ROW(int64_t), LOOM_ROW(uint64_t),
                                              LOOM_ROW(Half),    LOOM_ROW(float),   LOOM_ROW(double),
                                              LOOM_ROW(Bfloat16)};

template <class T>
void divideAll(void* dst, size_t count, uint64_t divisor) {
  auto* out = static_cast<std::byte*>(dst);
  const auto d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, out + i * sizeof(T), sizeof(T));
    v = static_cast<T>(v / d);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

void reduce(loomDataType_t type, ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
            double scalar) {
  if (static_cast<unsigned>(type) >= loomNumTypes) {
    throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(type)) + " is not a loomDataType_t");
  }
  if (sources.empty() || count == 0) return;
  kKernels[type][static_cast<int>(op)](sources.data(), sources.size(), dst, count, scalar);
}

void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor) {
  if (divisor == 0) throw Error(loomInternalError, "divide by zero");
  switch (type) {
    case loomInt8: return divideAll<int8_t>(dst, count, divisor);
    case loomUint8: return divideAll<uint8_t>(dst, count, divisor);
    case loomInt32: return divideAll<int32_t>(dst, count, divisor);
    case loomUint32: return divideAll<uint32_t>(dst, count, divisor);
    case loomInt64: return divideAll<int64_t>(dst, count, divisor);
    case loomUint64: return divideAll<uint64_t>(dst, count, divisor);
    default: throw Error(loomInternalError, "divide is for integer types; floats average with PreMulSum");
  }
}

}  // namespace loom::cpu
