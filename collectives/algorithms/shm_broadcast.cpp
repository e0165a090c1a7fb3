// Shared-memory broadcast among the ranks of one node: per step the root
// stages a piece, everyone arrives (the others to say they are done with the
// step before the last, so the root may reuse its buffer), and every other
// rank copies the piece out of the root's slot.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {

void shmBroadcast(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const bool isRoot = node.localRank() == root;
  const Pieces pieces(plan.c.blockBytes(), wholeElements(node.slotBytes(), plan.c.typeSize));

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const uint64_t step = node.nextStep();
    if (isRoot) copyBlock(node.stage(root, step), plan.c.send + piece.offset, piece.bytes);
    node.arrive(step, plan.what);
    copyBlock(plan.c.recv + piece.offset, isRoot ? plan.c.send + piece.offset : node.stage(root, step), piece.bytes);
  }
}

}  // namespace loom::coll
