// CUDA IPC: how a rank lets the processes beside it read its device memory
// in place. An export names the whole cudaMalloc allocation holding a
// pointer (CUDA's handle opens at the allocation's start) and the pointer's
// offset into it. The importer keeps what it opened for later calls, or
// closes it after each (memory/registration.hpp, LOOM_CUDA_IPC_CACHE): CUDA
// leaves undefined what an opened handle does once its owner frees the
// memory, and a user's buffer may be freed between calls.
//
// Nothing of CUDA in this header. Without CUDA or a device nothing is
// exportable; the tests' fake device (cuda.hpp) shares its memory through a
// memfd instead, which memory/registration maps as it maps loomMemAlloc's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace loom::cuda {

inline constexpr size_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
using IpcHandle = std::array<std::byte, kIpcHandleBytes>;

struct IpcExport {
  IpcHandle handle{};
  uint64_t offset = 0;  // of the pointer from its allocation's start
};

// The export of the allocation holding `p`, or nullopt where CUDA will not
// export it (memory from cudaMallocAsync pools or the virtual memory API,
// managed memory, no device): such buffers are staged through the host.
std::optional<IpcExport> exportIpc(const void* p);

// A peer's export, opened in this process; closed when the object goes.
class OpenedIpc {
 public:
  // Throws loomUnhandledCudaError naming CUDA's reason.
  explicit OpenedIpc(const IpcHandle& handle);
  ~OpenedIpc();
  OpenedIpc(const OpenedIpc&) = delete;
  OpenedIpc& operator=(const OpenedIpc&) = delete;

  // The allocation's start, here.
  const std::byte* base() const { return base_; }

 private:
  std::byte* base_ = nullptr;
};

}  // namespace loom::cuda
