// Hierarchical all-gather, for several nodes with the same number L of ranks
// each:
//
//   1. across nodes, a ring all-gather among the ranks with this rank's local
//      index, one per node: each ends with its H counterparts' blocks in
//      place in its output;
//   2. within each node, a gather on the node's shared segment: each local
//      rank contributes the H blocks it now holds, and every rank copies the
//      others' into its output.
//
// The node's L rings run at once, each carrying its ranks' blocks, so the
// node's link carries the (H-1) L blocks it must receive, where the flat
// ring's link between two nodes carries n-1. Nodes with unequal rank counts
// have no ring across hosts: there the flat ring does all of it.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"

namespace loom::coll {

void hierarchicalAllGather(const Plan& plan) {
  if (plan.acrossHosts == nullptr || plan.node == nullptr) return ringAllGather(plan);
  const size_t block = plan.c.blockBytes();

  Plan across = plan;
  across.nranks = plan.acrossHosts->size();
  across.ring = plan.acrossHosts;
  ringAllGather(across);

  // Local rank q's block from host h is that of the h-th host's q-th rank.
  shmGatherBlocks(plan, {.input = plan.c.recv,
                         .inputBytes = block * static_cast<size_t>(plan.nranks),
                         .perRank = across.nranks,
                         .block = block,
                         .inputByRank = true,
                         .outputByRank = true,
                         .hostRanks = &plan.comm.placement().hostRanks});
}

// One ring across nodes and one pass on the node's segment, which adds
// little to the ring (0.84 of the flat ring's time at 16 KiB, 0.53-0.75 at
// 256 KiB-16 MiB across two namespaces, bench/RESULTS.md).
extern const AlgorithmEntry kHierarchicalAllGather{
    .name = "hier",
    .kind = CollectiveKind::AllGather,
    .run = hierarchicalAllGather,
    .costUs = [](const CostModel& m, size_t bytes) {
      return m.acrossUniformNodes(1, CostModel::onSegment(1, static_cast<double>(bytes)), bytes);
    },
    .needs = Needs::UniformNodes};

}  // namespace loom::coll
