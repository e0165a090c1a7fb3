#include "collectives/device_kernels.hpp"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/backoff.hpp"
#include "base/counters.hpp"
#include "base/datatype.hpp"
#include "base/device/runtime.hpp"

#ifdef LOOM_HAVE_CUDA
#include "collectives/cuda/kernels.hpp"
#endif

namespace loom::coll {
namespace {

// The flag operations of reduceFromBetween, in order, by the host: a wait
// turns Loom's one wait loop until its word holds at least its value.
void runFlagsOnHost(std::span<const loom::cuda::MemOp> ops) {
  for (const loom::cuda::MemOp& op : ops) {
    if (op.write) {
      __atomic_store_n(op.word, op.value, __ATOMIC_RELEASE);
      continue;
    }
    Backoff backoff;
    while (__atomic_load_n(op.word, __ATOMIC_ACQUIRE) < op.value) {
      backoff.idle([](Backoff::Phase) {}, [](std::chrono::microseconds t) { std::this_thread::sleep_for(t); });
    }
  }
}

// reduceFrom's fold, by the host, as the stream runs it: nothing where a
// place is not for call `sequence`.
void foldPlaces(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places, uint64_t sequence,
                size_t block, size_t at, void* dst, size_t count) {
  if (count == 0) return;
  std::vector<const void*> sources(places.size());
  for (size_t r = 0; r < places.size(); ++r) {
    sources[r] = placeOnHost(places[r], sequence, false, block, at);
    if (sources[r] == nullptr) return;
  }
  cpu::reduce(type, op, sources, dst, count, 1.0);
  counters::add(counters::Counter::HostKernelBytes, count * datatypeSize(type));
}

// The host's kernels, each a host function on the stream.
class HostKernels final : public DeviceKernels {
 public:
  void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
              double scalar, void* stream) override {
    if (count == 0) return;
    const bool counted = !(op == cpu::ReduceOp::PreMulSum && sources.size() == 1);
    loom::cuda::runtime().hostFunction(
        stream, [type, op, all = std::vector<const void*>(sources.begin(), sources.end()), dst, count, scalar,
                 counted] {
          cpu::reduce(type, op, all, dst, count, scalar);
          if (counted) counters::add(counters::Counter::HostKernelBytes, count * datatypeSize(type));
        });
  }
  void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor, void* stream) override {
    if (count == 0) return;
    loom::cuda::runtime().hostFunction(stream, [=] { cpu::divide(type, dst, count, divisor); });
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0 || dst == src) return;
    loom::cuda::runtime().hostFunction(stream, [=] {
      std::memcpy(dst, src, bytes);
      counters::add(counters::Counter::HostKernelBytes, bytes);
    });
  }
  void reduceFrom(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                  uint64_t sequence, size_t block, size_t at, void* dst, size_t count, void* stream) override {
    if (count == 0) return;
    loom::cuda::runtime().hostFunction(
        stream, [=, all = std::vector<PlaceView>(places.begin(), places.end())] {
          foldPlaces(type, op, all, sequence, block, at, dst, count);
        });
  }
  void reduceFromBetween(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places, uint64_t sequence,
                         size_t block, size_t at, void* dst, size_t count, std::span<const loom::cuda::MemOp> before,
                         std::span<const loom::cuda::MemOp> after, void* stream) override {
    // One host function, as one kernel: no batch of memory operations.
    loom::cuda::runtime().hostFunction(
        stream, [=, all = std::vector<PlaceView>(places.begin(), places.end()),
                 first = std::vector<loom::cuda::MemOp>(before.begin(), before.end()),
                 last = std::vector<loom::cuda::MemOp>(after.begin(), after.end())] {
          runFlagsOnHost(first);
          foldPlaces(type, op, all, sequence, block, at, dst, count);
          runFlagsOnHost(last);
        });
  }
  void copyFromBetween(std::span<const PlaceView> places, uint64_t sequence, std::span<const PlaceCopy> copies,
                       std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                       void* stream) override {
    loom::cuda::runtime().hostFunction(
        stream, [=, all = std::vector<PlaceView>(places.begin(), places.end()),
                 each = std::vector<PlaceCopy>(copies.begin(), copies.end()),
                 first = std::vector<loom::cuda::MemOp>(before.begin(), before.end()),
                 last = std::vector<loom::cuda::MemOp>(after.begin(), after.end())] {
          runFlagsOnHost(first);
          // As copyFromPlace: a place not for this call moves nothing.
          for (const PlaceCopy& c : each) {
            const std::byte* src = placeOnHost(all[c.rank], sequence, false, c.block, 0);
            if (src != nullptr && src != c.dst && c.bytes != 0) std::memcpy(c.dst, src, c.bytes);
          }
          runFlagsOnHost(last);
        });
  }
};

#ifdef LOOM_HAVE_CUDA
class CudaKernels final : public DeviceKernels {
 public:
  void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
              double scalar, void* stream) override {
    if (count != 0) cuda::reduce(type, op, sources, dst, count, scalar, stream);
  }
  void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor, void* stream) override {
    if (count != 0) cuda::divide(type, dst, count, divisor, stream);
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes != 0 && dst != src) cuda::copy(dst, src, bytes, stream);
  }
  void reduceFrom(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                  uint64_t sequence, size_t block, size_t at, void* dst, size_t count, void* stream) override {
    if (count != 0) cuda::reduceFrom(type, op, places, sequence, block, at, dst, count, stream);
  }
  void reduceFromBetween(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places, uint64_t sequence,
                         size_t block, size_t at, void* dst, size_t count, std::span<const loom::cuda::MemOp> before,
                         std::span<const loom::cuda::MemOp> after, void* stream) override {
    cuda::reduceFromBetween(type, op, places, sequence, block, at, dst, count, before, after, stream);
  }
  void copyFromBetween(std::span<const PlaceView> places, uint64_t sequence, std::span<const PlaceCopy> copies,
                       std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                       void* stream) override {
    cuda::copyFromBetween(places, sequence, copies, before, after, stream);
  }
};
#endif

}  // namespace

void DeviceKernels::average(loomDataType_t type, void* dst, size_t count, int ranks, void* stream) {
  if (isFloatType(type)) {
    const void* source = dst;
    reduce(type, cpu::ReduceOp::PreMulSum, std::span(&source, 1), dst, count, 1.0 / static_cast<double>(ranks),
           stream);
  } else {
    divide(type, dst, count, static_cast<uint64_t>(ranks), stream);
  }
}

DeviceKernels& deviceKernels() {
  static HostKernels host;
#ifdef LOOM_HAVE_CUDA
  static CudaKernels device;
  if (!loom::cuda::runtime().hostReadsDeviceMemory()) return device;
#endif
  return host;
}

}  // namespace loom::coll
