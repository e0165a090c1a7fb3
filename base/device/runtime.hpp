// The device seam: every question Loom asks a GPU and every piece of work it
// queues on one goes through a DeviceRuntime, as every verbs call goes
// through transport/ibverbs/verbs.hpp. Three implementations:
//   - CUDA's (cuda_runtime.cpp, in CUDA builds): the real device;
//   - none (no_runtime.cpp): a build without CUDA; no devices, and device
//     work is refused with loomInvalidUsage;
//   - the fake device (fake_device.hpp): for machines without a GPU (CI),
//     host memory that calls itself device memory, and streams that are
//     worker threads running their queued work in order, asynchronously, as
//     a GPU's would, so that the stream paths (gates, events, stream memory
//     operations) run everywhere.
// The process's runtime is picked once, at first use (CUDA where compiled
// in, else none); only tests switch to the fake (useFakeDevice).
//
// Nothing of CUDA in this header: streams and events are opaque handles (a
// cudaStream_t and a cudaEvent_t under CUDA).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "base/device/published_piece.hpp"

namespace loom::cuda {

// What a pointer is, as the runtime sees it.
enum class PointerKind { Host, Device, HostPinned };

using StreamHandle = void*;  // nullptr: the legacy default stream
using EventHandle = void*;

// How a process lets another read its device memory in place (CUDA IPC).
inline constexpr size_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
using IpcHandle = std::array<std::byte, kIpcHandleBytes>;
struct IpcExport {
  IpcHandle handle{};
  uint64_t offset = 0;  // of the pointer from its allocation's start
};

// One stream memory operation of a batch (DeviceRuntime::memops): a write
// of `value` into `word`, or a wait until *word >= value (the word only read).
struct MemOp {
  bool write = false;
  uint64_t* word = nullptr;
  uint64_t value = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // "cuda", "none" or "fake".
  virtual const char* name() const = 0;

  // Devices. The count is the process's for its life (CUDA reads
  // CUDA_VISIBLE_DEVICES once); 0 without a device.
  virtual int deviceCount() = 0;
  // This thread's current device (0 without a device), and making `device` it.
  virtual int currentDevice() = 0;
  virtual void setCurrentDevice(int device) = 0;
  // The PCI bus id of `device` as hwloc spells it, "" where none is known.
  virtual std::string busId(int device) = 0;
  // A number naming `device` alike in every process of the machine; 0 where
  // unknown.
  virtual uint64_t deviceId(int device) = 0;
  virtual PointerKind pointerKind(const void* p) = 0;
  // Whether host code may read and write device memory as its own (the
  // fake's is host memory), so that host functions on a stream can do
  // what kernels would.
  virtual bool hostReadsDeviceMemory() const = 0;
  // The device holding device memory `p`, or -1.
  virtual int deviceOf(const void* p) = 0;
  // Whether `from`'s kernels may read `to`'s memory, enabling it the first
  // time (from the current device, which must be `from`).
  virtual bool enablePeerAccess(int from, int to) = 0;
  // Whether device memory `p` came from a stream-ordered memory pool
  // (cudaMallocAsync): another GPU's kernels read it only where its pool
  // grants them access (cudaMemPoolSetAccess), whatever peer access allows.
  virtual bool fromMemoryPool(const void* p) = 0;

  // Memory. Device memory on the current device; pinned host memory that
  // every device maps. Both throw when there is no room.
  virtual void* allocDevice(size_t bytes) = 0;
  virtual void freeDevice(void* p) noexcept = 0;
  virtual void* allocPinned(size_t bytes) = 0;
  virtual void freePinned(void* p) noexcept = 0;
  // Device memory for the work of one call on `stream`, from its device's
  // memory pool (cudaMallocAsync): ready for the work queued on `stream`
  // after this, and freed once the work queued before freeOnStream is done,
  // without waiting for the device as freeDevice does. Throws when there is
  // no room.
  // Whether `device` has stream-ordered memory pools, which allocOnStream needs.
  virtual bool hasMemoryPools(int device) = 0;
  virtual void* allocOnStream(size_t bytes, StreamHandle stream) = 0;
  virtual void freeOnStream(void* p, StreamHandle stream) noexcept = 0;

