// Which DeviceRuntime the process has: the one place that knows whether this
// build has CUDA.
#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/device/runtimes.hpp"
#include "base/error.hpp"

namespace loom::cuda {

bool compiledWithCuda() {
#ifdef LOOM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<void (*)()>& kernelLoaders() {
  static std::vector<void (*)()> all;
  return all;
}

DeviceRuntime& runtime() {
  if (fakeDevice()) return fakeRuntime();
#ifdef LOOM_HAVE_CUDA
  return cudaRuntime();
#else
  return noRuntime();
#endif
}

void refuseCapture(DeviceRuntime& rt, StreamHandle stream) {
  if (!rt.capturing(stream)) return;
  throw Error(loomInvalidUsage, "the stream is being captured into a CUDA graph, which Loom supports only for a "
                                "communicator of one rank: make the call outside the capture");
}

}  // namespace loom::cuda
