// One rank on device memory. With one rank every collective is a copy of
// its own block (in place: nothing), so a call of a one-rank communicator
// whose buffers include device memory is that copy, queued on the call's
// CUDA stream: no stream gate, no host thread, no staging through pinned
// memory, as NCCL's one-rank call is one kernel on the stream. The path is
// chosen where the call is made (call_path.hpp) and the copy queued when its
// group ends (comm/engine/group.hpp's OnStream).
#pragma once

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether `c` on `comm` is such a call: one rank, a buffer on a CUDA device,
// and a reduction that a copy is (every one but PreMulSum, whose scaling
// the host path does; an average of one is the value itself).
bool runsAloneOnDevice(const Communicator& comm, const Collective& c);

// Queues c's copy on `stream` (a cudaStream_t; null: the legacy default
// stream, waited for).
void runAloneOnDevice(const Collective& c, void* stream);

}  // namespace loom::coll
