// Hierarchical all-reduce, for several nodes with the same number L of ranks
// each (NCCL's and Horovod's two-level scheme):
//
//   1. within each node, a reduce-scatter on the node's shared segment: local
//      rank j ends with block j (1/L of the buffer) summed over the node,
//      written straight to its place in the output;
//   2. across nodes, a ring all-reduce of block j among the ranks with local
//      index j, one per node, so the node's L ranks carry L disjoint blocks
//      over the network at once and each byte crosses it 2(H-1)/H times
//      instead of the flat ring's 2(n-1)/n;
//   3. within each node, an all-gather on the segment puts the L finished
//      blocks in every rank's output.
//
// The elements that do not divide into L blocks (fewer than L) go first, by
// the flat ring. Nodes with unequal rank counts have no ring across hosts:
// there the flat ring does all of it.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {

void hierarchicalAllReduce(const Plan& plan) {
  if (plan.acrossHosts == nullptr || plan.node == nullptr) return ringAllReduce(plan);
  const shm::NodeArea& node = *plan.node;
  const size_t ranks = static_cast<size_t>(node.localSize());
  const size_t me = static_cast<size_t>(node.localRank());
  const size_t blockCount = plan.c.count / ranks;
  const size_t blockBytes = blockCount * plan.c.typeSize;
  const size_t mainBytes = blockBytes * ranks;

  if (const size_t tail = plan.c.count - blockCount * ranks; tail != 0) {
    Plan rest = plan;
    rest.c.send = plan.c.send + mainBytes;
    rest.c.recv = plan.c.recv + mainBytes;
    rest.c.count = tail;
    ringAllReduce(rest);
  }
  std::byte* mine = plan.c.recv + me * blockBytes;

  Plan within = plan;
  within.c.kind = CollectiveKind::ReduceScatter;
  within.c.count = blockCount;
  within.c.recv = mine;
  shmReduceScatter(within);

  Plan across = plan;
  across.c.send = mine;
  across.c.recv = mine;
  across.c.count = blockCount;
  across.nranks = plan.acrossHosts->size();
  across.ring = plan.acrossHosts;
  ringAllReduce(across);

  within.c.kind = CollectiveKind::AllGather;
  within.c.send = mine;
  within.c.recv = plan.c.recv;
  shmAllGather(within);
}

// The node phases' fixed cost is what was measured across two namespaces
// with 2 ranks each (bench/RESULTS.md): about three socket hand-offs (its
// tail also takes the flat ring), so the flat algorithms keep messages
// below ~128 KiB. Two passes: a reduce-scatter and an all-gather on each
// node's segment, a ring all-reduce across the nodes between them.
extern const AlgorithmEntry kHierarchicalAllReduce{
    .name = "hier",
    .kind = CollectiveKind::AllReduce,
    .run = hierarchicalAllReduce,
    .costUs = [](const CostModel& m, size_t bytes) {
      const double nodePhases = 3 * m.path().latencyUs + 2 * static_cast<double>(bytes) /
                                                           (CostModel::kSegmentPath.bandwidthGBps * 1e3);
      return m.acrossUniformNodes(2, nodePhases, bytes);
    },
    .needs = Needs::UniformNodes};

}  // namespace loom::coll
