// The device kernels of kernels.hpp. One template per (type, op), read as
// the host's reduceBody (cpu/reduce.cpp): load every source's element (scaled
// for PreMulSum), fold them left to right in the accumulator type, store once.
// Two shapes of the same fold: 16-byte vectors (one uint4 per source per
// step, unpacked to the elements it holds), and single elements for what is
// left over or misaligned. Grid-stride loops, so one launch covers any count.
#include "collectives/cuda/kernels.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include "base/device/stream_gate.hpp"
#include "base/error.hpp"
#include "collectives/cpu/fold.hpp"

namespace loom::coll::cuda {
namespace {

using cpu::Bfloat16;
using cpu::combine;
using cpu::Element;
using cpu::Half;
using cpu::ReduceOp;

// A source's element as the fold takes it: widened, and scaled for PreMulSum.
template <class T, ReduceOp Op>
__device__ inline typename Element<T>::Acc take(typename Element<T>::Stored v, typename Element<T>::Acc factor) {
  using A = typename Element<T>::Acc;
  A a = Element<T>::load(v);
  if constexpr (Op == ReduceOp::PreMulSum) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      a = static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(factor)));
    } else {
      a = a * factor;
    }
  }
  return a;
}

struct Sources {
  const void* p[kMaxSources];
  int n;
};

__device__ inline size_t firstIndex() { return size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline size_t gridStride() { return size_t(gridDim.x) * blockDim.x; }

// The folds, inlined into each kernel so that a kernel's parameters stay
// where the launch put them. Elements [begin, end), one per thread per step.
template <class T, ReduceOp Op>
__device__ __forceinline__ void foldElements(const Sources& s, void* dst, size_t begin, size_t end, typename Element<T>::Acc factor) {
  using S = typename Element<T>::Stored;
  using A = typename Element<T>::Acc;
  for (size_t i = begin + firstIndex(); i < end; i += gridStride()) {
    A acc = take<T, Op>(static_cast<const S*>(s.p[0])[i], factor);
    for (int k = 1; k < s.n; ++k) acc = combine<Op>(acc, take<T, Op>(static_cast<const S*>(s.p[k])[i], factor));
    static_cast<S*>(dst)[i] = Element<T>::store(acc);
  }
}

// 16-byte vectors [0, vectors) of every source (all 16-byte aligned).
template <class T, ReduceOp Op>
__device__ __forceinline__ void foldVectors(const Sources& s, void* dst, size_t vectors, typename Element<T>::Acc factor) {
  using S = typename Element<T>::Stored;
  using A = typename Element<T>::Acc;
  constexpr int kPer = 16 / sizeof(S);
  for (size_t v = firstIndex(); v < vectors; v += gridStride()) {
    S in[kPer];
    A acc[kPer];
    uint4 raw = static_cast<const uint4*>(s.p[0])[v];
    memcpy(in, &raw, 16);
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] = take<T, Op>(in[j], factor);
    for (int k = 1; k < s.n; ++k) {
      raw = static_cast<const uint4*>(s.p[k])[v];
      memcpy(in, &raw, 16);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = combine<Op>(acc[j], take<T, Op>(in[j], factor));
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) in[j] = Element<T>::store(acc[j]);
    memcpy(&raw, in, 16);
    static_cast<uint4*>(dst)[v] = raw;
  }
}

template <class T, ReduceOp Op>
__global__ void reduceElements(Sources s, void* dst, size_t begin, size_t end, typename Element<T>::Acc factor) {
  foldElements<T, Op>(s, dst, begin, end, factor);
}

template <class T, ReduceOp Op>
__global__ void reduceVectors(Sources s, void* dst, size_t vectors, typename Element<T>::Acc factor) {
  foldVectors<T, Op>(s, dst, vectors, factor);
}

