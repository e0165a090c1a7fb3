// Where a collective runs, chosen once, where the call is made, from what
// every rank of the call agrees on (the communicator's size and resident
// area, the call's kind, count and op) and this rank's buffers and stream:
//   - Alone: one rank on device memory, a copy on the stream (device_alone.hpp),
//     and an empty call on a CUDA stream, nothing (NCCL discards it);
//   - Resident: ranks of one node on device memory, on a CUDA stream, queued
//     on the stream as device work with no host thread (resident_collectives.hpp);
//   - Host: everything else, run by a host thread (run.hpp), which stages
//     device buffers through pinned memory or reads them in place as the
//     tuner's algorithm allows.
// Alone and Resident are queued by the calling thread when its group ends
// (comm/engine/group.hpp's OnStream); Host calls go to the group as calls.
#pragma once

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

enum class CallPath { Alone, Resident, Host };

// `stream`: the call's; `onCudaStream`: whether it is a cudaStream_t (not
// NULL, not a loom host stream).
CallPath choosePath(const Communicator& comm, const Collective& c, const void* stream, bool onCudaStream);

// Queues an Alone or Resident call on `stream`.
void runOnStream(Communicator& comm, const Collective& c, CallPath path, void* stream);

}  // namespace loom::coll
