#include "base/device/device_buffer.hpp"

#include <cstring>
#include <string>

#include "base/device/cuda.hpp"
#include "base/error.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes), fake_(fakeDevice()) {
  if (fake_) {
    data_ = static_cast<std::byte*>(fakeDeviceAlloc(bytes));
    if (data_ == nullptr) throw Error(loomSystemError, "out of memory for a fake device buffer");
    return;
  }
#ifdef LOOM_HAVE_CUDA
  void* p = nullptr;
  if (const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(loomUnhandledCudaError, "cudaMalloc of " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(e));
  }
  data_ = static_cast<std::byte*>(p);
#else
  throw Error(loomInvalidUsage, "device memory: this build of Loom has no CUDA");
#endif
}

DeviceBuffer::~DeviceBuffer() {
  if (fake_) {
    fakeDeviceFree(data_);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  if (cudaFree(data_) != cudaSuccess) (void)cudaGetLastError();
#endif
}

void DeviceBuffer::upload(const void* host) { copyToDevice(data_, host, bytes_); }

void DeviceBuffer::download(void* host) const { copyFromDevice(host, data_, bytes_); }

}  // namespace loom::cuda
