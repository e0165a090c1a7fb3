#include "tests/support/device_memory.hpp"

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"

namespace loom::test {

const char* deviceMemoryKind() {
  static const bool gpu = [] {
    const bool real = cuda::deviceCount() > 0;
    if (!real) cuda::useFakeDevice(true);
    return real;
  }();
  return gpu ? "cuda" : "fake";
}

}  // namespace loom::test
