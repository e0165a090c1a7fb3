// The staged device path: a collective whose buffers are on a CUDA device
// runs the host algorithms over pinned host copies of them. The input is
// copied to the host (after the work queued before the call), the call runs
// as any host call does, and the result is copied back, so every collective,
// algorithm, transport, dtype and op works on device memory, ranks may mix
// memory kinds in one call, and LOOM_DETERMINISTIC gives the host's bits.
// It costs a copy each way over the host's link to the device; the
// shared-memory collectives on one node read device buffers in place
// instead where they can (algorithms/shm_steps.hpp's readDeviceInPlace).
#pragma once

#include <functional>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether either of the call's buffers is on a device.
bool touchesDevice(const Collective& c);

// Runs `run` on `c` with each device buffer swapped for a pinned copy.
void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run);

}  // namespace loom::coll
