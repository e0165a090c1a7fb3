// The DeviceRuntime implementations runtime() picks from (runtime.hpp).
#pragma once

#include <vector>

#include "base/device/runtime.hpp"

namespace loom::cuda {

// CUDA's (defined in CUDA builds only).
DeviceRuntime& cudaRuntime();
// A build without CUDA: no devices; device work refused.
DeviceRuntime& noRuntime();
// The tests' fake device (fake_device.hpp).
DeviceRuntime& fakeRuntime();

// The kernel loaders of the layers above (stream_gate.hpp's
// loadBeforeStreamGates), which CUDA's loadKernels runs.
std::vector<void (*)()>& kernelLoaders();

}  // namespace loom::cuda
