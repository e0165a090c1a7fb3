// Registrations: how a peer reaches memory of this rank directly. A Handle
// names a range by its kind and what that kind's importer needs: a memfd's
// owner, fd and offsets (loomMemAlloc's host memory), or the device
// runtime's IPC handle and offset (device memory; an ibv_mr's rkey
// or a UCX rkey may come later, each a kind of its own). Handles are plain values of one
// size, so they travel in the node segment as they are and serialise into
// handshakes; Mappings is the importer's side, which turns a peer's handle
// into a local address and keeps the mapping.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "base/bytes.hpp"
#include "base/device/ipc.hpp"
#include "memory/memory_kind.hpp"

namespace loom::memory {

struct Handle {
  MemoryKind kind = MemoryKind::Host;
  int32_t pid = 0;        // the owner; 0: no range (nothing published)
  int32_t fd = -1;        // HostShared: the allocation's memfd in the owner
  uint64_t serial = 0;    // with fd: unique per allocation in its process
  uint64_t mapBytes = 0;  // with fd: the whole allocation
  uint64_t offset = 0;    // of the range, from the allocation's start
  uint64_t address = 0;   // of the range in its owner
  uint64_t device = 0;    // CudaDevice: which GPU (cuda::deviceIdOf), 0 unknown
  bool hasIpc = false;    // CudaDevice: `ipc` is the allocation's CUDA IPC handle
  bool pooled = false;    // CudaDevice: from a memory pool (cudaMallocAsync), which another GPU's kernels cannot read
  cuda::IpcHandle ipc{};

  // Whether a process other than the owner can map it.
  bool reachableByPeers() const {
    return kind == MemoryKind::HostShared || (kind == MemoryKind::CudaDevice && hasIpc);
  }
  bool empty() const { return pid == 0; }

  void serialize(ByteWriter& w) const;
  // Throws loomRemoteError on a kind this build does not know.
  static Handle deserialize(ByteReader& r);
};

// The handle of [p, p + bytes) in this process: loomMemAlloc's registration
// (HostShared) when it gave the range; for device memory a CudaDevice handle,
// with the runtime's IPC export where it gives one; else a handle of its kind that only threads of this process can
// use (its address). Empty for an empty range.
Handle handleOf(const void* p, size_t bytes);

class Mappings {
 public:
  // Two per local rank of a call, for calls of up to 32 ranks on a node.
  static constexpr size_t kCapacity = 64;

  Mappings() = default;
  ~Mappings();
  Mappings(const Mappings&) = delete;
  Mappings& operator=(const Mappings&) = delete;

  // The start of the range `handle` names, readable here: the address itself
  // in its own process, else a mapping of its allocation (memfds), or its
  // opened CUDA IPC handle; the last kCapacity of each kind kept. Throws
  // loom::Error (loomSystemError naming the owner's pid,
  // loomUnhandledCudaError) if it cannot be mapped, loomInvalidUsage for a
  // kind peers cannot reach.
  const std::byte* map(const Handle& handle);

  // The end of a call that read device memory through map(): with
  // LOOM_CUDA_IPC_CACHE=0 its CUDA IPC handles are closed (their owners may
  // free the memory once the call is over), else they stay for the next.
  // Closing one synchronizes the device (cudaIpcCloseMemHandle waits for
  // every stream), so a call that a user's CUDA stream waits for
  // (cuda::onUserStream) closes nothing, whatever the cache says: its
  // stream would wait for the call, and the call for its stream. Such a
  // call's views, and those it evicts from the cache, are closed by the next
  // call that no stream waits for, or with the Mappings.
  // Inline: every collective on the node's segment asks, and on host memory
  // there is never anything to close.
  void closeDeviceMappings() noexcept {
    if (!retired_.empty() || (!cacheOpened_ && !opened_.empty())) closeNow();
  }

 private:
  void closeNow() noexcept;

  struct Mapping {
    pid_t pid;
    uint64_t serial;
    std::byte* data;
    size_t bytes;
  };
  std::list<Mapping> mappings_;
  struct Opened {
    cuda::IpcHandle handle;
    std::unique_ptr<cuda::OpenedIpc> view;
  };
  std::list<Opened> opened_;  // most recently used first
  std::vector<std::unique_ptr<cuda::OpenedIpc>> retired_;  // evicted on a user's stream: closed later
  bool cacheOpened_ = true;   // LOOM_CUDA_IPC_CACHE, read when the first is opened
  bool cacheRead_ = false;
};

}  // namespace loom::memory
