#include "collectives/device_work.hpp"

#include <atomic>
#include <cstring>

#include "base/device/cuda.hpp"
#include "base/datatype.hpp"
#include "base/device/staging.hpp"

#ifdef LOOM_HAVE_CUDA
#include "collectives/cuda/kernels.hpp"
#endif

namespace loom::coll {
namespace {

std::atomic<uint64_t> fakeInPlace{0};

}  // namespace

DeviceWork::DeviceWork(Communicator& comm) : comm_(comm) {}

void DeviceWork::waitForInputs() {
  loom::cuda::DeviceStream& stream = comm_.staging.stream();
  if (!loom::cuda::onUserStream()) stream.afterDefaultStream();
  stream.synchronize(comm_.deviceWaitCheck());
}

void DeviceWork::reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                        size_t count) {
  if (count == 0) return;
  if (loom::cuda::fakeDevice()) {
    cpu::reduce(type, op, sources, dst, count);
    fakeInPlace.fetch_add(count * datatypeSize(type), std::memory_order_relaxed);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  coll::cuda::reduce(type, op, sources, dst, count, 1.0, comm_.staging.stream().handle());
#endif
}

void DeviceWork::scale(loomDataType_t type, const void* src, void* dst, size_t count, double scalar) {
  if (count == 0) return;
  if (loom::cuda::fakeDevice()) {
    cpu::reduce(type, cpu::ReduceOp::PreMulSum, std::span(&src, 1), dst, count, scalar);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  coll::cuda::reduce(type, cpu::ReduceOp::PreMulSum, std::span(&src, 1), dst, count, scalar,
                     comm_.staging.stream().handle());
#endif
}

void DeviceWork::divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor) {
  if (count == 0) return;
  if (loom::cuda::fakeDevice()) {
    cpu::divide(type, dst, count, divisor);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  coll::cuda::divide(type, dst, count, divisor, comm_.staging.stream().handle());
#endif
}

void DeviceWork::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (loom::cuda::fakeDevice()) {
    std::memcpy(dst, src, bytes);
    fakeInPlace.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  coll::cuda::copy(dst, src, bytes, comm_.staging.stream().handle());
#endif
}

void DeviceWork::finish() { comm_.staging.stream().synchronize(comm_.deviceWaitCheck()); }

uint64_t fakeDeviceBytesInPlace() { return fakeInPlace.load(std::memory_order_relaxed); }

}  // namespace loom::coll
