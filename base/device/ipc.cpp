#include "base/device/ipc.hpp"

namespace loom::cuda {

std::optional<IpcExport> exportIpc(const void* p) {
  DeviceRuntime& rt = runtime();
  return rt.deviceCount() == 0 ? std::nullopt : rt.exportIpc(p);
}

OpenedIpc::OpenedIpc(const IpcHandle& handle)
    : runtime_(runtime()), base_(static_cast<std::byte*>(runtime_.openIpc(handle))) {}

OpenedIpc::~OpenedIpc() { runtime_.closeIpc(base_); }

}  // namespace loom::cuda
