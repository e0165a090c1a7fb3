// Shared-memory all-gather among the ranks of one node: per step every rank
// stages a piece of its block, arrives, and copies the same piece of every
// other rank's block out of their slots (its own straight from its input).
// One synchronization per step.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {

void shmAllGather(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  const Pieces pieces(block, wholeElements(node.slotBytes(), plan.c.typeSize));

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    const uint64_t step = node.nextStep();
    copyBlock(node.stage(me, step), in, piece.bytes);
    node.arrive(step, plan.what);

    for (int q = 0; q < n; ++q) {
      std::byte* out = plan.c.recv + static_cast<size_t>(q) * block + piece.offset;
      copyBlock(out, q == me ? in : node.stage(q, step), piece.bytes);
    }
  }
}

}  // namespace loom::coll
