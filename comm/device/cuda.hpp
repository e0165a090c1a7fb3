// The CUDA devices this process sees. Builds and answers 0 without CUDA, and
// without a driver or device.
#pragma once

namespace loom::cuda {

bool compiledWithCuda();
int deviceCount();

}  // namespace loom::cuda
