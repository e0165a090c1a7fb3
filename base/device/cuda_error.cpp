#ifdef LOOM_HAVE_CUDA
#include "base/device/cuda_error.hpp"

#include <string>

#include "base/error.hpp"

namespace loom::cuda {

void throwIfFailed(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(loomUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(error));
}

}  // namespace loom::cuda
#endif
