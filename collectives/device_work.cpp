#include "collectives/device_work.hpp"

#include "base/deadline.hpp"
#include "base/error.hpp"
#include "base/device/staging.hpp"
#include "base/log.hpp"

namespace loom::coll {

DeviceWork::DeviceWork(Communicator& comm) : comm_(comm), kernels_(deviceKernels()) {}

DeviceWork::~DeviceWork() {
  if (queued_) drain();
}

void DeviceWork::waitForInputs() {
  loom::cuda::DeviceStream& stream = comm_.staging.stream();
  if (!loom::cuda::onUserStream()) stream.afterDefaultStream();
  stream.synchronize(comm_.deviceWaitCheck());
}

void DeviceWork::reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                        size_t count) {
  queued_ = true;
  kernels_.reduce(type, op, sources, dst, count, 1.0, comm_.staging.stream().handle());
}

void DeviceWork::scale(loomDataType_t type, const void* src, void* dst, size_t count, double scalar) {
  queued_ = true;
  kernels_.reduce(type, cpu::ReduceOp::PreMulSum, std::span(&src, 1), dst, count, scalar,
                  comm_.staging.stream().handle());
}

void DeviceWork::average(loomDataType_t type, void* dst, size_t count, int ranks) {
  queued_ = true;
  kernels_.average(type, dst, count, ranks, comm_.staging.stream().handle());
}

void DeviceWork::copy(std::byte* dst, const std::byte* src, size_t bytes) {
  queued_ = true;
  kernels_.copy(dst, src, bytes, comm_.staging.stream().handle());
}

void DeviceWork::finish() {
  try {
    comm_.staging.stream().synchronize(comm_.deviceWaitCheck());
  } catch (...) {
    drain();
    throw;
  }
  queued_ = false;
}

void DeviceWork::drain() noexcept {
  queued_ = false;
  const Deadline deadline = Deadline::after(comm_.config().timeout);
  try {
    comm_.staging.stream().synchronize([&] {
      if (deadline.expired()) throw Error(loomTimeout, "the device's work outlived the communicator's timeout");
    });
  } catch (const std::exception& e) {
    LOOM_WARN(Coll, "a failing call's device work did not drain: %s; its buffers may still be read or written",
              e.what());
  }
}

}  // namespace loom::coll
