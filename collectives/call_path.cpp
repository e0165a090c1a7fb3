#include "collectives/call_path.hpp"

#include "base/error.hpp"
#include "collectives/device_alone.hpp"
#include "collectives/resident_collectives.hpp"

namespace loom::coll {

CallPath choosePath(const Communicator& comm, const Collective& c, const void* stream, bool onCudaStream) {
  if ((stream == nullptr || onCudaStream) && runsAloneOnDevice(comm, c)) return CallPath::Alone;
  // An empty call on a CUDA stream is nothing, as NCCL discards it: it
  // meets no peer (a stream held for one could hold a thread's device
  // synchronization with it: comm/entry_gate.hpp).
  if (onCudaStream && c.count == 0) return CallPath::Alone;
  if (onCudaStream && runsResident(comm, c)) return CallPath::Resident;
  return CallPath::Host;
}

void runOnStream(Communicator& comm, const Collective& c, CallPath path, void* stream) {
  switch (path) {
    case CallPath::Alone: return runAloneOnDevice(c, stream);
    case CallPath::Resident: return runResident(comm, c, stream);
    case CallPath::Host: break;
  }
  throw Error(loomInternalError, "a host call queued on a stream");
}

}  // namespace loom::coll
