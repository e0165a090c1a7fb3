#include "comm/device/cuda.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {

bool compiledWithCuda() {
#ifdef LOOM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int deviceCount() {
#ifdef LOOM_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for a host communicator
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

}  // namespace loom::cuda
