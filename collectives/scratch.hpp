// Memory that collectives reuse from call to call.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "base/device/device_buffer.hpp"

namespace loom::coll {

// Memory kept between calls and grown on demand, never zero-filled: a
// fresh vector per call zero-fills and page-faults the whole buffer every
// time (9% of a 16 MiB all-reduce across two namespaces went to that).
class Scratch {
 public:
  std::span<std::byte> get(size_t bytes);

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t bytes_ = 0;
};

// The same on the current CUDA device (the fake device's under the tests):
// PreMulSum's scaled input for a call whose algorithm reads device buffers
// in place, where peers map it through CUDA IPC as they would the user's.
// Growing frees the old allocation, which peers may still hold open in their
// cache of CUDA IPC views: the risk every cached view of a user's buffer
// runs, and that LOOM_CUDA_IPC_CACHE=0 removes (memory::Mappings).
class DeviceScratch {
 public:
  std::byte* get(size_t bytes);

 private:
  std::unique_ptr<cuda::DeviceBuffer> buffer_;
};

}  // namespace loom::coll
