#include "collectives/device_staging.hpp"

#include <algorithm>
#include <optional>

#include "base/device/staging.hpp"

namespace loom::coll {

using memory::MemoryKind;

bool touchesDevice(const Collective& c) {
  return c.sendKind == MemoryKind::CudaDevice || c.recvKind == MemoryKind::CudaDevice;
}

void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run) {
  cuda::StagingArea& area = comm.staging;
  cuda::DeviceStream& copies = area.stream();
  const bool stageSend = c.sendKind == MemoryKind::CudaDevice;
  const bool stageRecv = c.recvKind == MemoryKind::CudaDevice;
  const size_t sendBytes = stageSend ? c.sendBytes : 0;
  const size_t recvBytes = stageRecv ? c.recvBytes : 0;
  std::byte* const deviceRecv = c.recv;

  // In place (the same pointer): one pinned copy serves as both.
  const bool shared = stageSend && stageRecv && c.send == c.recv;
  std::optional<cuda::StagingArea::Lease> in;
  std::optional<cuda::StagingArea::Lease> out;
  if (!cuda::onUserStream()) copies.afterDefaultStream();
  if (stageSend) {
    in.emplace(area.lease(shared ? std::max(sendBytes, recvBytes) : sendBytes));
    copies.copy(in->data(), c.send, sendBytes);
    c.send = in->data();
    c.sendKind = MemoryKind::CudaHostPinned;
  }
  if (stageRecv) {
    if (!shared) out.emplace(area.lease(recvBytes));
    c.recv = shared ? in->data() : out->data();
    c.recvKind = MemoryKind::CudaHostPinned;
  }
  copies.synchronize(comm.deviceWaitCheck());

  run(c);

  if (stageRecv && recvBytes != 0) {
    copies.copy(deviceRecv, c.recv, recvBytes);
    copies.synchronize(comm.deviceWaitCheck());
  }
}

}  // namespace loom::coll
