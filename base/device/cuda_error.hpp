// The CUDA runtime's errors as Loom's (CUDA builds only: the sources that
// include this have the runtime's headers too).
#pragma once

#include <cuda_runtime_api.h>

namespace loom::cuda {

// Nothing on cudaSuccess; otherwise clears the runtime's sticky last error and
// throws loomUnhandledCudaError, "WHAT: the runtime's message".
void throwIfFailed(cudaError_t error, const char* what);

}  // namespace loom::cuda
