// The staged device path: a collective whose buffers are on a CUDA device
// runs the host algorithms over pinned host copies of them. The input is
// copied to the host (after the work queued before the call), the call runs
// as any host call does, and the result is copied back, so every collective,
// algorithm, transport, dtype and op works on device memory, ranks may mix
// memory kinds in one call, and LOOM_DETERMINISTIC gives the host's bits.
// It costs a copy each way over the host's link to the device; the
// shared-memory collectives on one node read device buffers in place
// instead where they can (algorithms/shm_steps.hpp's readDeviceInPlace).
//
// Pieces hide most of that cost where the algorithm stages (across nodes):
// a large element-wise call (all-reduce, broadcast, reduce: element i of the
// result comes from element i of the inputs alone) in a job with GPUs runs
// as pieces of LOOM_STAGING_PIECE_BYTES, one call after another, and a rank
// on device memory queues every piece's copy to the host at once, starts
// piece k as soon as its copy is done, and copies piece k back while piece
// k + 1 runs: the copies cost about one piece each way instead of the
// whole. Every rank of the call runs the same pieces (the kind, the count,
// the algorithm and whether the job has GPUs are the same on all), a rank
// on host memory too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether either of the call's buffers is on a device.
bool touchesDevice(const Collective& c);

// Runs `run` on `c` with each device buffer swapped for a pinned copy.
void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run);

// The bytes of each piece `c` runs as, with pieces of up to `pieceBytes`
// (LOOM_STAGING_PIECE_BYTES, rounded down to 64 bytes): 0 unless `c` is
// element-wise and larger than one piece.
size_t pieceBytesFor(const Collective& c, size_t pieceBytes);

// Runs `run` on each piece of `c` in turn, its device buffers staged piece
// by piece with the copies beside the pieces (above).
void runInPieces(Communicator& comm, const Collective& c, size_t pieceBytes,
                 const std::function<void(const Collective&)>& run);

// Pieces run by runInPieces in this process: the tests' proof that a call
// went in pieces.
uint64_t piecesRun();

}  // namespace loom::coll
