// Memory on the current CUDA device (cudaMalloc), freed with the object,
// with synchronous copies of the whole buffer from and to the host: what
// tools and tests that put data on a GPU need (loom-perf -G). Under the fake
// device (fake_device.hpp) it is the fake's memory. Nothing of CUDA in this
// header.
#pragma once

#include <cstddef>

namespace loom::cuda {

class DeviceRuntime;

class DeviceBuffer {
 public:
  // Throws loomUnhandledCudaError when the device has no room, loomInvalidUsage without CUDA.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }
  // The whole buffer from or to host memory, on a stream that waits for no other.
  void upload(const void* host);
  void download(void* host) const;

 private:
  DeviceRuntime& runtime_;  // the one that made it frees it
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loom::cuda
