// Where a CUDA device's current stream has got to, taken on the thread that
// queues an operation and waited for on the group's worker: the inputs of a
// collective on CUDA tensors are ready only once the kernels queued before
// it on the caller's stream have run, and Loom's calls take no CUDA stream
// from torch (the worker runs them with the null stream, so each has
// finished when it returns). The wait polls the event, with a deadline: a
// stream that never gets there is an error naming the operation, not a hang.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <chrono>
#include <memory>
#include <optional>

namespace loom::torch {

class StreamFence {
 public:
  StreamFence() = default;  // on the CPU: nothing to wait for
  // On a CUDA device: an event recorded on the calling thread's current
  // stream of `device`. On any other device: nothing to wait for.
  explicit StreamFence(c10::Device device);

  // The CUDA device it waits on, if any.
  std::optional<c10::Device> device() const { return device_; }
  // Until the stream has passed the event (true), or `deadline` (false).
  bool waitUntil(std::chrono::steady_clock::time_point deadline) const;

 private:
  std::optional<c10::Device> device_;
  std::shared_ptr<c10::Event> event_;  // shared: a queued task is copied, the event is not copyable
};

}  // namespace loom::torch
