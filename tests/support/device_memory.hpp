// Device memory for the tests: a CUDA device's where one is visible, else the
// fake device's (base/device/fake_device.hpp), which deviceMemoryKind() turns on for
// the test process so that the staged device path runs without a GPU too.
#pragma once

#include "base/device/device_buffer.hpp"

namespace loom::test {

// "cuda" or "fake": what a DeviceBuffer is in this process from now on.
const char* deviceMemoryKind();

// A DeviceBuffer made after deviceMemoryKind() has chosen.
class DeviceBuffer : public cuda::DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : cuda::DeviceBuffer(afterChoosing(bytes)) {}

 private:
  static size_t afterChoosing(size_t bytes) {
    deviceMemoryKind();
    return bytes;
  }
};

}  // namespace loom::test
