// nvbandwidth's copy measurements, behind a header without CUDA in it: a
// copy engine's bandwidth from pinned host memory to a device, back, and
// from one device to another (peer access where the pair has it), each the
// median of several cudaMemcpyAsync calls timed with CUDA events on a
// stream of its own. A GPU on a degraded PCIe link, or a pair whose NVLink
// is down, shows up here before any collective runs.
#pragma once

#include <cstddef>
#include <string>

namespace loom::cuda {

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// "host->device", "device->host", "device->device".
const char* copyKindName(CopyKind kind);

struct CopyResult {
  double GBps = 0;
  std::string error;  // empty when measured; else why not ("no CUDA device", a CUDA error's text)
};

// `device`: the device copied to (HostToDevice), from (DeviceToHost), or
// from (DeviceToDevice, to `peer`). `iters` timed copies of `bytes` after
// one untimed. Never throws: a build without CUDA, a machine without a
// device or a device out of range comes back as an error.
CopyResult measureCopy(CopyKind kind, int device, int peer, size_t bytes, int iters);

}  // namespace loom::cuda
