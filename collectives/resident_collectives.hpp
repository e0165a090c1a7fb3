// Collectives that run on the caller's CUDA stream with no host in the
// loop, over the communicator's resident area (comm/resident_area.hpp), as
// vLLM's custom all-reduce and MSCCL++'s one-shot algorithms do for small
// messages on one node. A call runs as pieces of at most one scratch slot of
// input each (of a block, or of each of n blocks side by side), and every
// piece is the same three steps, queued on the stream by the calling
// thread, which then returns:
//   publish: once every rank has finished reading the slot this piece uses
//            (two slots alternate, so their words in this rank's flag line
//            reach the piece's sequence - 2), its input is copied into it,
//            and behind the copy the sequence is written into every other
//            rank's line ("arrived"). The rank first writes where its part
//            lies into its own line (base/device/published_piece.hpp): its
//            slot, or, where every peer's kernels may read its input in
//            place (ResidentArea::placeForPeers: threads of one process;
//            processes once every peer opened its allocation), it needs no
//            scaling and no peer reads what it writes (an all-reduce in
//            place of several pieces puts its result aside, in memory of
//            the call's own, copied over its buffer at the end), its own
//            buffer, copied nowhere; such a rank then waits after the
//            call's last piece until every peer is done reading it;
//   read:    once every other rank's "arrived" in its own line reaches the
//            sequence, the rank reads what it needs from the published
//            places, which its kernels load when they run: one
//            reduction kernel over every rank's (all-reduce, the root's
//            reduce, a reduce-scatter's own block of each), or copies (all-
//            gather, broadcast, all-to-all, gather, scatter); an all-reduce
//            of 3 or more ranks from the area's two-shot size reads in two
//            shots (each rank reduces its n-th into its own slot and says
//            "reduced"; then copies the others' n-ths), about 2x the piece
//            read instead of n x;
//   release: it writes the sequence into every other rank's line ("done
//            reading yours") and into its own "finished" word, which the
//            host's watch reads (ResidentArea::overdue).
// Where every rank's kernels reach every rank's buffers without asking
// (threads of one process on one GPU), a call past one slot runs as one
// piece, every rank publishing its own buffers (or a copy in memory of the
// call's own, allocated on the stream, where they may not be read as they
// lie: a PreMulSum's input, a buffer on another GPU), an all-reduce in two
// shots, in place too: one round of flags where the scratch took one per
// slot (runWhole).
// A call whose send buffer lies in a symmetric window (loomCommWindowRegister)
// skips the publish: its peers read its input where it lies, one piece, and
// the call ends once every peer has read it (runInWindows); an all-reduce of
// two-shot size whose result lies in a window too reads in two shots from
// the windows.
// Every wait is on the rank's own memory and every write on a peer's; the
// waits are stream memory operations, so a waiting stream holds no SM and
// processes time-sliced on one GPU lose no slice to it. Reductions use
// cuda/kernels.hpp's arithmetic (the host's bits) over the ranks in rank
// order (LOOM_DETERMINISTIC's order). A rank that fails releases its own
// waiting streams (ResidentArea::release) and the call ends with the
// communicator's error (loomCommGetAsyncError).
#pragma once

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

// Whether `c` on a CUDA stream runs resident: a collective of device buffers
// (those the rank uses), of any size but 0, on a communicator whose
// resident area is ready. A PreMulSum's input is scaled as it is published
// and an average's result scaled (floats) or divided (integers) after the
// read, as the host path does, so both give its bits. The same answer on every
// rank for the same call (the area's readiness is agreed at init; the rest
// is the call's).
bool runsResident(const Communicator& comm, const Collective& c);

// Queues `c` on `stream` (a cudaStream_t) as above and returns. Refuses
// (loomInvalidUsage, naming both ranks) a call on the stream another rank
// of this process queued the same call on (ResidentArea::claimStream).
void runResident(Communicator& comm, const Collective& c, void* stream);

}  // namespace loom::coll
