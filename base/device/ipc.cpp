#include "base/device/ipc.hpp"

#include <cstring>
#include <string>

#include "base/device/cuda.hpp"
#include "base/error.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {

#ifdef LOOM_HAVE_CUDA
namespace {

// cuMemGetAddressRange, through the runtime, so that libloom does not link
// the driver's library (a process without a driver must still load it).
using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
AddressRange addressRange() {
  static const AddressRange f = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return AddressRange{nullptr};
    }
    return reinterpret_cast<AddressRange>(p);
  }();
  return f;
}

}  // namespace
#endif

std::optional<IpcExport> exportIpc(const void* p) {
#ifdef LOOM_HAVE_CUDA
  if (fakeDevice() || deviceCount() == 0) return std::nullopt;
  const AddressRange range = addressRange();
  if (range == nullptr) return std::nullopt;
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (range(&base, &bytes, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return std::nullopt;
  cudaIpcMemHandle_t handle{};
  if (cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
    (void)cudaGetLastError();  // not cudaMalloc's: staged instead
    return std::nullopt;
  }
  static_assert(sizeof(handle) == kIpcHandleBytes);
  IpcExport out;
  std::memcpy(out.handle.data(), &handle, sizeof handle);
  out.offset = reinterpret_cast<uintptr_t>(p) - static_cast<uintptr_t>(base);
  return out;
#else
  (void)p;
  return std::nullopt;
#endif
}

OpenedIpc::OpenedIpc(const IpcHandle& handle) {
#ifdef LOOM_HAVE_CUDA
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  if (const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(loomUnhandledCudaError,
                std::string("cudaIpcOpenMemHandle of a peer's buffer: ") + cudaGetErrorString(e));
  }
  base_ = static_cast<std::byte*>(p);
#else
  (void)handle;
  throw Error(loomInvalidUsage, "a peer's CUDA IPC handle: this build of Loom has no CUDA");
#endif
}

OpenedIpc::~OpenedIpc() {
#ifdef LOOM_HAVE_CUDA
  if (base_ != nullptr && cudaIpcCloseMemHandle(base_) != cudaSuccess) (void)cudaGetLastError();
#endif
}

}  // namespace loom::cuda