__device__ inline bool alignedOnDevice(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Where the ranks' places are: their entries in their flag lines, and this
// rank's tables of their regions.
struct Places {
  PlaceView p[kMaxSources];
  int n;
};

// The fold of every rank's published block: each thread block's first
// thread loads the places (and whether 16-byte vectors fit all of them),
// after `first` (which that thread alone runs), then the block folds as the
// kernels above do.
template <class T, ReduceOp Op, class First>
__device__ __forceinline__ void foldPublished(const Places& places, uint64_t sequence, size_t block, size_t at,
                                              void* dst, size_t count, First&& first) {
  using S = typename Element<T>::Stored;
  using A = typename Element<T>::Acc;
  __shared__ Sources s;
  __shared__ int shape;  // 0: nothing to read; 1: vectors, then elements; 2: elements
  if (threadIdx.x == 0) {
    first();
    s.n = places.n;
    bool vectors = alignedOnDevice(dst);
    shape = 1;
    for (int k = 0; k < places.n; ++k) {
      s.p[k] = placeOnDevice(places.p[k], sequence, false, block, at);
      if (s.p[k] == nullptr) shape = 0;
      vectors = vectors && alignedOnDevice(s.p[k]);
    }
    if (shape != 0 && !vectors) shape = 2;
  }
  __syncthreads();
  if (shape == 0) return;
  size_t done = 0;
  if (shape == 1) {
    const size_t vectors = count * sizeof(S) / 16;
    foldVectors<T, Op>(s, dst, vectors, A(1));
    done = vectors * 16 / sizeof(S);
  }
  foldElements<T, Op>(s, dst, done, count, A(1));
}

template <class T, ReduceOp Op>
__global__ void reducePublished(Places places, uint64_t sequence, size_t block, size_t at, void* dst, size_t count) {
  foldPublished<T, Op>(places, sequence, block, at, dst, count, [] {});
}

// Flag operations for one thread to run in order (kernels.hpp's
// reduceFromBetween).
struct Flags {
  uint64_t* word[kMaxFlagOps];
  uint64_t value[kMaxFlagOps];
  unsigned char write[kMaxFlagOps];
  int n;
};

// A wait polls its word (volatile: another rank's kernel or stream writes
// it) and then orders what follows after what it saw; a write is ordered
// after everything before it, this block's loads of the peers' buffers
// among them (the caller's __syncthreads gathers them). Device-wide fences:
// the ranks whose calls take this kernel share one GPU.
__device__ void runFlags(const Flags& f) {
  for (int i = 0; i < f.n; ++i) {
    if (f.write[i] != 0) {
      __threadfence();
      *reinterpret_cast<volatile uint64_t*>(f.word[i]) = f.value[i];
    } else {
      while (*reinterpret_cast<volatile const uint64_t*>(f.word[i]) < f.value[i]) __nanosleep(64);
      __threadfence();
    }
  }
}

// reducePublished's fold, in one thread block, between `before` and `after`.
template <class T, ReduceOp Op>
__global__ void reducePublishedBetween(Flags before, Places places, uint64_t sequence, size_t block, size_t at,
                                       void* dst, size_t count, Flags after) {
  foldPublished<T, Op>(places, sequence, block, at, dst, count, [&] { runFlags(before); });
  __syncthreads();  // every thread's loads of the peers' places are done
  if (threadIdx.x == 0) runFlags(after);
}

struct Copies {
  PlaceCopy c[kMaxSources];
  int n;
};

// Copies out of published places, in one thread block, between `before` and
// `after`: the first thread loads every source after `before`, then the
// block moves them, 16 bytes a thread at a time where both ends allow.
__global__ void copyPublishedBetween(Flags before, Places places, uint64_t sequence, Copies copies, Flags after) {
  __shared__ const char* from[kMaxSources];
  if (threadIdx.x == 0) {
    runFlags(before);
    for (int k = 0; k < copies.n; ++k) {
      from[k] = placeOnDevice(places.p[copies.c[k].rank], sequence, false, copies.c[k].block, 0);
    }
  }
  __syncthreads();
  for (int k = 0; k < copies.n; ++k) {
    const char* src = from[k];
    char* dst = static_cast<char*>(copies.c[k].dst);
    const size_t bytes = copies.c[k].bytes;
    if (src == nullptr || src == dst) continue;
    size_t done = 0;
    if (alignedOnDevice(src) && alignedOnDevice(dst)) {
      const size_t vectors = bytes / 16;
      for (size_t v = threadIdx.x; v < vectors; v += blockDim.x) {
        reinterpret_cast<uint4*>(dst)[v] = reinterpret_cast<const uint4*>(src)[v];
      }
      done = vectors * 16;
    }
    for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
  __syncthreads();  // every thread's loads of the peers' places are done
  if (threadIdx.x == 0) runFlags(after);
}

template <class T>
__global__ void divideElements(T* dst, size_t count, T divisor) {
  for (size_t i = firstIndex(); i < count; i += gridStride()) dst[i] = static_cast<T>(dst[i] / divisor);
}

constexpr unsigned kThreads = 256;
// Enough blocks to fill any current GPU several times over; the loops stride past them.
constexpr size_t kMaxBlocks = 4096;

unsigned blocksFor(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

void check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(loomUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(error));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T, ReduceOp Op>
void launchReduce(const Sources& s, void* dst, size_t count, double scalar, cudaStream_t stream) {
  using S = typename Element<T>::Stored;
  using A = typename Element<T>::Acc;
  const A factor = static_cast<A>(scalar);
  bool vectors = aligned16(dst);
  for (int k = 0; k < s.n; ++k) vectors = vectors && aligned16(s.p[k]);
  size_t done = 0;
  if (vectors) {
    const size_t n = count * sizeof(S) / 16;
    if (n != 0) reduceVectors<T, Op><<<blocksFor(n), kThreads, 0, stream>>>(s, dst, n, factor);
    done = n * 16 / sizeof(S);
  }
  if (done < count) reduceElements<T, Op><<<blocksFor(count - done), kThreads, 0, stream>>>(s, dst, done, count, factor);
  check(cudaGetLastError(), "launching a reduction kernel");
}

using Launcher = void (*)(const Sources&, void*, size_t, double, cudaStream_t);

template <class T, ReduceOp Op>
void launchReducePublished(const Places& places, uint64_t sequence, size_t block, size_t at, void* dst, size_t count,
                           cudaStream_t stream) {
  // Blocks for the vectors' count: where the places turn out misaligned, the
  // elements' loop strides over the rest.
  const size_t work = count * sizeof(typename Element<T>::Stored) / 16;
  reducePublished<T, Op><<<blocksFor(work == 0 ? count : work), kThreads, 0, stream>>>(places, sequence, block, at,
                                                                                      dst, count);
  check(cudaGetLastError(), "launching a reduction kernel over published places");
}

using PublishedLauncher = void (*)(const Places&, uint64_t, size_t, size_t, void*, size_t, cudaStream_t);

// One block: the fold is small, and a second block would need the first's
// flags.
template <class T, ReduceOp Op>
void launchReducePublishedBetween(const Flags& before, const Places& places, uint64_t sequence, size_t block,
                                  size_t at, void* dst, size_t count, const Flags& after, cudaStream_t stream) {
  reducePublishedBetween<T, Op><<<1, kThreads, 0, stream>>>(before, places, sequence, block, at, dst, count, after);
  check(cudaGetLastError(), "launching a reduction kernel between flags");
}

using BetweenLauncher = void (*)(const Flags&, const Places&, uint64_t, size_t, size_t, void*, size_t, const Flags&,
                                 cudaStream_t);

#define LOOM_ROW(T)                                                                                   \
  {launchReduce<T, ReduceOp::Sum>, launchReduce<T, ReduceOp::Prod>, launchReduce<T, ReduceOp::Min>, \
   launchReduce<T, ReduceOp::Max>, launchReduce<T, ReduceOp::PreMulSum>}

// Indexed by loomDataType_t, then ReduceOp, as the host's table.
const Launcher kLaunchers[loomNumTypes][5] = {LOOM_ROW(int8_t),  LOOM_ROW(uint8_t), LOOM_ROW(int32_t),
                                              LOOM_ROW(uint32_t), LOOM_ROW(int64_t), LOOM_ROW(uint64_t),
                                              LOOM_ROW(Half),    LOOM_ROW(float),   LOOM_ROW(double),
                                              LOOM_ROW(Bfloat16)};
#undef LOOM_ROW

// The launchers of published places: PreMulSum's column is Sum's, since a
// published input is scaled already.
#define LOOM_ROW(L, T) {L<T, ReduceOp::Sum>, L<T, ReduceOp::Prod>, L<T, ReduceOp::Min>, L<T, ReduceOp::Max>, L<T, ReduceOp::Sum>}
#define LOOM_TABLE(L)                                                                                     \
  {LOOM_ROW(L, int8_t), LOOM_ROW(L, uint8_t), LOOM_ROW(L, int32_t), LOOM_ROW(L, uint32_t),               \
   LOOM_ROW(L, int64_t), LOOM_ROW(L, uint64_t), LOOM_ROW(L, Half), LOOM_ROW(L, float), LOOM_ROW(L, double), \
   LOOM_ROW(L, Bfloat16)}

const PublishedLauncher kPublishedLaunchers[loomNumTypes][5] = LOOM_TABLE(launchReducePublished);
const BetweenLauncher kBetweenLaunchers[loomNumTypes][5] = LOOM_TABLE(launchReducePublishedBetween);
#undef LOOM_TABLE
#undef LOOM_ROW

Flags flagsOf(std::span<const loom::cuda::MemOp> ops) {
  if (ops.size() > kMaxFlagOps) {
    throw Error(loomInternalError, std::to_string(ops.size()) + " flag operations around one kernel, past " +
                                       std::to_string(kMaxFlagOps));
  }
  Flags f{};
  f.n = static_cast<int>(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    f.word[i] = ops[i].word;
    f.value[i] = ops[i].value;
    f.write[i] = ops[i].write ? 1 : 0;
  }
  return f;
}

template <class T>
void launchDivide(void* dst, size_t count, uint64_t divisor, cudaStream_t stream) {
  divideElements<T><<<blocksFor(count), kThreads, 0, stream>>>(static_cast<T*>(dst), count, static_cast<T>(divisor));
  check(cudaGetLastError(), "launching the divide kernel");
}

// Forces CUDA's lazy loading of every kernel here, once: loading one at its
// first launch can wait for the whole device to go idle, which never happens
// while a user's stream is held at a gate for the very call that launches it
// (base/device/stream_gate.hpp). cudaFuncGetAttributes loads a kernel. A
// kernel that cannot load (a GPU older than the build's architectures) is
// left to fail by name at its launch: a communicator whose calls never need
// it must still come up.
template <class T, ReduceOp Op>
void loadReduce() {
  cudaFuncAttributes attributes{};
  (void)cudaFuncGetAttributes(&attributes, reduceVectors<T, Op>);
  (void)cudaFuncGetAttributes(&attributes, reduceElements<T, Op>);
  (void)cudaFuncGetAttributes(&attributes, reducePublished<T, Op>);
  (void)cudaFuncGetAttributes(&attributes, reducePublishedBetween<T, Op>);
  (void)cudaGetLastError();
}

template <class T>
void loadAllOps() {
  loadReduce<T, ReduceOp::Sum>();
  loadReduce<T, ReduceOp::Prod>();
  loadReduce<T, ReduceOp::Min>();
  loadReduce<T, ReduceOp::Max>();
  loadReduce<T, ReduceOp::PreMulSum>();
  if constexpr (std::is_integral_v<T>) {
    cudaFuncAttributes attributes{};
    (void)cudaFuncGetAttributes(&attributes, divideElements<T>);
    (void)cudaGetLastError();
  }
}

void loadKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    loadAllOps<int8_t>();
    loadAllOps<uint8_t>();
    loadAllOps<int32_t>();
    loadAllOps<uint32_t>();
    loadAllOps<int64_t>();
    loadAllOps<uint64_t>();
    loadAllOps<Half>();
    loadAllOps<float>();
    loadAllOps<double>();
    loadAllOps<Bfloat16>();
    cudaFuncAttributes attributes{};
    (void)cudaFuncGetAttributes(&attributes, copyPublishedBetween);
    (void)cudaGetLastError();
  });
}

