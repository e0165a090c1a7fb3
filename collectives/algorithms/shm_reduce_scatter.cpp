// Shared-memory reduce-scatter among the ranks of one node. Each step takes
// the same piece of every block: a rank stages its pieces of the blocks that
// the others own, arrives, and reduces the pieces of its own block from every
// rank's slot (its own straight from its input), in rank order, straight into
// its output. One synchronization per step, and no result slot: each rank's
// output is private.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and it
// reduces its block straight from them (readInPlace).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers) {
  const size_t block = plan.c.blockBytes();
  const size_t mine = static_cast<size_t>(node.localRank()) * block;
  const std::span<const void*> sources = node.sources();
  for (int q = 0; q < node.localSize(); ++q) sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)] + mine;
  {
    const shm::PeerReads reading(node, plan.what);
    cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv, elementsIn(block, plan.c.typeSize));
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

}  // namespace

void shmReduceScatter(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t typeSize = plan.c.typeSize;
  const size_t block = plan.c.blockBytes();
  // A slot holds one piece of each of the n blocks.
  const size_t stepBytes = wholeElements(node.slotBytes() / static_cast<size_t>(n), typeSize);
  const Pieces pieces(block, stepBytes);
  const std::span<const void*> sources = node.sources();
  if (pieces.count() > 1) node.offerBuffers(plan.c.send, block * static_cast<size_t>(n), plan.c.recv, block);

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const uint64_t step = node.nextStep();
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      copyBlock(node.stage(me, step) + static_cast<size_t>(j) * stepBytes,
                plan.c.send + static_cast<size_t>(j) * block + piece.offset, piece.bytes);
    }
    node.arrive(step, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers);
      return;
    }

    for (int q = 0; q < n; ++q) {
      sources[static_cast<size_t>(q)] = q == me ? plan.c.send + static_cast<size_t>(me) * block + piece.offset
                                                : node.stage(q, step) + static_cast<size_t>(me) * stepBytes;
    }
    if (piece.bytes != 0) {
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + piece.offset,
                  elementsIn(piece.bytes, typeSize));
    }
  }
}

}  // namespace loom::coll
