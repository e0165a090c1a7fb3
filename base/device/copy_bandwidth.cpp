#include "base/device/copy_bandwidth.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "base/device/cuda.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {

const char* copyKindName(CopyKind kind) {
  constexpr const char* kNames[] = {"host->device", "device->host", "device->device"};
  return kNames[static_cast<int>(kind)];
}

#ifdef LOOM_HAVE_CUDA
namespace {

// Every CUDA resource of one measurement, freed on every path.
struct Resources {
  void* host = nullptr;
  void* src = nullptr;
  void* dst = nullptr;
  int srcDevice = -1;
  int dstDevice = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;

  ~Resources() {
    if (stop != nullptr) cudaEventDestroy(stop);
    if (start != nullptr) cudaEventDestroy(start);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (src != nullptr) free(src, srcDevice);
    if (dst != nullptr) free(dst, dstDevice);
    if (host != nullptr) cudaFreeHost(host);
    (void)cudaGetLastError();
  }
  static void free(void* p, int device) {
    if (device >= 0) cudaSetDevice(device);
    cudaFree(p);
  }
};

// Throws nothing: the first CUDA error ends the measurement with its text.
std::string failed(cudaError_t error, const char* what) {
  (void)cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorString(error);
}

}  // namespace

CopyResult measureCopy(CopyKind kind, int device, int peer, size_t bytes, int iters) {
  const int count = deviceCount();
  if (count == 0) return {.error = "no CUDA device"};
  const auto missing = [count](int d) {
    return CopyResult{.error = "no CUDA device " + std::to_string(d) + " (this process sees " + std::to_string(count) + ")"};
  };
  if (device < 0 || device >= count) return missing(device);
  if (kind == CopyKind::DeviceToDevice && (peer < 0 || peer >= count)) return missing(peer);
  if (bytes == 0 || iters < 1) return {.error = "nothing to copy"};
  int previous = 0;
  cudaGetDevice(&previous);
  CopyResult result;
  {
    Resources r;
    const auto attempt = [&](cudaError_t error, const char* what) {
      if (error != cudaSuccess && result.error.empty()) result.error = failed(error, what);
      return result.error.empty();
    };
    bool ok = attempt(cudaSetDevice(device), "cudaSetDevice");  // the copy's stream and events live here
    if (ok && kind != CopyKind::DeviceToDevice) ok = attempt(cudaMallocHost(&r.host, bytes), "cudaMallocHost");
    if (ok) {
      r.srcDevice = device;
      ok = attempt(cudaMalloc(&r.src, bytes), "cudaMalloc");
    }
    if (ok && kind == CopyKind::DeviceToDevice) {
      int canAccess = 0;
      cudaDeviceCanAccessPeer(&canAccess, device, peer);
      if (canAccess != 0 && peer != device) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled) ok = attempt(e, "cudaDeviceEnablePeerAccess");
      }
      ok = ok && attempt(cudaSetDevice(peer), "cudaSetDevice");
      r.dstDevice = peer;
      ok = ok && attempt(cudaMalloc(&r.dst, bytes), "cudaMalloc");
      ok = ok && attempt(cudaSetDevice(device), "cudaSetDevice");
    }
    ok = ok && attempt(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    ok = ok && attempt(cudaEventCreate(&r.start), "cudaEventCreate");
    ok = ok && attempt(cudaEventCreate(&r.stop), "cudaEventCreate");
    const auto copy = [&] {
      switch (kind) {
        case CopyKind::HostToDevice: return cudaMemcpyAsync(r.src, r.host, bytes, cudaMemcpyHostToDevice, r.stream);
        case CopyKind::DeviceToHost: return cudaMemcpyAsync(r.host, r.src, bytes, cudaMemcpyDeviceToHost, r.stream);
        case CopyKind::DeviceToDevice: return cudaMemcpyPeerAsync(r.dst, peer, r.src, device, bytes, r.stream);
      }
      return cudaErrorInvalidValue;
    };
    ok = ok && attempt(copy(), "cudaMemcpyAsync") && attempt(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
    std::vector<double> rates;
    for (int i = 0; ok && i < iters; ++i) {
      float ms = 0;
      ok = attempt(cudaEventRecord(r.start, r.stream), "cudaEventRecord") && attempt(copy(), "cudaMemcpyAsync") &&
           attempt(cudaEventRecord(r.stop, r.stream), "cudaEventRecord") &&
           attempt(cudaEventSynchronize(r.stop), "cudaEventSynchronize") &&
           attempt(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime");
      if (ok && ms > 0) rates.push_back(static_cast<double>(bytes) / (static_cast<double>(ms) * 1e-3) / 1e9);
    }
    if (ok && !rates.empty()) {
      std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
      result.GBps = rates[rates.size() / 2];
    }
  }
  cudaSetDevice(previous);
  return result;
}

#else

CopyResult measureCopy(CopyKind /*kind*/, int /*device*/, int /*peer*/, size_t /*bytes*/, int /*iters*/) {
  return {.error = "no CUDA device (built without CUDA)"};
}

#endif

}  // namespace loom::cuda
