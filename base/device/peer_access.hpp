// Which GPU device memory is on, and whether this thread's kernels may touch
// it: the in-place device path (collectives/shm/node_area.cpp) reads every
// local rank's buffers with one rank's kernels, which works on that rank's
// own GPU and on any other GPU that CUDA grants it peer access to (NVLink, a
// shared PCIe switch), and nowhere else.
//
// Nothing of CUDA in this header: the process's DeviceRuntime answers
// (under the tests' fake device, for the fake GPUs).
#pragma once

#include <cstdint>

namespace loom::cuda {

// Which GPU holds device memory `p`: a hash of its PCI bus id, the same in
// every process whatever CUDA_VISIBLE_DEVICES numbers it (odd and small on
// the fake device, whose GPU 0 is 1; 0 if unknown).
uint64_t deviceIdOf(const void* p);

// Whether kernels and copies queued on this thread's current device may
// read and write memory of the GPU `deviceId` names: its own, or one this
// process sees and may access as a peer, which this enables (once per pair;
// CUDA IPC's lazy mappings enable it themselves). False for 0, and for a GPU
// this process does not see.
bool canReachDevice(uint64_t deviceId);

// Whether this thread's current device's kernels may read an allocation on
// the GPU `deviceId` names where it lies: canReachDevice's answer, but for
// memory from a stream-ordered pool (`pooled`, cudaMallocAsync's), which
// peer access does not open: only on its own GPU.
bool canReadInPlace(uint64_t deviceId, bool pooled);

}  // namespace loom::cuda