[[maybe_unused]] const bool kLoadedBeforeGates = (loom::cuda::loadBeforeStreamGates(loadKernels), true);

}  // namespace

void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
            double scalar, void* stream) {
  if (static_cast<unsigned>(type) >= loomNumTypes) {
    throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(type)) + " is not a loomDataType_t");
  }
  if (sources.size() > kMaxSources) {
    throw Error(loomInvalidArgument, "a device reduction folds at most " + std::to_string(kMaxSources) +
                                         " sources in one pass, not " + std::to_string(sources.size()));
  }
  if (sources.empty() || count == 0) return;
  Sources s{};
  s.n = static_cast<int>(sources.size());
  for (size_t k = 0; k < sources.size(); ++k) s.p[k] = sources[k];
  kLaunchers[type][static_cast<int>(op)](s, dst, count, scalar, static_cast<cudaStream_t>(stream));
}

void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor, void* stream) {
  if (divisor == 0) throw Error(loomInternalError, "divide by zero");
  if (count == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case loomInt8: return launchDivide<int8_t>(dst, count, divisor, s);
    case loomUint8: return launchDivide<uint8_t>(dst, count, divisor, s);
    case loomInt32: return launchDivide<int32_t>(dst, count, divisor, s);
    case loomUint32: return launchDivide<uint32_t>(dst, count, divisor, s);
    case loomInt64: return launchDivide<int64_t>(dst, count, divisor, s);
    case loomUint64: return launchDivide<uint64_t>(dst, count, divisor, s);
    default: throw Error(loomInternalError, "divide is for integer types; floats average with PreMulSum");
  }
}

void copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
}

void reduceFrom(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                uint64_t sequence, size_t block, size_t at, void* dst, size_t count, void* stream) {
  if (static_cast<unsigned>(type) >= loomNumTypes) {
    throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(type)) + " is not a loomDataType_t");
  }
  if (places.empty() || places.size() > kMaxSources) {
    throw Error(loomInvalidArgument, "a device reduction folds 1 to " + std::to_string(kMaxSources) +
                                         " sources in one pass, not " + std::to_string(places.size()));
  }
  if (count == 0) return;
  Places all{};
  all.n = static_cast<int>(places.size());
  for (size_t k = 0; k < places.size(); ++k) all.p[k] = places[k];
  kPublishedLaunchers[type][static_cast<int>(op)](all, sequence, block, at, dst, count,
                                                  static_cast<cudaStream_t>(stream));
}

void reduceFromBetween(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places, uint64_t sequence,
                       size_t block, size_t at, void* dst, size_t count, std::span<const loom::cuda::MemOp> before,
                       std::span<const loom::cuda::MemOp> after, void* stream) {
  if (static_cast<unsigned>(type) >= loomNumTypes) {
    throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(type)) + " is not a loomDataType_t");
  }
  if (places.empty() || places.size() > kMaxSources) {
    throw Error(loomInvalidArgument, "a device reduction folds 1 to " + std::to_string(kMaxSources) +
                                         " sources in one pass, not " + std::to_string(places.size()));
  }
  Places all{};
  all.n = static_cast<int>(places.size());
  for (size_t k = 0; k < places.size(); ++k) all.p[k] = places[k];
  // A count of 0 still runs the flags.
  kBetweenLaunchers[type][static_cast<int>(op)](flagsOf(before), all, sequence, block, at, dst, count, flagsOf(after),
                                                static_cast<cudaStream_t>(stream));
}

void copyFromBetween(std::span<const PlaceView> places, uint64_t sequence, std::span<const PlaceCopy> copies,
                     std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                     void* stream) {
  if (places.empty() || places.size() > kMaxSources || copies.size() > kMaxSources) {
    throw Error(loomInternalError, "copies between flags take at most " + std::to_string(kMaxSources) +
                                       " places and copies, not " + std::to_string(places.size()) + " and " +
                                       std::to_string(copies.size()));
  }
  Places all{};
  all.n = static_cast<int>(places.size());
  for (size_t k = 0; k < places.size(); ++k) all.p[k] = places[k];
  Copies each{};
  each.n = static_cast<int>(copies.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    if (copies[k].rank >= places.size()) throw Error(loomInternalError, "a copy from a rank with no place");
    each.c[k] = copies[k];
  }
  copyPublishedBetween<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(flagsOf(before), all, sequence, each,
                                                                              flagsOf(after));
  check(cudaGetLastError(), "launching a copy kernel between flags");
}

}  // namespace loom::coll::cuda
