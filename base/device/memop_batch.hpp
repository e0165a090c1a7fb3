// Stream memory operations gathered on the host and queued on their stream
// as one batch (DeviceRuntime::memops): a round of flags is a handful of
// waits and writes, and each queued alone costs the host an API call and the
// device a command of its own.
//
// The batch owns the order: any other work for the stream is queued through
// stream(), which queues what was gathered first, so nothing overtakes a
// wait or a write gathered before it; flush() queues the rest at the end.
#pragma once

#include <cstdint>
#include <vector>

#include "base/device/runtime.hpp"

namespace loom::cuda {

class MemopBatch {
 public:
  MemopBatch(DeviceRuntime& runtime, StreamHandle stream) : runtime_(runtime), stream_(stream) {}
  MemopBatch(const MemopBatch&) = delete;
  MemopBatch& operator=(const MemopBatch&) = delete;

  // A wait until *word >= value; a write of value into word.
  void wait(const uint64_t* word, uint64_t value);
  void write(uint64_t* word, uint64_t value);
  // The stream, for work other than these operations, once what was
  // gathered is queued on it.
  StreamHandle stream();
  // Queues what was gathered.
  void flush();
  // Hands over what was gathered, unqueued, for work that runs it itself
  // (DeviceKernels::reduceFromBetween).
  std::vector<MemOp> take();
  DeviceRuntime& runtime() const { return runtime_; }

 private:
  DeviceRuntime& runtime_;
  StreamHandle stream_;
  std::vector<MemOp> ops_;
};

}  // namespace loom::cuda
