#include "collectives/device_alone.hpp"

#include "base/device/cuda.hpp"

namespace loom::coll {

bool runsAloneOnDevice(const Communicator& comm, const Collective& c) {
  const bool onDevice =
      c.sendKind == memory::MemoryKind::CudaDevice || c.recvKind == memory::MemoryKind::CudaDevice;
  return comm.size() == 1 && onDevice && c.reduction.op != cpu::ReduceOp::PreMulSum;
}

void runAloneOnDevice(const Collective& c, void* stream) {
  cuda::copyOnStream(c.recv, c.send, c.blockBytes(), stream);
}

}  // namespace loom::coll