  // Streams: a new one never waits for the legacy default stream on its own.
  virtual StreamHandle createStream() = 0;
  virtual void destroyStream(StreamHandle stream) noexcept = 0;
  // Throws loomInvalidArgument where `stream` is not one the runtime knows
  // (the fake checks; CUDA cannot and trusts the caller).
  virtual void checkStream(StreamHandle stream) = 0;
  // The device `stream` belongs to.
  virtual int streamDevice(StreamHandle stream) = 0;
  // Whether `stream` is being captured into a graph.
  virtual bool capturing(StreamHandle stream) = 0;
  // dst <- src, queued; any mix of host and device memory.
  virtual void copy(void* dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  // `rows` rows of `rowBytes`, row i from src + i srcPitch to dst + i dstPitch, queued.
  virtual void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes, size_t rows,
                        StreamHandle stream) = 0;
  // dst <- `bytes` from a place another rank's stream published
  // (published_piece.hpp), its words loaded when the copy runs, not when it
  // is queued: the region's base + input (or result) + block x pitch + at.
  // Nothing is copied where the place is not for `sequence` (a stream a
  // failure let go before the publisher got there).
  virtual void copyFromPlace(void* dst, PlaceView place, uint64_t sequence, bool result, size_t block, size_t at,
                             size_t bytes, StreamHandle stream) = 0;
  // dst <- src, returning when done, on a stream of its own that waits for no other.
  virtual void copyNow(void* dst, const void* src, size_t bytes) = 0;
  // Whether everything queued on `stream` is done; throws on the device's error.
  virtual bool idle(StreamHandle stream) = 0;
  // A host function queued on `stream`: it runs once the work before it is
  // done, and the work after it waits for it. It must not call the runtime.
  virtual void hostFunction(StreamHandle stream, std::function<void()> fn) = 0;

  // Events: a point in a stream's queue.
  virtual EventHandle record(StreamHandle stream) = 0;
  virtual bool reached(EventHandle event) = 0;  // throws on the device's error
  virtual void destroyEvent(EventHandle event) noexcept = 0;
  // Work queued on `stream` after this waits until `event` is reached.
  virtual void waitEvent(StreamHandle stream, EventHandle event) = 0;

  // Stream memory operations on a 64-bit word of pinned host memory (or
  // device memory): whether `device` has them, a wait queued until
  // *word >= value holding no SM, and a write of `value` queued.
  virtual bool hasMemops(int device) = 0;
  virtual void waitValue(StreamHandle stream, const uint64_t* word, uint64_t value) = 0;
  virtual void writeValue(StreamHandle stream, uint64_t* word, uint64_t value) = 0;
  // `ops` queued in order, as waitValue and writeValue would queue them one
  // by one, in one batch (cuStreamBatchMemOp), which NVIDIA documents as
  // saving work on the host and on the device.
  virtual void memops(StreamHandle stream, std::span<const MemOp> ops) = 0;
  // A host write of such a word, done when it returns (the host cannot store
  // into a GPU's memory: a copy under CUDA).
  virtual void storeValue(uint64_t* word, uint64_t value) = 0;
  // A host read of such a word, as it is now.
  virtual uint64_t loadValue(const uint64_t* word) = 0;
  // The same wait as a one-thread kernel that polls the word (where memops
  // are missing).
  virtual void holdKernel(StreamHandle stream, const uint64_t* word, uint64_t value) = 0;
  // Loads that kernel and those the layers above registered
  // (stream_gate.hpp's loadBeforeStreamGates) ahead of need: lazy loading
  // may wait for the whole device to be idle.
  virtual void loadKernels() = 0;

  // CUDA IPC: the export of the allocation holding `p`, or nullopt where
  // the runtime will not export it (then the buffer is staged); a peer's
  // export opened here (its allocation's start), and closed.
  virtual std::optional<IpcExport> exportIpc(const void* p) = 0;
  virtual void* openIpc(const IpcHandle& handle) = 0;
  virtual void closeIpc(void* base) noexcept = 0;
};

// The process's runtime (the fake's while a test has it on).
DeviceRuntime& runtime();

// Throws loomInvalidUsage, naming CUDA graphs, where `stream` is being
// captured into one: work that meets Loom's host side or its peers at run
// time (a gate's ticket, a resident call's sequence numbers) would replay
// from the graph without them. What is only copies on the stream (one
// rank's calls) may be captured.
void refuseCapture(DeviceRuntime& rt, StreamHandle stream);

}  // namespace loom::cuda
