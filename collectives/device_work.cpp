#include "collectives/device_work.hpp"

#include "base/device/staging.hpp"

namespace loom::coll {

DeviceWork::DeviceWork(Communicator& comm) : comm_(comm), kernels_(deviceKernels()) {}

void DeviceWork::waitForInputs() {
  loom::cuda::DeviceStream& stream = comm_.staging.stream();
  if (!loom::cuda::onUserStream()) stream.afterDefaultStream();
  stream.synchronize(comm_.deviceWaitCheck());
}

void DeviceWork::reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                        size_t count) {
  kernels_.reduce(type, op, sources, dst, count, 1.0, comm_.staging.stream().handle());
}

void DeviceWork::scale(loomDataType_t type, const void* src, void* dst, size_t count, double scalar) {
  kernels_.reduce(type, cpu::ReduceOp::PreMulSum, std::span(&src, 1), dst, count, scalar,
                  comm_.staging.stream().handle());
}

void DeviceWork::average(loomDataType_t type, void* dst, size_t count, int ranks) {
  kernels_.average(type, dst, count, ranks, comm_.staging.stream().handle());
}

void DeviceWork::copy(std::byte* dst, const std::byte* src, size_t bytes) {
  kernels_.copy(dst, src, bytes, comm_.staging.stream().handle());
}

void DeviceWork::finish() { comm_.staging.stream().synchronize(comm_.deviceWaitCheck()); }

}  // namespace loom::coll
