// The tests' fake device, for machines without a GPU (CI): a DeviceRuntime
// (runtime.hpp) whose "device memory" is host memory it allocated, whose
// streams are worker threads that run their queued copies, waits, writes and
// host functions in order and asynchronously, as a GPU's streams do, and
// whose IPC shares an allocation's memfd with peer processes, which map it
// where a GPU's memory would be opened through CUDA IPC. Never on in a
// user's process: only tests turn it on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "base/device/runtime.hpp"

namespace loom::cuda {

// While on, runtime() is the fake's.
void useFakeDevice(bool on);
bool fakeDevice();

// Device memory of the thread's current fake GPU (the runtime's allocDevice).
void* fakeDeviceAlloc(size_t bytes);
void fakeDeviceFree(void* p);

// The fake device shows `count` GPUs (1 until a test says otherwise;
// setCurrentDevice picks one per thread), and `peerAccess` says whether one
// GPU's kernels may read another's memory, as NVLink or a shared PCIe switch
// lets a real GPU's. Per process: the ranks of a test that runs processes
// each say the same.
void fakeDeviceGpus(int count, bool peerAccess);
int fakeGpuCount();

// While on, this process cannot open other processes' fake device memory,
// as CUDA IPC may refuse to: the tests' failure.
void fakeRefuseIpc(bool on);
// While on, every fake device buffer says it came from a memory pool
// (DeviceRuntime::fromMemoryPool), as cudaMallocAsync's do.
void fakeMemoryPools(bool on);
// While non-zero, an allocation on a stream (allocOnStream) of more than
// `most` bytes fails, as cudaMallocAsync's does where the device's memory is
// taken: the tests' way to a full GPU.
void fakeStreamMemoryBytes(size_t most);
// While set, `stream` says it is being captured into a CUDA graph (as after
// cudaStreamBeginCapture); nullptr ends it. The capture records nothing:
// the tests' way to reach the refusals.
void fakeCapture(StreamHandle stream);

// cudaDeviceSynchronize's fake, for the tests to call as programs do (nccl-
// tests' threads between calls): waits until every stream of the thread's
// current fake GPU has done what it has queued. False where one still had
// work after `limit`: on a GPU the call would wait on.
bool fakeSynchronizeDevice(std::chrono::milliseconds limit);

// Bytes the fake streams have copied to or from pinned memory (the staged
// path's buffers): the tests' proof that a call took the staged path; and
// the bytes of every other copy on a stream (a device buffer to another, to
// a host buffer in place), but for copies from published places (a peer's
// slot or buffer read where it lies: copyFromPlace).
uint64_t fakeBytesStaged();
uint64_t fakeBytesCopied();
// Buffers allocated on a stream (allocOnStream) since the process began.
uint64_t fakeStreamAllocations();
// Batches of stream memory operations queued (memops) since the process began.
uint64_t fakeMemopBatches();

}  // namespace loom::cuda
