// Sends and receives that run on the caller's CUDA stream with no host in
// the loop, over the communicator's resident area (comm/resident_area.hpp),
// between ranks of one node whose devices reach each other's memory. A
// message goes as pieces of at most one slot (ResidentArea::kP2pSlotBytes),
// numbered per ordered pair, through the sender's two slots for its
// receiver:
//   send piece k:    once the receiver has taken piece k - 2 (the slot's
//                    last use), copy the piece into slot k % 2 and write k
//                    into the receiver's line ("sent");
//   receive piece k: once the sender's k is in this rank's line, copy the
//                    piece out of the sender's slot and write k into the
//                    sender's line ("taken").
// The sender also publishes each piece's place in its line
// (base/device/published_piece.hpp) and the receiver copies from that
// place, loaded when the copy runs: the slot, or, for a message of more
// than two pieces (whose sender waits for its receiver anyway) from a
// buffer its receiver may read in place (ResidentArea::placeForPeers), the
// sender's buffer itself, copied nowhere first; such a sender's stream goes
// on once the receiver has taken the last piece. Such a sender publishes
// every piece at once, with the first, as a range, and "sent" up to the
// last, so that its receiver's stream never waits for it between pieces.
// Where the ranks are threads of one process on one GPU
// (ResidentArea::sharesEveryBuffer, known to both ends), such a message
// goes as one piece, from the sender's buffer or, where the receiver may
// not read that as it lies, a copy of the call's own.
// Every wait is a stream memory operation on the rank's own line. A group's
// messages go by channel, one per peer and direction, each on a stream of
// its own forked from the caller's and joined back to it (events), the
// messages of a channel one after another in call order: so a rank's
// receive never waits behind its own send, whatever the sizes and however
// each side groups its calls (PyTorch's batch_isend_irecv sends everything
// first; a peer may receive first, alone), as NCCL's per-peer channels run.
// Both sides of a message must take this path (device buffers on CUDA
// streams, as NCCL's users call it) and agree on its size, as NCCL asks.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "comm/resident_area.hpp"
#include "memory/memory_kind.hpp"

namespace loom {

struct ResidentOp {
  bool send = false;
  int peer = -1;
  std::byte* buffer = nullptr;
  size_t bytes = 0;
};

// Whether a send or receive of `bytes` of memory of `kind` on `stream`
// (`onCudaStream`: a cudaStream_t) runs resident: device memory, or nothing,
// on a CUDA stream of a communicator whose area is ready. Decided here, once,
// as collectives/call_path.hpp decides for collectives.
bool runsResident(const ResidentArea* area, memory::MemoryKind kind, size_t bytes, bool onCudaStream);

// The pieces `ops` (one group's of one rank) will queue, as the
// communicator's entry gate takes them (Communicator::enterMessages) before
// any of the group's work is queued.
std::vector<ResidentArea::MessageClaim> residentMessages(ResidentArea& area, std::span<const ResidentOp> ops);

// Queues `ops` (one group's on one stream, in call order) on `stream` and
// returns, once past the communicator's entry gate (Communicator::passGate).
void queueResidentPointToPoint(ResidentArea& area, std::span<const ResidentOp> ops, void* stream);

}  // namespace loom
