// A user's CUDA stream (a cudaStream_t cast to loomStream_t) as Loom's calls
// see it: a host stream, whose tasks run in order on a worker thread, with a
// gate (base/device/stream_gate.hpp) on the CUDA stream for each task. A
// task starts once the work queued on the CUDA stream before its call has
// finished, and the CUDA stream goes on past the call only once the task is
// done, so a kernel queued after the call sees its result; the caller never
// waits. A task runs on the device that was current where the call was made.
#pragma once

#include <functional>

#include "base/device/stream_gate.hpp"
#include "comm/engine/stream.hpp"

namespace loom {

class CudaStreamTasks final : public HostStream {
 public:
  using HostStream::enqueue;
  void enqueue(std::function<void()> task, std::function<void()> giveUp) override;

  // The process's one for `stream`, made on first use. Kept for the
  // process's life: CUDA streams carry no destruction callback, and a
  // stream's handle may be reused by the next one the user makes, which
  // then shares its worker, harmlessly.
  static CudaStreamTasks& of(void* stream);

 private:
  explicit CudaStreamTasks(void* stream);

  cuda::StreamGate gate_;
};

}  // namespace loom
