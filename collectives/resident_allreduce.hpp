// A collective that runs on the caller's CUDA stream with no host in the
// loop: the one-shot all-reduce over the communicator's resident area
// (comm/resident_area.hpp), as vLLM's custom all-reduce and MSCCL++'s
// one-shot do for small messages on one node. The calling thread queues on
// the stream, and returns:
//   1. a wait until every rank has finished reading its scratch in the last
//      call (their words in its flag line reach the call's sequence - 1);
//   2. a copy of its input into its scratch, and behind it a write of the
//      call's sequence into every other rank's flag line ("arrived");
//   3. a wait until every other rank's "arrived" in its own line reaches it;
//   4. one reduction kernel that reads every rank's scratch in rank order
//      and writes the result (cuda/kernels.hpp's arithmetic: the host's bits,
//      and LOOM_DETERMINISTIC's rank order);
//   5. a write, in every other rank's flag line, that it is done reading.
// Every wait is on the rank's own line, every write on a peer's. The waits
// are stream memory operations, so a waiting stream holds no SM
// and processes time-sliced on one GPU lose no slice to it. A rank that
// fails releases every waiting stream (ResidentArea::release) and the call
// ends with the communicator's error (loomCommGetAsyncError).
#pragma once

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether `c` on a CUDA stream runs resident: an all-reduce (sum, prod, min,
// max) of device buffers that fits one rank's scratch, on a communicator
// whose resident area is ready. The same answer on every rank for the same
// call (the area's readiness is agreed at init; the rest is the call's).
bool runsResident(const Communicator& comm, const Collective& c);

// Queues `c` on `stream` (a cudaStream_t) as above and returns.
void runResident(Communicator& comm, const Collective& c, void* stream);

// Calls queued resident in this process: the tests' proof that a call took
// no host path.
uint64_t residentCalls();

}  // namespace loom::coll
