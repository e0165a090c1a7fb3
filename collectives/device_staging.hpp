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
// a large call in a job with GPUs runs as pieces, one call after another,
// and a rank on device memory queues every piece's copy to the host at once,
// starts piece k as soon as its copy is done, and copies piece k back while
// piece k + 1 runs: the copies cost about one piece each way instead of the
// whole. A piece is the same range of every block: of the one block of an
// all-reduce, broadcast or reduce (element i of the result comes from
// element i of the inputs alone), and of each of the n blocks of the calls
// in blocks (all-gather, reduce-scatter, all-to-all, gather, scatter; rank
// j's block of the result comes from blocks j or rank j's input alone),
// whose piece is a call of the same kind on its rows side by side, in
// stand-ins that hold the pieces one after another (pinned ones for device
// memory, copied in one 2D copy a piece; host ones for host memory). Pieces
// are LOOM_STAGING_PIECE_BYTES of a block, 1/n of that of each of n blocks.
// Every rank of the call runs the same pieces (the kind, the count, the
// ranks, the algorithm and whether the job has GPUs are the same on all), a
// rank on host memory too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether either of the call's buffers is on a device. Inline: every call
// asks, several times.
inline bool touchesDevice(const Collective& c) {
  return c.sendKind == memory::MemoryKind::CudaDevice || c.recvKind == memory::MemoryKind::CudaDevice;
}

// Runs `run` on `c` with each device buffer swapped for a pinned copy.
void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run);

// The bytes of each block's piece that `c` runs as, on `ranks` ranks, with
// pieces of up to `pieceBytes` (LOOM_STAGING_PIECE_BYTES; of each of n
// blocks its 1/n; rounded down to 64 bytes): 0 unless a block is larger.
size_t pieceBytesFor(const Collective& c, size_t pieceBytes, int ranks);

// Runs `run` on each piece of `c` in turn, pieces of `pieceBytes` of each
// block (pieceBytesFor), its device buffers staged piece by piece with the
// copies beside the pieces (above).
void runInPieces(Communicator& comm, const Collective& c, size_t pieceBytes,
                 const std::function<void(const Collective&)>& run);

}  // namespace loom::coll
