// Shared-memory all-gather among the ranks of one node: per step every rank
// stages a piece of its block, arrives, and copies the same piece of every
// other rank's block out of their slots (its own straight from its input).
// One synchronization per step.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and it
// copies their blocks straight from there (readInPlace).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers) {
  const size_t block = plan.c.blockBytes();
  {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < node.localSize(); ++q) {
      copyBlock(plan.c.recv + static_cast<size_t>(q) * block, peers.send[static_cast<size_t>(q)], block);
    }
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

}  // namespace

void shmAllGather(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  const Pieces pieces(block, wholeElements(node.slotBytes(), plan.c.typeSize));
  if (pieces.count() > 1) node.offerBuffers(plan.c.send, block, plan.c.recv, block * static_cast<size_t>(n));

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    const uint64_t step = node.nextStep();
    copyBlock(node.stage(me, step, piece.bytes), in, piece.bytes);
    node.arrive(step, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers);
      return;
    }

    for (int q = 0; q < n; ++q) {
      std::byte* out = plan.c.recv + static_cast<size_t>(q) * block + piece.offset;
      copyBlock(out, q == me ? in : node.stage(q, step, piece.bytes), piece.bytes);
    }
  }
}

}  // namespace loom::coll
