// Device memory for the work of one call on its stream, from the stream's
// memory pool (DeviceRuntime::allocOnStream, cudaMallocAsync): a resident
// call's own copy of a buffer its peers may not read where it lies. Freed on
// the stream behind everything the call gathered in its batch and queued
// (memop_batch.hpp), however the call ends; left allocated where that cannot
// be queued (a failed stream), as a peer may still be reading it.
#pragma once

#include <cstddef>

#include "base/device/memop_batch.hpp"

namespace loom::cuda {

class CallBuffer {
 public:
  CallBuffer(size_t bytes, MemopBatch& batch);
  ~CallBuffer();
  CallBuffer(const CallBuffer&) = delete;
  CallBuffer& operator=(const CallBuffer&) = delete;
  std::byte* data() const { return data_; }

 private:
  MemopBatch& batch_;
  std::byte* data_;
};

}  // namespace loom::cuda
