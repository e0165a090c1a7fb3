// How a call on a user's CUDA stream becomes part of that stream while Loom's
// host side does the work: a gate on the stream. At the call, the gate marks
// what the user queued so far (an event: the call's inputs are ready once it
// fires) and queues behind it a one-thread kernel that waits, reading a
// counter in pinned host memory, until the host side has finished the call
// and raised the counter to its ticket. Whatever the user queues on the
// stream after the call (a kernel reading the result) runs after that wait,
// and the call itself returns at once, as NCCL's do. The host side always
// raises the counter, also when the call fails or is aborted, so the stream
// never waits forever for Loom.
//
// Nothing of CUDA in this header: the gate asks the process's DeviceRuntime
// (runtime.hpp), so under the tests' fake device a fake stream's gate holds
// its worker thread. Without CUDA or a device, a gate cannot be made
// (loomInvalidUsage).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace loom::cuda {

// Loads the gate's kernel and pins the memory of the first gates' counters.
// Called once a communicator sees a device, before any of its calls can hold
// a stream: with CUDA's lazy loading, loading a kernel may wait for the whole
// device to be idle, and so, it is said, may pinning memory; done while a
// gate held a stream that waits for this very host side, either would wait
// forever. Idempotent, thread-safe; throws loomUnhandledCudaError.
void prepareStreamGates();
// Adds a kernel loader that prepareStreamGates runs too (after those added
// before), for the layers above whose kernels a held stream's call launches
// (collectives/cuda). Call from a static initializer; `load` must be
// idempotent and thread-safe, and throws as prepareStreamGates does.
void loadBeforeStreamGates(void (*load)());

class StreamGate {
 public:
  // `stream`: the user's cudaStream_t, on the caller's current device.
  explicit StreamGate(void* stream);
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // On the thread making the call: marks the stream's work so far and queues
  // the wait for this call's ticket behind it. A stream being captured into a
  // CUDA graph is refused (loomInvalidUsage): the graph would replay the
  // wait without the host side's work.
  uint64_t admit();
  // Returns once the work the stream held before `ticket` was admitted has
  // finished. `check` runs between polls and throws to give up (an abort);
  // a CUDA error there throws loomUnhandledCudaError.
  void waitStarted(uint64_t ticket, const std::function<void()>& check);
  // Lets the stream past `ticket` and every ticket before it.
  void release(uint64_t ticket) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::cuda
