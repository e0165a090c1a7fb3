// Shared-memory reduce among the ranks of one node: shmAllReduce's steps,
// except that only the root takes the result. When reducesWhole(), the root
// reduces every slot straight into its output (and stages nothing itself); otherwise
// every rank reduces its slice into the result slot and the root copies the
// finished piece out once all have. Rank order, one pass, as in all-reduce.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/shm_steps.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void shmReduce(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const size_t typeSize = plan.c.typeSize;
  const Pieces pieces(plan.c.blockBytes(), wholeElements(node.slotBytes(), typeSize));
  const std::span<const void*> sources = node.sources();

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    const bool whole = reducesWhole(n, piece.bytes);
    const uint64_t step = node.nextStep();
    if (!whole || me != root) copyBlock(node.stage(me, step), in, piece.bytes);
    node.arrive(step, plan.what);

    const Slice mine = whole ? Slice{0, me == root ? piece.bytes : 0} : sliceOf(piece.bytes, typeSize, n, me);
    std::byte* dst = whole ? plan.c.recv + piece.offset : node.result(step) + mine.offset;
    for (int q = 0; q < n; ++q) {
      sources[static_cast<size_t>(q)] = (q == me ? in : node.stage(q, step)) + mine.offset;
    }
    if (mine.bytes != 0) cpu::reduce(plan.c.type, plan.c.reduction.op, sources, dst, mine.bytes / typeSize);
    if (whole) continue;
    node.post(shm::Counter::Reduced, step);
    if (me == root) {
      node.waitAll(shm::Counter::Reduced, step, plan.what);
      copyBlock(plan.c.recv + piece.offset, node.result(step), piece.bytes);
    }
  }
}

}  // namespace loom::coll
