#include "comm/engine/cuda_stream.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "base/device/cuda.hpp"
#include "base/device/staging.hpp"

namespace loom {

CudaStreamTasks::CudaStreamTasks(void* stream) : gate_(stream) {}

void CudaStreamTasks::enqueue(std::function<void()> task, std::function<void()> giveUp) {
  const uint64_t ticket = gate_.admit();
  const int device = cuda::currentDevice();
  HostStream::enqueue(
      [this, ticket, device, task = std::move(task), giveUp = std::move(giveUp)] {
        // Whatever happens, the CUDA stream goes on once this task is over.
        struct Release {
          cuda::StreamGate& gate;
          uint64_t ticket;
          ~Release() { gate.release(ticket); }
        } release{gate_, ticket};
        cuda::setCurrentDevice(device);
        gate_.waitStarted(ticket, giveUp ? giveUp : [] {});
        cuda::UserStreamScope onStream;
        task();
      },
      {});
}

CudaStreamTasks& CudaStreamTasks::of(void* stream) {
  static std::mutex mutex;
  // Never destroyed: a worker may still run at exit, after the CUDA runtime has gone.
  static auto* streams = new std::map<void*, std::unique_ptr<CudaStreamTasks>>();
  std::lock_guard lock(mutex);
  auto& slot = (*streams)[stream];
  if (!slot) slot.reset(new CudaStreamTasks(stream));
  return *slot;
}

}  // namespace loom
