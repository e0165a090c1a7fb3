// Shared-memory all-reduce among the ranks of one node. The buffer goes
// through the node's segment one step (a slot's worth) at a time:
//
//   1. every rank copies its piece of the input into its staging slot and
//      arrives (one synchronization);
//   2. small pieces, or two ranks (reducesWhole): every rank reduces all the
//      slots straight into its output, and the step is done;
//   3. otherwise every rank reduces its 1/n slice of the piece from all the
//      slots into the shared result slot, says so (a second synchronization),
//      and copies the whole reduced piece out.
//
// When the message takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive also tells each rank where its peers' buffers are
// (shm::NodeArea::offerBuffers), and no more is staged: each rank
// reduces its 1/n slice straight from every rank's input into its own output,
// then copies the other slices from their owners' outputs (readInPlace).
//
// Either way the sources are combined in rank order in one pass, so every
// rank gets the same bits whatever the path, the step size or the message
// size (the LOOM_DETERMINISTIC order).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {
namespace {

// After the first step's arrive: every rank's input and output are readable here.
void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers) {
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t bytes = plan.c.blockBytes();
  const std::span<const void*> sources = node.sources();

  // Reduce-scatter: this rank's slice, from every rank's input, into its output.
  const Slice mine = sliceOf(bytes, plan.c.typeSize, n, me);
  for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)] + mine.offset;
  if (mine.bytes != 0) {
    cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + mine.offset, mine.bytes / plan.c.typeSize);
  }
  node.sync(plan.what);  // every slice is final, and every input has been read

  // All-gather: the other slices, from their owners' outputs.
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    const Slice theirs = sliceOf(bytes, plan.c.typeSize, n, q);
    copyBlock(plan.c.recv + theirs.offset, peers.recv[static_cast<size_t>(q)] + theirs.offset, theirs.bytes);
  }
  // No rank may return, and reuse its buffers, while another still reads them.
  node.sync(plan.what);
}

}  // namespace

void shmAllReduce(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t typeSize = plan.c.typeSize;
  const Pieces pieces(plan.c.blockBytes(), wholeElements(node.slotBytes(), typeSize));
  const std::span<const void*> sources = node.sources();
  if (pieces.count() > 1) node.offerBuffers(plan.c.send, plan.c.blockBytes(), plan.c.recv, plan.c.blockBytes());

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    std::byte* out = plan.c.recv + piece.offset;
    const uint64_t step = node.nextStep();
    copyBlock(node.stage(me, step), in, piece.bytes);
    node.arrive(step, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers);
      return;
    }

    if (reducesWhole(n, piece.bytes)) {
      for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = q == me ? in : node.stage(q, step);
      if (piece.bytes != 0) cpu::reduce(plan.c.type, plan.c.reduction.op, sources, out, piece.bytes / typeSize);
      continue;
    }
    const Slice mine = sliceOf(piece.bytes, typeSize, n, me);
    for (int q = 0; q < n; ++q) {
      sources[static_cast<size_t>(q)] = (q == me ? in : node.stage(q, step)) + mine.offset;
    }
    if (mine.bytes != 0) {
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, node.result(step) + mine.offset, mine.bytes / typeSize);
    }
    node.post(shm::Counter::Reduced, step);
    node.waitAll(shm::Counter::Reduced, step, plan.what);
    copyBlock(out, node.result(step), piece.bytes);
  }
}

}  // namespace loom::coll
