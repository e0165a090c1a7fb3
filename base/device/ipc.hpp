// CUDA IPC: how a rank lets the processes beside it read its device memory
// in place. An export names the whole cudaMalloc allocation holding a
// pointer (CUDA's handle opens at the allocation's start) and the pointer's
// offset into it. The importer keeps what it opened for later calls, or
// closes it after each (memory/registration.hpp, LOOM_CUDA_IPC_CACHE): CUDA
// leaves undefined what an opened handle does once its owner frees the
// memory, and a user's buffer may be freed between calls.
//
// Nothing of CUDA in this header: the process's DeviceRuntime (runtime.hpp)
// exports and opens. Without CUDA or a device nothing is exportable; the
// tests' fake device exports an allocation's memfd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "base/device/runtime.hpp"

namespace loom::cuda {

// The export of the allocation holding `p`, or nullopt where CUDA will not
// export it (memory from cudaMallocAsync pools or the virtual memory API,
// managed memory, no device): such buffers are staged through the host.
std::optional<IpcExport> exportIpc(const void* p);

// A peer's export, opened in this process; closed when the last object of
// that allocation goes. CUDA maps an allocation once per process (a second
// cudaIpcOpenMemHandle of it fails, "resource already mapped"), and several
// owners here may want the same one (the collectives' and the sends'
// mappings, a window's or resident area's view), so the views are shared:
// one opening per allocation for the process, counted.
class OpenedIpc {
 public:
  // Throws loomUnhandledCudaError naming CUDA's reason.
  explicit OpenedIpc(const IpcHandle& handle);
  ~OpenedIpc();
  OpenedIpc(const OpenedIpc&) = delete;
  OpenedIpc& operator=(const OpenedIpc&) = delete;

  // The allocation's start, here.
  const std::byte* base() const;

  struct View;  // one opening, shared (ipc.cpp)

 private:
  std::shared_ptr<View> view_;
};

}  // namespace loom::cuda
