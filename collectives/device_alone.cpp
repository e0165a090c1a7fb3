#include "collectives/device_alone.hpp"

#include "base/device/cuda.hpp"
#include "collectives/device_staging.hpp"

namespace loom::coll {

bool runsAloneOnDevice(const Communicator& comm, const Collective& c) {
  return comm.size() == 1 && touchesDevice(c) && c.reduction.op != cpu::ReduceOp::PreMulSum;
}

void runAloneOnDevice(const Collective& c, void* stream) {
  cuda::copyOnStream(c.recv, c.send, c.blockBytes(), stream);
}

}  // namespace loom::coll
